"""Pre-warming: a session just made starts its default chat's harness, so its first turn goes to a
running one (agents/warm.py) instead of waiting for the CLI to start."""
import asyncio
import logging

from agents.registry import get_provider
from agents.warm import WARM
from kernel.orm import database_sync_to_async
from sessions_app.models import Chat, Turn

from .families.mcp_servers.server_tools import settle_listings
from .chat_provider import provider_of
from .runtime.toolbox import ChatToolbox

logger = logging.getLogger(__name__)


async def prewarm_session(session_id):
    """The session was just made on this serving loop: its provider starts the default chat's
    harness now, if it keeps one warm, so the first turn need not wait for it."""
    WARM.serve_on(asyncio.get_running_loop())

    def default_chat():
        chat = Chat.objects.select_related("session__tenant").filter(session_id=session_id, is_default=True).first()
        return chat, chat and provider_of(chat)

    chat, provider_id = await database_sync_to_async(default_chat)()
    provider = get_provider(provider_id) if chat else None
    if getattr(provider, "prewarm", None) is None or provider.runtime_missing():
        return
    await settle_listings(chat.session)
    try:
        await provider.prewarm(ChatToolbox(Turn(chat=chat, text="")))
    except Exception as exc:  # the first turn starts its harness itself, and says what failed
        logger.warning("Pre-warming session %s's harness failed (%s: %s)", session_id, exc.__class__.__name__, exc)
