"""The console's own state changes: per-session grants (django-guardian object permissions)."""
from django.db import transaction
from guardian.shortcuts import assign_perm, get_users_with_perms, remove_perm

from grants.algebra import GROUPS, known_grants
from grants.models import Membership
from kernel.refusals import Refused
from sessions_app.actions import require

SESSION_GRANTS = tuple(g for g in known_grants() if g.split(":")[0] in ("session", "chat"))


def _codename(grant):
    return f"sessions_app.{grant}"


def implied_by(grant):
    """Granting a write (or everything) on a session also grants reading it, or the person could
    change a session they cannot see."""
    subject, operation = grant.split(":")
    if operation == "write" or operation in GROUPS[subject]["write"]:
        return {grant, f"{subject}:read"}
    return {grant}


@transaction.atomic
def do_grant_on_session(principal, session, person, grant):
    """Give `person` `grant` on `session` alone. The acting principal must hold it there, and
    the person must belong to the session's tenant."""
    if grant not in SESSION_GRANTS:
        raise Refused(f"{grant} is not a per-session grant.", "invalid")
    require(principal, grant, session)
    if not Membership.objects.filter(tenant=session.tenant, person=person).exists():
        raise Refused(f"{person.username} is not a member of {session.tenant.slug}.", "invalid")
    for each in sorted(implied_by(grant)):
        assign_perm(_codename(each), person, session)


@transaction.atomic
def do_revoke_on_session(principal, session, person, grant):
    """Take `grant` back; taking back a read also takes back what needs it (write implies read)."""
    require(principal, grant, session)
    subject = grant.split(":")[0]
    taken = {grant}
    if grant.endswith(":read"):
        taken |= {g for g in SESSION_GRANTS if g.startswith(f"{subject}:") and g != grant
                  and f"{subject}:read" in implied_by(g)}
    for each in taken:
        remove_perm(_codename(each), person, session)


def session_grants(session):
    """{person: [grant, ...]} of per-session grants on `session`."""
    holders = get_users_with_perms(session, attach_perms=True, with_superusers=False, with_group_users=False)
    return {person: sorted(p for p in perms) for person, perms in holders.items()}
