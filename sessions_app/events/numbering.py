"""The host-wide action counter: a gap-free serverSeq, taken in commit order.

Taking numbers holds the counter's row lock until commit, so actions are numbered in commit
order and a snapshot read under `snapshot_lock` is consistent with `serverSeq`.
"""
from django.db import connection

from ..models import ServerSeq


def take_seqs(count):
    """Advance the counter by `count` in one statement (taking its row lock until commit) and
    answer the last number taken."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {ServerSeq._meta.db_table} SET value = value + %s WHERE id = 1 RETURNING value", [count])
        row = cursor.fetchone()
    if row is None:
        ServerSeq.objects.get_or_create(pk=1)
        return take_seqs(count)
    return row[0]


def current_seq():
    counter = ServerSeq.objects.filter(pk=1).first()
    return counter.value if counter else 0


def snapshot_lock():
    """Call inside a transaction before reading a snapshot; answers the snapshot's fromSeq."""
    return take_seqs(0)
