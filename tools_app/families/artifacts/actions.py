"""The one change of the artifacts family: the session's own record of them."""
from django.db import transaction

from sessions_app import events
from sessions_app.models import Session

from . import entries as artifact_list


@transaction.atomic
def do_change_artifacts(session, change):
    """Apply `change(entries) -> (next entries, answer)` to the session's own record and publish
    the session's new _meta. No grant: a session writes only its own record."""
    session = Session.objects.select_for_update().get(pk=session.pk)
    current = artifact_list.read(session.meta)
    updated, answer = change(current)
    if updated != current:
        session.meta = artifact_list.with_artifacts(session.meta, updated)
        session.save(update_fields=["meta"])
        events.publish(session.tenant_id, session.uri, {"type": "session/metaChanged", "_meta": session.meta})
    return answer
