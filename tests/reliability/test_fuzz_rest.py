"""schemathesis against the host's own OpenAPI schema (/api/v1/schema/), with a valid token:
whatever it sends, the REST API answers without a 5xx."""
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import given, settings

from .fuzz_strategies import FUZZ


@pytest.fixture
def wsgi_app(db):
    """The host's WSGI app on the test database (kept open across requests, as Django's test client does)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_no_operation_of_the_schema_answers_5xx(acme, globex, wsgi_app):
    app = wsgi_app
    auth = {"Authorization": f"Bearer {acme.tokens['root']}"}
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", app, headers=auth)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/api/v1/config", "/api/v1/sessions"}
    for operation in operations:

        @settings(FUZZ, max_examples=30)
        @given(case=operation.as_strategy())
        def run(case):
            response = case.call(headers={**(case.headers or {}), **auth})
            assert response.status_code < 500, (case.method, case.formatted_path, case.body, response.text[:300])

        run()
