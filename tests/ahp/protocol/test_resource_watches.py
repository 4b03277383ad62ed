"""createResourceWatch, resourceRequest and completions over a real socket: a watch reports what
changed in a session's folder to the connection that made it, follows no link, and ends with an
unsubscribe; a resourceRequest grants only what the caller holds; `@` completes file names."""
import os
import uuid

import pytest

from ...conftest import tenant_made
from .harness import AhpClient, RpcFailed, default_chat

ROOT = "ahp-root://"


@pytest.fixture
def project(acme, workspace):
    folder = workspace / "app"
    (folder / "src").mkdir(parents=True)
    (folder / "README.md").write_text("hello\n")
    (folder / "src" / "main.py").write_text("print(1)\n")
    return tenant_made(folder, acme.tenant)


@pytest.fixture
def member(acme, host, project, settings):
    settings.AHP_RESOURCE_WATCH_SECONDS = 0.1
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        client.session = client.create_session(workingDirectories=[project.as_uri()])
        yield client


def refused(client, method, **params):
    with pytest.raises(RpcFailed) as failed:
        client.call(method, {"channel": ROOT, **params})
    return failed.value.code, failed.value.message


def changes(client):
    return client.action("resourceWatch/changed", timeout=10)["action"]["changes"]["items"]


def test_a_watch_reports_what_changes_in_a_sessions_folder(member, project):
    watch = member.call("createResourceWatch", {"channel": ROOT, "uri": project.as_uri(), "recursive": True,
                                                "excludes": {"items": ["**/build/**"]}})["channel"]
    assert watch.startswith("ahp-resource-watch:/")
    snapshot = member.call("subscribe", {"channel": watch})["snapshot"]
    assert snapshot["resource"] == watch and snapshot["state"] == {
        "root": project.as_uri(), "recursive": True, "excludes": {"items": ["**/build/**"]}}
    (project / "src" / "new.py").write_text("x")
    assert changes(member) == [{"uri": (project / "src" / "new.py").as_uri(), "type": "added"}]
    (project / "README.md").write_text("changed, and longer\n")
    assert changes(member) == [{"uri": (project / "README.md").as_uri(), "type": "updated"}]
    (project / "src" / "main.py").unlink()
    envelope = member.action("resourceWatch/changed", timeout=10)
    assert envelope["channel"] == watch and envelope["serverSeq"] > snapshot["fromSeq"]
    assert envelope["action"]["changes"]["items"] == [{"uri": (project / "src" / "main.py").as_uri(),
                                                        "type": "deleted"}]
    member.send({"jsonrpc": "2.0", "method": "unsubscribe", "params": {"channel": watch}})
    assert refused(member, "subscribe", channel=watch) == (-32008, f"No channel {watch} here.")


def test_a_watch_follows_no_link_and_belongs_to_its_connection(acme, host, member, project, workspace):
    outside = workspace / "outside"
    outside.mkdir()
    os.symlink(outside, project / "elsewhere")
    watch = member.call("createResourceWatch", {"channel": ROOT, "uri": project.as_uri(), "recursive": True})["channel"]
    member.call("subscribe", {"channel": watch})
    (outside / "secret.txt").write_text("s3cret")
    (project / "seen.txt").write_text("x")
    assert changes(member) == [{"uri": (project / "seen.txt").as_uri(), "type": "added"}]
    through = f"{project / 'elsewhere'} is reached through a link; this host follows no link in a session's folders."
    assert refused(member, "createResourceWatch", uri=(project / "elsewhere").as_uri()) == (-32009, through)
    code, message = refused(member, "createResourceWatch", uri=outside.as_uri())
    assert code == -32009 and message.endswith("is outside the working directories of every session you may read.")
    with AhpClient(host.port, acme.tokens["admin"], "admin-client") as admin:
        assert refused(admin, "subscribe", channel=watch) == (-32008, f"No channel {watch} here.")


def test_a_resource_request_grants_only_what_the_caller_holds(acme, host, member, project):
    readme = (project / "README.md").as_uri()
    assert member.call("resourceRequest", {"channel": ROOT, "uri": readme, "read": True, "write": True}) == {}
    with AhpClient(host.port, acme.tokens["guest"], "guest-client") as viewer:
        assert viewer.call("resourceRequest", {"channel": ROOT, "uri": readme}) == {}
        code, message = refused(viewer, "resourceRequest", uri=readme, write=True)
        assert code == -32009 and message == (f"{project / 'README.md'} is outside the working directories of every "
                                              "session you may change files in.")
    code, message = refused(member, "resourceRequest", uri="file:///etc/passwd")
    assert code == -32009 and message.endswith("you may read.")


def test_an_at_word_completes_file_names_of_the_sessions_folders(member, project):
    chat = default_chat(member, member.session)

    def complete(text, offset=None):
        return member.call("completions", {"channel": chat, "kind": "userMessage", "text": text,
                                           "offset": len(text) if offset is None else offset})["items"]

    assert complete("look at @RE") == [{"insertText": "@README.md", "rangeStart": 8, "rangeEnd": 11, "attachment": {
        "type": "resource", "label": "README.md", "uri": (project / "README.md").as_uri()}}]
    assert [item["insertText"] for item in complete("@src/m")] == ["@src/main.py"]
    assert [item["insertText"] for item in complete("@")] == ["@README.md", "@src"]
    assert complete("no mention") == [] and complete("mail@RE") == [] and complete("@../") == []
    assert refused(member, "completions", kind="userMessage", text="@", offset=2) == (
        -32602, "Invalid params: offset must be a number from 0 to the text's length.")
    other = f"ahp-chat:/{uuid.uuid4()}"
    with pytest.raises(RpcFailed) as failed:
        member.call("completions", {"channel": other, "kind": "userMessage", "text": "@", "offset": 1})
    assert (failed.value.code, failed.value.message) == (-32008, f"No chat {other} here.")
