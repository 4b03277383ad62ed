"""The root channel's session config commands: `resolveSessionConfig` (the schema a new
session's settings follow, and the values with the agent's defaults) and
`sessionConfigCompletions` (the values one setting may take)."""

from typing import TYPE_CHECKING, Any

from agents.registry import PROVIDERS
from grants.models import Tenant
from kernel.orm import database_sync_to_async
from tools_app.families.session.listing import session_config_schema
from tools_app.models import AgentDefinition

from . import errors
from .errors import Params

if TYPE_CHECKING:
    from .consumer import AhpConsumer


def provider_and_config(params: Params) -> tuple[str, dict[str, Any]]:
    provider = params.get("provider", next(iter(PROVIDERS)))
    if not isinstance(provider, str):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: provider must be a string.")
    if provider not in PROVIDERS:
        raise errors.RpcError(errors.NO_AGENT_FOR_PROVIDER, f"No agent for provider {provider}.")
    config = params.get("config", {})
    if not isinstance(config, dict):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: config must be an object.")
    return provider, config


async def resolve_session_config(consumer: "AhpConsumer", params: Params) -> Params:
    provider, config = provider_and_config(params)
    schema = session_config_schema(provider)
    models = schema.get("properties", {}).get("model", {}).get("enum")
    defaults = {"model": models[0]} if models else {}  # the agent's first model, as createSession runs it
    return {"schema": schema, "values": {**defaults, **config}}


async def session_config_completions(consumer: "AhpConsumer", params: Params) -> Params:
    provider, _ = provider_and_config(params)
    name = errors.require(params, "property", str)
    query = params.get("query", "")
    if not isinstance(query, str):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: query must be a string.")
    prop = session_config_schema(provider).get("properties", {}).get(name)
    if prop is None:
        raise errors.RpcError(errors.INVALID_PARAMS, f"Invalid params: the agent {provider} has no setting {name}.")
    if name == "agentDefinition":  # the tenant's own definitions for this agent
        values = await database_sync_to_async(definition_names)(consumer.tenant, provider)
    else:
        values = prop.get("enum", [])
    labels = prop.get("enumLabels", values)
    return {"items": [{"value": v, "label": label} for v, label in zip(values, labels, strict=False)
                      if query.lower() in v.lower() or query.lower() in label.lower()]}


def definition_names(tenant: Tenant, provider: str) -> list[str]:
    return list(AgentDefinition.objects.for_tenant(tenant).filter(provider=provider)
                .order_by("name").values_list("name", flat=True))
