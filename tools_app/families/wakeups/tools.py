"""`schedule_wakeup`: wake this chat later with a prompt, as if the person sent it."""
from kernel.refusals import Refused
from sessions_app.models import iso
from tools_app.catalog.registry import Tool

from . import actions

MIN_DELAY, MAX_DELAY = 60, 2592000


def schedule_wakeup(context, arguments):
    if arguments.get("stop"):
        cancelled = actions.do_cancel_wakeup(context.chat)
        if cancelled is None:
            return "No wakeup is scheduled in this chat."
        return f"Cancelled the wakeup that was due at {iso(cancelled.due)}."
    delay, prompt = arguments.get("delaySeconds"), arguments.get("prompt")
    if delay is None or not prompt:
        raise Refused("schedule_wakeup needs delaySeconds and prompt, or stop: true.")
    wakeup = actions.do_schedule_wakeup(context.chat, context.turn.sender, prompt, delay)
    return f"Wakeup due at {iso(wakeup.due)} (in {delay} s). It replaces any earlier wakeup of this chat."


WAKEUP_TOOLS = (
    Tool("schedule_wakeup", title="Schedule Wakeup",
         description=("Wake this chat later with a prompt, as if the person sent it: delaySeconds from 60 to "
                      "2592000. One wakeup per chat: a new call replaces it; stop: true cancels it."),
         input_schema={"type": "object", "properties": {
             "delaySeconds": {"type": "integer", "minimum": MIN_DELAY, "maximum": MAX_DELAY},
             "prompt": {"type": "string", "minLength": 1}, "stop": {"type": "boolean"}}},
         executor=schedule_wakeup, effects=frozenset({"writes"})),
)
