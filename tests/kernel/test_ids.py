import uuid

from kernel.ids import parse_uuid


def test_a_uuid_in_any_spelling_is_parsed():
    key = uuid.uuid4()
    assert parse_uuid(str(key)) == key
    assert parse_uuid(key) == key
    assert parse_uuid(str(key).upper()) == key


def test_anything_else_is_none():
    assert parse_uuid("not-a-uuid") is None
    assert parse_uuid(None) is None
    assert parse_uuid(12) is None
    assert parse_uuid("") is None
