"""The grant algebra: one question, does a set of grants cover the grant an action needs?

A grant is `subject:operation` or `subject:group` (`read`/`write`), with `*` allowed on either
side. Groups are named sets of operations; holding every operation of a group separately does
not make one hold the group. A session group also covers the chat group of the same name.
"""

GROUPS = {
    "session": {
        "read": frozenset({"list", "state"}),
        "write": frozenset(
            {"create", "dispose", "rename", "configure", "folders", "attach", "mark", "review",
             "changes", "worktree", "artifacts"}
        ),
    },
    "chat": {
        "read": frozenset({"turns"}),
        "write": frozenset(
            {"create", "fork", "dispose", "move", "send", "cancel", "answer", "tool", "draft",
             "folders", "mark", "truncate"}
        ),
    },
    "config": {"read": frozenset({"settings"}), "write": frozenset({"change"})},
}

# A grant held on the left also covers the same group of the subject on the right.
SUBJECT_COVERS = {"session": ("chat",)}


def parse(grant):
    subject, sep, operation = grant.partition(":")
    if not sep or not subject or not operation:
        raise ValueError(f"A grant is subject:operation, not {grant!r}")
    return subject, operation


def _covers(held_subject, held_op, subject, op):
    if held_subject not in ("*", subject):
        return False
    if held_op in ("*", op):
        return True
    # A held group covers each of its operations, never another group or `*`.
    return op in GROUPS.get(subject, {}).get(held_op, ())


def holds(grants, needed):
    """True when any grant in `grants` covers `needed`."""
    subject, op = parse(needed)
    for grant in grants:
        held_subject, held_op = parse(grant)
        if _covers(held_subject, held_op, subject, op):
            return True
        if held_op in ("read", "write", "*") and subject in SUBJECT_COVERS.get(held_subject, ()):
            if _covers(subject, held_op, subject, op):
                return True
    return False


def known_grants():
    """Every grant string the algebra names, for the per-object permissions table."""
    names = set()
    for subject, groups in GROUPS.items():
        names.add(f"{subject}:*")
        for group, ops in groups.items():
            names.add(f"{subject}:{group}")
            names.update(f"{subject}:{op}" for op in ops)
    return sorted(names)
