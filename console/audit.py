"""The audit is read off ToolCall rows: every call the host ran and every call it refused is one
(a refused call is completed with success false and the refusal sentence as its error). A
refusal's reason is told by its sentence, whose wording the catalog and the grants fix."""
import csv
import json
import re
from typing import Any

from django.db.models import Case, CharField, Q, Value, When

from grants.models import TenantScopedQuerySet
from tools_app.credentials import CREDENTIAL_NAME, MASK, masked_url

MESSAGE = "result__error__message"

# (reason, label, what its sentence looks like), checked in this order.
REFUSAL_REASONS = (
    ("grant", "grant", Q(**{f"{MESSAGE}__icontains": " may not "})),
    ("limit", "limit", Q(**{f"{MESSAGE}__startswith": "Refusing to"})),
    ("availability", "availability", Q(**{f"{MESSAGE}__icontains": "only available in chats"})
     | Q(**{f"{MESSAGE}__icontains": "is not enabled without a session"})),
    ("unknown_tool", "unknown tool", Q(**{f"{MESSAGE}__startswith": "No tool named"})),
)
TIMED_OUT = Q(**{f"{MESSAGE}__icontains": " got no answer from "})
OPEN = ("streaming", "running")

OUTCOMES = (
    ("waiting", "waiting for its client"),
    ("running", "running"),
    ("ok", "ok"),
    ("refused", "refused"),
    ("timed_out", "timed out"),
    ("failed", "failed"),
    ("cancelled", "cancelled"),
)


def _refused():
    any_refusal = Q(pk__in=[])
    for _, _, sentence in REFUSAL_REASONS:
        any_refusal |= sentence
    return any_refusal


class AuditQuerySet(TenantScopedQuerySet):
    def with_outcome(self):
        """Annotate `outcome` (one of OUTCOMES) and `refusal_reason` (a REFUSAL_REASONS key or "")."""
        outcome = Case(
            When(Q(status__in=OPEN) & ~Q(contributor_client_id=""), then=Value("waiting")),
            When(status__in=OPEN, then=Value("running")),
            When(status="cancelled", then=Value("cancelled")),
            When(result__success=True, then=Value("ok")),
            When(_refused(), then=Value("refused")),
            When(TIMED_OUT, then=Value("timed_out")),
            default=Value("failed"), output_field=CharField(),
        )
        reason = Case(
            *[When(Q(status="completed") & sentence, then=Value(key)) for key, _, sentence in REFUSAL_REASONS],
            default=Value(""), output_field=CharField(),
        )
        return self.annotate(outcome=outcome, refusal_reason=reason)

    def for_audit(self):
        return (self.with_outcome()
                .select_related("tenant", "caller", "turn__sender", "turn__chat__session")
                .order_by("-created", "-id"))


def refusal_sentence(call):
    if call.result and not call.result.get("success", True):
        return (call.result.get("error") or {}).get("message", "")
    return ""


def duration_ms(call):
    if call.completed is None:
        return None
    return round((call.completed - call.created).total_seconds() * 1000)


# In a string argument (a shell command): `Bearer <token>` and `NAME_TOKEN=<value>`, `--api-key=<value>`.
BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[^\s'\"]+")
NAMED_VALUE = re.compile(r"([\w-]*(?:token|key|secret|passw|pwd|credential)[\w-]*)(=|:\s*)([^\s'\"&]+)", re.IGNORECASE)
ARGUMENTS_SHOWN = 80  # characters of a call's arguments the audit shows
ARGUMENTS_EXPORTED = 2000  # and the CSV carries


def masked(value: Any) -> Any:
    """A call's arguments with what looks like a credential reading `<set>`: a value under a
    credential-like key, a URL's userinfo and query, a bearer token or `KEY=value` in a string."""
    if isinstance(value, dict):
        return {k: (MASK if value[k] and isinstance(k, str) and CREDENTIAL_NAME.search(k) else masked(value[k]))
                for k in value}
    if isinstance(value, list):
        return [masked(item) for item in value]
    if isinstance(value, str):
        value = BEARER.sub(lambda m: f"{m.group(1)} {MASK}", value)
        value = NAMED_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", value)
        return re.sub(r"\w+://\S+", lambda m: masked_url(m.group(0)), value)
    return value


def arguments_text(call, limit: int = ARGUMENTS_SHOWN) -> str:
    """The call's arguments as JSON, credentials masked, cut to `limit` characters."""
    text = json.dumps(masked(call.input), sort_keys=True, ensure_ascii=False) if call.input else ""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def who(call):
    """The turn's sender, or for a sessionless call its caller."""
    person = call.turn.sender if call.turn_id else call.caller
    return person.username if person else "nobody"


CSV_COLUMNS = ("time", "tenant", "who", "session", "chat", "tool", "arguments", "source", "contributor", "status",
               "outcome", "refusal reason", "sentence", "duration ms")


def csv_row(call):
    chat = call.turn.chat if call.turn_id else None
    return (call.created.isoformat(), call.tenant.slug, who(call), str(chat.session_id) if chat else "",
            str(chat.id) if chat else "",
            call.tool_name, arguments_text(call, ARGUMENTS_EXPORTED), call.source, call.contributor_client_id, call.status, call.outcome,
            call.refusal_reason, refusal_sentence(call), "" if duration_ms(call) is None else duration_ms(call))


# A cell starting so is a formula to a spreadsheet (OWASP "CSV injection"): a leading ' makes it text.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def inert(cell):
    if isinstance(cell, str) and cell.startswith(FORMULA_STARTS):
        return "'" + cell
    return cell


def write_csv(calls, stream):
    """`calls` come from `for_audit()`; one line each under CSV_COLUMNS, no cell a formula."""
    writer = csv.writer(stream)
    writer.writerow(CSV_COLUMNS)
    for call in calls.iterator(chunk_size=500):
        writer.writerow([inert(cell) for cell in csv_row(call)])
