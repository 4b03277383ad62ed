"""Every change this app makes: one `do_*` function each."""
from django.db import transaction

from kernel.after_commit import after_commit

from .models import OutboundAllow
from .outbound import forget_admin_rules
from .rules import parse_rule


@transaction.atomic
def do_save_outbound_allow(allow: OutboundAllow) -> OutboundAllow:
    """Save an allow-list entry (new or edited); this process applies it at once, others
    within outbound.RULES_CACHE_SECONDS."""
    parse_rule(allow.entry)
    allow.entry = allow.entry.strip()
    allow.save()
    after_commit("forgetting the cached allow-list in this process", forget_admin_rules)
    return allow


@transaction.atomic
def do_delete_outbound_allow(allow: OutboundAllow) -> None:
    OutboundAllow.objects.filter(pk=allow.pk).delete()
    after_commit("forgetting the cached allow-list in this process", forget_admin_rules)
