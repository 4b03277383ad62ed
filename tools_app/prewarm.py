"""Pre-warming: a session just made starts its default chat's harness, so its first turn goes to a
running one (agents/warm.py) instead of waiting for the CLI to start."""
import asyncio
import logging
import uuid

from agents.registry import PrewarmingProvider, get_provider
from agents.warm import WARM
from kernel.orm import database_sync_to_async
from sessions_app.models import Chat, Turn

from .families.mcp_servers.server_tools import settle_listings
from .runtime.toolbox import ChatToolbox

logger = logging.getLogger(__name__)


async def prewarm_session(session_id: str | uuid.UUID, provider_id: str, chat_id: str | uuid.UUID) -> None:
    """The session was just made on this serving loop: `provider_id` starts its default chat's
    (`chat_id`) harness now, if it keeps one warm, so the first turn need not wait for it. The
    chat is marked as being pre-warmed before anything is awaited: a turn arriving meanwhile waits
    for this harness instead of starting a second one."""
    async with WARM.prewarming(provider_id, str(chat_id)) as needed:
        WARM.serve_on(asyncio.get_running_loop())
        provider = get_provider(provider_id)
        if not needed or not isinstance(provider, PrewarmingProvider) or provider.runtime_missing():
            return
        chat = await database_sync_to_async(
            Chat.objects.select_related("session__tenant").filter(id=chat_id).first)()
        if chat is None:
            return
        await settle_listings(chat.session)
        try:
            await provider.prewarm(ChatToolbox(Turn(chat=chat, text="")))
        except Exception as exc:  # the first turn starts its harness itself, and says what failed
            logger.warning("Pre-warming session %s's harness failed (%s: %s)", session_id, exc.__class__.__name__, exc)
