"""Ids the host keys its rows by are UUIDs; what a client or model sends is parsed here, once."""
import uuid


def parse_uuid(text: object) -> uuid.UUID | None:
    """`text` (or its str()) as a UUID, or None when it is not one."""
    try:
        return uuid.UUID(str(text))
    except ValueError:
        return None
