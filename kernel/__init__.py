"""What every layer needs and no layer owns: the refusal a person or model sees, the one
table from its kind to the JSON-RPC code and HTTP status each door answers with, and parsing
the UUIDs rows are keyed by."""
