from ..tools_app.families.session.conftest import worktree_agent  # noqa: F401  (a fixture)
