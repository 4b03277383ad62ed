"""Every change to the tool layer's own rows goes through one function here."""
from django.db import transaction

from kernel.after_commit import after_commit
from kernel.refusals import Refused

from .definitions.agent_definitions import validate_definition
from .models import AgentDefinition, FullToolOutput

MAY_NOT_CHANGE_AGENT_DEFINITIONS = "You need config:change to change agent definitions."
AGENT_DEFINITION_NAME_TAKEN = "Tenant {tenant} already has an agent definition named {name}."


@transaction.atomic
def do_save_agent_definition(tenant, document, *, acting, definition=None):
    """Create `document` as a definition of `tenant`, or replace `definition` with it.

    Refuses with AgentDefinitionInvalid (the schema's error and its JSON pointer) before any
    row is touched, and with Refused for a name the tenant already uses.
    """
    if not acting.may("config:change"):
        raise Refused(MAY_NOT_CHANGE_AGENT_DEFINITIONS, "permission")
    validate_definition(document)
    if definition is None:
        definition = AgentDefinition(tenant=tenant)
    else:
        definition = AgentDefinition.objects.for_tenant(tenant).select_for_update().get(pk=definition.pk)
    taken = AgentDefinition.objects.for_tenant(tenant).filter(name=document["name"]).exclude(pk=definition.pk)
    if taken.exists():
        # "invalid": the REST door answers 400, as for any other fault in the document
        raise Refused(AGENT_DEFINITION_NAME_TAKEN.format(tenant=tenant.slug, name=document["name"]), "invalid")
    definition.set_document(document)
    if problem := definition.names_problem():
        raise problem
    definition.save()  # the model checks the document again, with the client-mode interlock
    return definition


@transaction.atomic
def do_delete_agent_definition(definition: AgentDefinition, *, acting) -> None:
    """Remove a definition: sessions started with it keep running, new ones may no longer name it."""
    if not acting.may("config:change"):
        raise Refused(MAY_NOT_CHANGE_AGENT_DEFINITIONS, "permission")
    AgentDefinition.objects.for_tenant(definition.tenant).filter(pk=definition.pk).delete()


def do_keep_full_output(call_id, text):
    """Keep the whole text of a call's output that was cut for the model (ahp_resource reads
    it). Publishes nothing."""
    return FullToolOutput.objects.create(call_id=call_id, text=text)


def do_change_host_config(principal, changes, replace=False, *, origin=None):
    """Set HostConfig keys of the principal's tenant (wire names; `replace` resets the rest),
    tell root subscribers, and apply it live: every running session whose offered tools
    changed gets `session/serverToolsChanged`."""
    from sessions_app import events
    from sessions_app.actions import require
    from sessions_app.channels import ROOT

    from .config import ConfigInvalid, HostConfig, apply_changes, checked_changes, wire_values
    from .live import refresh_live_sessions

    require(principal, "config:change")
    try:
        fields = checked_changes(changes, replace)
        with transaction.atomic():
            HostConfig.for_tenant(principal.tenant)
            config = apply_changes(HostConfig.objects.select_for_update().get(tenant=principal.tenant), fields)
            config.save()
            action = {"type": "root/configChanged", "config": wire_values(config)}
            if replace:
                action["replace"] = True
            events.publish(principal.tenant.pk, ROOT, action, origin)
            after_commit("telling live sessions of their new serverTools",
                         lambda: refresh_live_sessions(principal.tenant))
    except ConfigInvalid as exc:  # every door's refusal of a value: nothing was stored
        raise Refused(str(exc), "invalid") from None
    return config
