"""The catalog: the tool registry, the pure assembly of what a model request is offered,
its inputs loader, input validation, output bounding and what clients bring."""
