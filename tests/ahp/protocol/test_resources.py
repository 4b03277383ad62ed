"""resource* commands for file: URIs: only inside the working directories of sessions the
caller may read (and, to change files, whose folders it may change); no link followed."""
import base64
import os

import pytest

from ...conftest import tenant_made
from .harness import AhpClient, RpcFailed

ROOT = "ahp-root://"


@pytest.fixture
def project(acme, workspace):
    folder = workspace / "app"
    (folder / "src").mkdir(parents=True)
    (folder / "README.md").write_text("hello\n")
    (folder / "logo.png").write_bytes(b"\x89PNG\x00\xff")
    return tenant_made(folder, acme.tenant)


@pytest.fixture
def member(acme, host, project):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        client.create_session(workingDirectories=[project.as_uri()])
        yield client


def refused(client, method, **params):
    with pytest.raises(RpcFailed) as failed:
        client.call(method, {"channel": ROOT, **params})
    return failed.value.code, failed.value.message


def test_a_client_browses_reads_and_writes_its_sessions_folder(member, project):
    assert member.call("resourceList", {"channel": ROOT, "uri": project.as_uri()}) == {"entries": [
        {"name": "README.md", "type": "file"}, {"name": "logo.png", "type": "file"}, {"name": "src", "type": "directory"}]}
    readme = (project / "README.md").as_uri()
    assert member.call("resourceRead", {"channel": ROOT, "uri": readme}) == {
        "data": "hello\n", "encoding": "utf-8", "contentType": "text/markdown"}
    logo = member.call("resourceRead", {"channel": ROOT, "uri": (project / "logo.png").as_uri()})
    assert (logo["encoding"], base64.b64decode(logo["data"])) == ("base64", b"\x89PNG\x00\xff")
    stat = member.call("resourceResolve", {"channel": ROOT, "uri": readme})
    assert (stat["type"], stat["size"]) == ("file", 6)
    assert member.call("resourceWrite", {"channel": ROOT, "uri": readme, "data": "bye\n", "encoding": "utf-8",
                                         "ifMatch": stat["etag"]}) == {}
    assert (project / "README.md").read_text() == "bye\n"
    assert refused(member, "resourceWrite", uri=readme, data="again", encoding="utf-8", ifMatch=stat["etag"]) == (
        -32011, f"{project / 'README.md'} changed since {stat['etag']}.")
    new = (project / "src" / "main.py").as_uri()
    member.call("resourceWrite", {"channel": ROOT, "uri": new, "data": base64.b64encode(b"print(1)\n").decode(),
                                  "encoding": "base64", "createOnly": True})
    assert (project / "src" / "main.py").read_text() == "print(1)\n"
    assert refused(member, "resourceWrite", uri=new, data="x", encoding="utf-8", createOnly=True) == (
        -32010, f"{project / 'src' / 'main.py'} already exists.")
    member.call("resourceMkdir", {"channel": ROOT, "uri": (project / "docs").as_uri()})
    assert (project / "docs").is_dir()
    assert refused(member, "resourceDelete", uri=(project / "src").as_uri()) == (
        -32011, f"{project / 'src'} is not empty; delete it with recursive.")
    member.call("resourceDelete", {"channel": ROOT, "uri": (project / "src").as_uri(), "recursive": True})
    assert not (project / "src").exists()
    assert refused(member, "resourceDelete", uri=project.as_uri()) == (
        -32011, f"{project} is a session's working directory; end the session instead.")


def test_a_path_outside_the_folders_is_refused_and_no_link_is_followed(member, project, workspace):
    secret = workspace / "other"
    secret.mkdir()
    (secret / "key.txt").write_text("s3cret")
    os.symlink(secret / "key.txt", project / "link.txt")
    sentence = "is outside the working directories of every session you may read."
    for uri in (f"{project.as_uri()}/../other/key.txt", "file:///etc/passwd"):
        code, message = refused(member, "resourceRead", uri=uri)
        assert code == -32009 and message.endswith(sentence), message
    through = f"{project / 'link.txt'} is reached through a link; this host follows no link in a session's folders."
    assert refused(member, "resourceRead", uri=(project / "link.txt").as_uri()) == (-32009, through)
    assert refused(member, "resourceRead", uri="https://example.com/x") == (
        -32602, "Invalid params: uri must be an absolute file: URI.")
    assert refused(member, "resourceWrite", uri=(project / "link.txt").as_uri(), data="x", encoding="utf-8") == (
        -32009, through)
    assert (secret / "key.txt").read_text() == "s3cret" and (project / "link.txt").is_symlink()


def test_a_guest_reads_but_may_not_write(acme, host, member, project):
    with AhpClient(host.port, acme.tokens["guest"], "guest") as guest:
        readme = (project / "README.md").as_uri()
        assert guest.call("resourceRead", {"channel": ROOT, "uri": readme})["data"] == "hello\n"
        assert refused(guest, "resourceWrite", uri=readme, data="x", encoding="utf-8") == (
            -32009, f"{project / 'README.md'} is outside the working directories of every session you may change "
                    "files in.")


def test_another_tenant_cannot_reach_the_folder(globex, host, member, project):
    with AhpClient(host.port, globex.tokens["root"], "intruder") as intruder:
        assert refused(intruder, "resourceRead", uri=(project / "README.md").as_uri()) == (
            -32009, f"{project / 'README.md'} is outside the working directories of every session you may read.")


