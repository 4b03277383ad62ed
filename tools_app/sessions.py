"""A session's start and end as the doors above tools_app make them: the agent must exist, a
new session keeps the tenant's MCP servers as they are at its start, and an ended one is
forgotten by what the host holds for it outside the database (its MCP servers' connections, its sandbox, the
agent process running for it)."""
import uuid
from collections.abc import Iterable
from pathlib import Path

from django.db import transaction

from agents.registry import PROVIDERS, get_provider
from agents.warm import WARM
from grants.models import Principal
from kernel.after_commit import after_commit
from kernel.refusals import Refused
from sandbox.bubblewrap import end_sandbox
from sandbox.workspaces import OutsideWorkspace, tenant_root
from sessions_app import actions
from sessions_app.actions.homes import ended_elsewhere, home_of
from sessions_app.models import Session

from .families.computers.tools import end_session_computers
from .families.mcp_servers.actions import do_capture_mcp_servers
from .families.mcp_servers.pool import POOL
from .families.mcp_servers.server_tools import list_in_background
from .families.session.listing import session_config_schema
from .families.terminals import pty
from .families.terminals.actions import SESSIONS_FOLDER, terminals_changed
from .families.terminals.models import Terminal
from .models import AgentDefinition


def check_agent(provider):
    if get_provider(provider) is None:
        raise Refused(f"No agent for provider {provider}.", "no_agent")


def check_definition(tenant, provider, config):
    """The agent definition `config.agentDefinition` names must be the tenant's and run on `provider`."""
    name = (config or {}).get("agentDefinition")
    if name is None:
        return
    definition = AgentDefinition.objects.for_tenant(tenant).filter(name=name).first() if isinstance(name, str) else None
    if definition is None:
        raise Refused(f'No agent definition "{name}" in this tenant.', "invalid")
    if definition.provider != provider:
        raise Refused(f'Agent definition "{name}" runs on provider {definition.provider}, not on {provider}.',
                      "invalid")


@transaction.atomic
def do_start_session(principal, session_id, provider="echo", working_directories=(), config=None, model=None,
                     agent=None):
    """createSession: the session, its default chat, and its MCP servers captured. `model` (a
    model id, from createSession's ModelSelection) and `agent` (the name of one of the tenant's
    agent definitions, from its AgentSelection) become the config's `model` and `agentDefinition`;
    the config is checked against the agent's schema as session/configChanged checks a change."""
    check_agent(provider)
    config = {**(config or {}), **({"model": model} if model is not None else {}),
              **({"agentDefinition": agent} if agent is not None else {})}
    check_definition(principal.tenant, provider, config)
    session = actions.do_create_session(principal, session_id, provider, working_directories, config,
                                        schema=session_config_schema(provider))
    capture_servers(session)
    return session


@transaction.atomic
def do_fork_session(principal, session_id, source, turn_id, config=None, model=None, agent=None):
    """createSession with `fork` {session, turnId}: a session of the source's agent and working
    directories, its config the source's with `config` over it, whose default chat starts with
    copies of the source chat's turns through `turn_id`."""
    session = do_start_session(principal, session_id, source.provider, source.working_directories,
                               {**source.config, **(config or {})}, model, agent)
    actions.do_copy_session_fork(principal, source, turn_id, session)
    return session


def capture_servers(session):
    """Inside the transaction that created `session`: keep its servers, list them after commit."""
    row = do_capture_mcp_servers(session)
    if row.servers:
        session_id = session.id
        after_commit(f"listing the MCP servers of session {session_id}", lambda: list_in_background(session_id))


@transaction.atomic
def do_end_session(principal: Principal, session: Session) -> None:
    """disposeSession, and every other door's end of a session: the rows go, then (after commit)
    whatever the host kept for the session, in the process that is its home (on whichever node)."""
    session_id, tenant_id = session.id, session.tenant_id
    held_terminals = list(Terminal.objects.filter(session_id=session_id).values_list("id", flat=True))
    own, home = own_folder_path(session), home_of(session_id)  # the home's row goes with the session
    actions.do_dispose_session(principal, session)
    if held_terminals:  # they went with it: the root catalogue says so once
        terminals_changed(tenant_id)
    ending = {"session": str(session_id), "terminals": [str(t) for t in held_terminals],
              "own_folder": str(own) if own else None, "tenant_id": tenant_id}

    def end() -> None:
        if not ended_elsewhere(home, ending):
            end_here(ending)

    after_commit(f"closing what the host kept for session {session_id}", end)


def end_here(ending: dict) -> None:
    """What this process runs of a session or terminals gone ends: `ending` names the terminals
    and, for a session, the session, its own folder and tenant (ended_elsewhere's message)."""
    terminal_ids = [uuid.UUID(t) for t in ending["terminals"]]
    if ending.get("session") is None:
        pty.end_shells(terminal_ids)
        return
    own = ending.get("own_folder")
    forget_session(uuid.UUID(ending["session"]), terminal_ids, Path(own) if own else None, ending.get("tenant_id"))


def own_folder_path(session: Session) -> Path | None:
    """Where the session's own folder is, if it has one (`<tenant root>/.sessions/<id>`, made for a
    session without a working directory), or None for a tenant whose root is misplaced."""
    try:
        return tenant_root(session.tenant) / SESSIONS_FOLDER / str(session.id)
    except OutsideWorkspace:
        return None


def forget_session(session_id: uuid.UUID, terminal_ids: Iterable[uuid.UUID] = (),
                   own_folder: Path | None = None, tenant_id: int | None = None) -> None:
    """Whatever this process holds for the ended session ends (its home is this process: ahp.protocol.homes)."""
    pty.end_shells(terminal_ids)
    POOL.close_session(session_id)
    WARM.evict_session(str(session_id))
    end_sandbox(session_id, own_folder, tenant_id)
    end_session_computers(session_id)
    for provider in PROVIDERS.values():
        forget = getattr(provider, "forget", None)
        if forget is not None:
            forget(session_id)
