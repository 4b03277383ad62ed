"""Every REST body, whatever its content type, is refused with 400 and one sentence when it holds
text no database stores (a NUL was a 500 on PostgreSQL for form bodies); nothing is kept."""
import json

import pytest
from rest_framework.test import APIClient

from tools_app.models import AgentDefinition

BAD_TEXT = "Invalid request: strings may not hold NUL characters or lone surrogates."
DEFINITIONS = "/api/v1/agent-definitions"


@pytest.fixture
def api(acme):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.tokens['root']}")
    return client


def refusal(response):
    return response.status_code, response.json()


def test_a_form_body_holding_nul_is_refused_and_nothing_kept(api):
    body = "provider=echo&name=reviewer&instructions=be%00nice"
    response = api.post(DEFINITIONS, body, content_type="application/x-www-form-urlencoded")
    assert refusal(response) == (400, {"detail": BAD_TEXT})
    assert not AgentDefinition.objects.exists()


def test_a_form_field_name_holding_nul_is_refused(api):
    response = api.post(DEFINITIONS, "provider=echo&name=reviewer&a%00b=1",
                        content_type="application/x-www-form-urlencoded")
    assert refusal(response) == (400, {"detail": BAD_TEXT})


def test_a_multipart_body_holding_nul_is_refused_and_nothing_kept(api):
    response = api.post(DEFINITIONS, {"provider": "echo", "name": "reviewer", "instructions": "be\x00nice"},
                        format="multipart")
    assert refusal(response) == (400, {"detail": BAD_TEXT})
    response = api.post(DEFINITIONS, {"provider": "echo", "name": "reviewer", "a\x00b": "1"}, format="multipart")
    assert refusal(response) == (400, {"detail": BAD_TEXT})
    assert not AgentDefinition.objects.exists()


def test_a_json_body_gets_the_same_sentence(api):
    response = api.post(DEFINITIONS, json.dumps({"provider": "echo", "name": "r", "instructions": "a\x00b"}),
                        content_type="application/json")
    assert refusal(response) == (400, {"detail": BAD_TEXT})


def test_a_clean_form_body_still_works(api):
    response = api.post(DEFINITIONS, "provider=echo&name=reviewer&instructions=be+nice+%F0%9F%98%80",
                        content_type="application/x-www-form-urlencoded")
    assert response.status_code == 201, response.content
    assert AgentDefinition.objects.get().to_dict()["instructions"] == "be nice \U0001F600"
