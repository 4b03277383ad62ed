from ....ahp.mcp.helpers import host_tools  # noqa: F401  (a fixture)
from .tiny_servers import tiny_http_server, tiny_server  # noqa: F401  (fixtures)
