"""What every layer needs and no layer owns: the refusal a person or model sees, and the one
table from its kind to the JSON-RPC code and HTTP status each door answers with."""
