import pytest

from grants.algebra import holds, parse

MEMBER = ("session:read", "session:write", "terminal:read", "terminal:write")
GUEST = ("session:read",)

CASES = [
    # (grants held, grant needed, holds?)
    (("*:*",), "session:list", True),
    (("*:*",), "config:change", True),
    (("*:*",), "session:*", True),
    (("*:*",), "anything:else", True),
    (("session:*",), "session:dispose", True),
    (("session:*",), "session:read", True),
    (("session:*",), "session:*", True),
    (("session:*",), "chat:tool", True),
    (("session:*",), "config:settings", False),
    (("session:read",), "session:list", True),
    (("session:read",), "session:state", True),
    (("session:read",), "session:read", True),
    (("session:read",), "session:create", False),
    (("session:read",), "session:write", False),
    (("session:read",), "session:*", False),
    (("session:read",), "chat:turns", True),
    (("session:read",), "chat:read", True),
    (("session:read",), "chat:tool", False),
    (("session:write",), "session:create", True),
    (("session:write",), "session:artifacts", True),
    (("session:write",), "session:worktree", True),
    (("session:write",), "session:list", False),
    (("session:write",), "chat:tool", True),
    (("session:write",), "chat:answer", True),
    (("session:write",), "chat:write", True),
    (("session:write",), "chat:turns", False),
    (("chat:read",), "chat:turns", True),
    (("chat:read",), "session:read", False),
    (("chat:write",), "chat:truncate", True),
    (("chat:write",), "session:write", False),
    (("chat:tool",), "chat:tool", True),
    (("chat:tool",), "chat:answer", False),
    (("chat:tool",), "chat:write", False),
    (("session:list", "session:state"), "session:read", False),
    (("config:read",), "config:settings", True),
    (("config:read",), "config:change", False),
    (("config:write",), "config:change", True),
    (("config:change",), "config:write", False),
    (("*:read",), "session:list", True),
    (("*:read",), "config:settings", True),
    (("*:read",), "chat:turns", True),
    (("*:read",), "session:create", False),
    (("*:write",), "config:change", True),
    (("*:write",), "session:read", False),
    (("*:list",), "session:list", True),
    (("*:list",), "session:state", False),
    (("terminal:read",), "terminal:read", True),
    (("terminal:read",), "terminal:write", False),
    (MEMBER, "chat:tool", True),
    (MEMBER, "chat:answer", True),
    (MEMBER, "config:change", False),
    (MEMBER, "session:*", False),
    (GUEST, "chat:turns", True),
    (GUEST, "chat:tool", False),
    (GUEST, "session:write", False),
    ((), "session:read", False),
    (("session:review",), "session:review", True),
    (("session:review",), "session:mark", False),
]


@pytest.mark.parametrize("held,needed,expected", CASES, ids=[f"{h}->{n}" for h, n, _ in CASES])
def test_it_answers_the_grant_table(held, needed, expected):
    assert holds(held, needed) is expected


@pytest.mark.parametrize("bad", ["session", ":read", "session:", ""])
def test_it_refuses_a_grant_without_subject_and_operation(bad):
    with pytest.raises(ValueError, match="A grant is subject:operation"):
        parse(bad)
