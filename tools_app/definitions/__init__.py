"""Agent definitions: the JSON Schema gate and the Copilot built-in tool policy."""
