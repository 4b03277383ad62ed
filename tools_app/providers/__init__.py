"""Agent backends that run an AgentDefinition, one module per provider id."""
