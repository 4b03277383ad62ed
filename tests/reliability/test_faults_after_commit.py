"""A failure inside an on-commit hook never turns a committed change into an error answer, and
is logged with what it skipped."""
import logging

from django.db import transaction
from rest_framework.test import APIClient

from kernel.after_commit import after_commit
from sessions_app.channels import annotations_uri
from sessions_app.models import Session
from tools_app.models import HostConfig

from ..ahp.protocol.harness import AhpClient, set_config
from ..ahp.protocol.test_actions import names


def test_a_failing_hook_keeps_the_commit_and_logs_what_it_skipped(acme, transactional_db, caplog):
    def broken():
        raise RuntimeError("the hook broke")

    with caplog.at_level(logging.ERROR, logger="kernel.after_commit"), transaction.atomic():
        HostConfig.for_tenant(acme.tenant)
        HostConfig.objects.filter(tenant=acme.tenant).update(session_tools=False)
        after_commit("telling live sessions of their new serverTools", broken)
    assert HostConfig.objects.get(tenant=acme.tenant).session_tools is False
    assert [r.getMessage() for r in caplog.records] == [
        "After a commit, telling live sessions of their new serverTools was skipped: its hook failed"]


def test_a_subscribed_annotations_channel_leaves_config_changes_working(acme, host):
    rest = APIClient()
    rest.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.tokens['root']}")
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        session = alice.create_session()
        offered = names(alice.subscribe(session)["serverTools"])
        alice.subscribe(annotations_uri(Session.objects.get(id=session.removeprefix("ahp-session:/"))))
        answer = rest.patch("/api/v1/config", {"sessionTools": False}, format="json")
        assert answer.status_code == 200 and answer.json()["sessionTools"] is False
        assert names(alice.action("session/serverToolsChanged")["action"]["tools"]) < offered
        assert set_config(host.port, acme.tokens["root"], sessionTools=True)["sessionTools"] is True
        assert names(alice.action("session/serverToolsChanged")["action"]["tools"]) == offered
