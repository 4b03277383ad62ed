from ..ahp.mcp.helpers import host_tools  # noqa: F401  (a fixture)
from ..tools_app.families.mcp_servers.tiny_servers import tiny_server  # noqa: F401  (a fixture)
from ..tools_app.families.session.conftest import place  # noqa: F401  (a fixture)
from .model_server import model  # noqa: F401  (a fixture)