@pytest.mark.parametrize("params, message", [
    ({"encoding": "latin-1"}, "Invalid params: encoding must be utf-8 or base64."),
    ({"encoding": "utf-8", "mode": "append"}, "Invalid params: this host writes whole files only "
                                              "(mode truncate at position 0)."),
    ({"encoding": "base64", "data": "not base64!"}, "Invalid params: data is not base64."),
])
def test_bad_writes_are_refused(member, project, params, message):
    assert refused(member, "resourceWrite", uri=(project / "x.txt").as_uri(), **{"data": "x", **params}) == (
        -32602, message)


def test_a_client_copies_and_moves_within_the_folders_links_copied_as_links(member, project, workspace):
    secret = workspace / "other"
    secret.mkdir()
    (secret / "key.txt").write_text("s3cret")
    os.symlink(secret / "key.txt", project / "src" / "key-link")
    (project / "src" / "a.py").write_text("a = 1\n")
    member.call("resourceCopy", {"channel": ROOT, "source": (project / "src").as_uri(),
                                 "destination": (project / "copy").as_uri()})
    assert (project / "copy" / "a.py").read_text() == "a = 1\n"
    assert (project / "copy" / "key-link").is_symlink()  # still a link, still refused to read through
    assert refused(member, "resourceRead", uri=(project / "copy" / "key-link").as_uri())[0] == -32009
    assert refused(member, "resourceCopy", source=(project / "README.md").as_uri(),
                   destination=(project / "copy" / "a.py").as_uri(), failIfExists=True) == (
        -32010, f"{project / 'copy' / 'a.py'} already exists.")
    member.call("resourceMove", {"channel": ROOT, "source": (project / "copy" / "a.py").as_uri(),
                                 "destination": (project / "b.py").as_uri()})
    assert (project / "b.py").read_text() == "a = 1\n" and not (project / "copy" / "a.py").exists()
    assert refused(member, "resourceMove", source=(project / "b.py").as_uri(),
                   destination=(secret / "b.py").as_uri()) == (
        -32009, f"{secret / 'b.py'} is outside the working directories of every session you may change files in.")
    assert refused(member, "resourceMove", source=project.as_uri(), destination=(workspace / "moved").as_uri())[0] \
        == -32009
    assert not (secret / "b.py").exists() and project.is_dir()


def test_mkdir_makes_every_missing_folder_and_an_existing_folder_is_a_success(member, project):
    nested = project / "docs" / "guide" / "images"
    assert member.call("resourceMkdir", {"channel": ROOT, "uri": nested.as_uri()}) == {}
    assert nested.is_dir()
    for existing in (nested, project / "src", project):
        assert member.call("resourceMkdir", {"channel": ROOT, "uri": existing.as_uri()}) == {}
    assert member.call("resourceList", {"channel": ROOT, "uri": (project / "docs").as_uri()}) == {
        "entries": [{"name": "guide", "type": "directory"}]}


def test_mkdir_refuses_a_file_or_a_link_on_the_way(member, project, workspace):
    assert refused(member, "resourceMkdir", uri=(project / "README.md").as_uri()) == (
        -32010, f"{project / 'README.md'} already exists and is not a folder.")
    assert refused(member, "resourceMkdir", uri=(project / "README.md" / "inner").as_uri()) == (
        -32010, f"{project / 'README.md'} already exists and is not a folder.")
    secret = workspace / "other"
    secret.mkdir()
    os.symlink(secret, project / "elsewhere")
    assert refused(member, "resourceMkdir", uri=(project / "elsewhere" / "made").as_uri()) == (
        -32009, f"{project / 'elsewhere'} is reached through a link; this host follows no link in a session's folders.")
    assert refused(member, "resourceMkdir", uri=(project / "elsewhere").as_uri()) == (
        -32009, f"{project / 'elsewhere'} is reached through a link; this host follows no link in a session's folders.")
    assert list(secret.iterdir()) == [] and (project / "README.md").read_text() == "hello\n"


def test_a_file_in_nested_folders_is_written_by_the_session_of_the_deepest_one_whatever_their_order(
        acme, host, member, project):
    from sandbox.bubblewrap import Sandbox

    def owner_of(session_uri):
        return Sandbox(session_uri.rsplit("/", 1)[1], tenant_id=acme.tenant.id).owner()[0]

    [whole] = [s["resource"] for s in member.call("listSessions", {})["items"]]  # `member` made it on the project
    sources = member.create_session(workingDirectories=[(project / "src").as_uri()])
    again = member.create_session(workingDirectories=[(project / "src").as_uri()])  # as deep, younger
    for name in ("a.py", "b.py"):
        member.call("resourceWrite", {"channel": ROOT, "uri": (project / "src" / name).as_uri(), "data": "x",
                                      "encoding": "utf-8"})
        assert (project / "src" / name).stat().st_uid == owner_of(sources) != owner_of(again)
    member.call("resourceWrite", {"channel": ROOT, "uri": (project / "notes.md").as_uri(), "data": "x",
                                  "encoding": "utf-8"})
    assert (project / "notes.md").stat().st_uid == owner_of(whole) != owner_of(sources)
