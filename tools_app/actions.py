"""Every change to the tool layer's own rows goes through one function here."""
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from .agent_definitions import validate_definition
from .models import AgentDefinition

MAY_NOT_CHANGE_AGENT_DEFINITIONS = "You need config:change to change agent definitions."


@transaction.atomic
def do_save_agent_definition(tenant, document, *, acting, definition=None):
    """Create `document` as a definition of `tenant`, or replace `definition` with it.

    Refuses with AgentDefinitionInvalid (the schema's error and its JSON pointer) before any
    row is touched, and with ValidationError for a name the tenant already uses.
    """
    if not acting.may("config:change"):
        raise PermissionDenied(MAY_NOT_CHANGE_AGENT_DEFINITIONS)
    validate_definition(document)
    if definition is None:
        definition = AgentDefinition(tenant=tenant)
    else:
        definition = AgentDefinition.objects.for_tenant(tenant).select_for_update().get(pk=definition.pk)
    taken = AgentDefinition.objects.for_tenant(tenant).filter(name=document["name"]).exclude(pk=definition.pk)
    if taken.exists():
        raise ValidationError(f"Tenant {tenant.slug} already has an agent definition named {document['name']}.")
    definition.set_document(document)
    definition.save()  # the model checks the document again, with the client-mode interlock
    return definition

