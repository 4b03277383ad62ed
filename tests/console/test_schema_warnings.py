"""The REST schema generates without one drf-spectacular warning or error: each would be a line in
the terminal of whoever opens /api/v1/schema/ (and a gap in the schema a client reads)."""
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator


def test_the_schema_generates_without_a_warning(db, capsys):
    GENERATOR_STATS.reset()
    schema = SchemaGenerator().get_schema(request=None, public=True)
    said = capsys.readouterr()
    assert not GENERATOR_STATS, said.err or dict(GENERATOR_STATS._warn_cache) or dict(GENERATOR_STATS._error_cache)
    assert "Warning" not in said.err and "Error" not in said.err
    assert {"/api/v1/config", "/api/v1/sessions", "/api/v1/sessions/{session_id}/catalog"} <= set(schema["paths"])
