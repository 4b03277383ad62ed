"""Each tenant's action counter: a gap-free serverSeq per tenant, taken in commit order.

Taking numbers holds the tenant's counter row lock until commit, so a tenant's actions are
numbered in commit order and a snapshot read under `snapshot_lock` is consistent with its
serverSeq. A connection sees one tenant, so it never needs another's numbers, and tenants never
queue on each other's row.
"""
from collections.abc import Collection

from ..models import ServerSeq
from ..queries import counters, step_counter


def take_seqs(tenant_id: int, count: int) -> int:
    """Advance the tenant's counter by `count` in one statement (taking its row lock until
    commit) and answer the last number taken."""
    last = step_counter(tenant_id, count)
    if last is None:
        create_counter(tenant_id)
        return take_seqs(tenant_id, count)
    return last


def create_counter(tenant_id: int) -> None:
    """Before the tenant's first action: two processes may both create its counter; one row stays."""
    ServerSeq.objects.bulk_create([ServerSeq(tenant_id=tenant_id)], ignore_conflicts=True)


def current_seq(tenant_id: int) -> int:
    """The tenant's newest serverSeq (0 before its first action)."""
    return current_seqs([tenant_id])[tenant_id]


def current_seqs(tenant_ids: Collection[int]) -> dict[int, int]:
    """{tenant id: its newest serverSeq} in one statement, read by every `initialize`."""
    found = counters(tenant_ids)
    return {tenant_id: found.get(tenant_id, 0) for tenant_id in tenant_ids}


def snapshot_lock(tenant_id: int) -> int:
    """Call inside a transaction before reading one of the tenant's snapshots; answers its fromSeq."""
    return take_seqs(tenant_id, 0)
