"""The per-session MCP tools endpoint, `/ahp-mcp/<session uuid>`: a door, beside the AHP socket."""
