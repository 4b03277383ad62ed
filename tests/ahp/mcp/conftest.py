from .helpers import host_tools  # noqa: F401  (a fixture)
