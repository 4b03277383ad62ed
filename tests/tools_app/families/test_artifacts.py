"""Artifacts and references: written to the session's _meta, seen by clients as session/metaChanged."""
from .helpers import Desk

PR = "https://github.com/acme/app/pull/7"
KEY = "agentHost/sessionArtifacts"


def test_it_records_an_artifact_and_the_client_sees_the_meta(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(desk.session_uri)
        reply = desk.call("add_artifact_or_reference",
                          {"items": [{"type": "pullRequest", "label": "Fix login", "isArtifact": True, "link": PR}]})
        assert reply.startswith("Added artifact: ")
        meta = desk.client.action("session/metaChanged")["action"]["_meta"]
        [entry] = meta[KEY]
        assert (entry["id"], entry["type"], entry["isArtifact"], entry["isGitHub"]) == (reply.split(": ")[1], "pullRequest",
                                                                                        True, True)
        assert desk.session.meta == meta
        assert desk.client.subscribe(desk.session_uri)["_meta"] == meta


def test_adding_an_artifact_that_matches_a_reference_promotes_it_and_keeps_its_id(acme, host):
    with Desk(host, acme) as desk:
        first = desk.call("add_artifact_or_reference",
                          {"items": [{"type": "issue", "label": "Crash", "isArtifact": False, "link": PR}]})
        assert first.startswith("Added reference: ")
        again = desk.call("add_artifact_or_reference",
                          {"items": [{"type": "issue", "label": "Crash", "isArtifact": True, "link": PR}]})
        assert again == f"Promoted artifact: {first.split(': ')[1]}"
        [entry] = desk.session.meta[KEY]
        assert entry["isArtifact"] is True and entry["id"] == first.split(": ")[1]
        downgrade = desk.call("add_artifact_or_reference",
                              {"items": [{"type": "issue", "label": "Crash", "isArtifact": False, "link": PR}]})
        assert downgrade == f"Already recorded: {entry['id']}"
        assert desk.session.meta[KEY][0]["isArtifact"] is True


def test_it_lists_and_removes_by_id(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(desk.session_uri)
        added = desk.call("add_artifact_or_reference", {"items": [
            {"type": "file", "label": "Plan", "isArtifact": True, "uri": "file:///work/plan.md"}]}).split(": ")[1]
        assert desk.call("list_artifacts_and_references") == f"{added} (file, artifact) Plan — file:///work/plan.md"
        assert KEY in desk.client.action("session/metaChanged")["action"]["_meta"]
        assert desk.call("remove_artifact_or_reference", {"id": added}) == f"Removed artifact: {added}"
        assert KEY not in desk.client.action("session/metaChanged")["action"]["_meta"]
        assert desk.call("list_artifacts_and_references") == "No artifacts or references recorded for this session."
        assert desk.call("remove_artifact_or_reference", {"id": added}) == f"No artifact or reference with id {added}."


def test_it_refuses_a_plain_path_for_a_file(acme, host):
    with Desk(host, acme) as desk:
        reply = desk.call("add_artifact_or_reference",
                          {"items": [{"type": "file", "label": "Plan", "isArtifact": True, "uri": "/work/plan.md"}]})
        assert reply == ("Invalid add_artifact_or_reference input: uri must be an absolute URI including its scheme, "
                         "such as 'file:///path/to/file' — not a plain file system path.")
