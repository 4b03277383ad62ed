"""Comments: agent feedback as annotations on the session's annotations channel, written by the
tools and by clients' annotations/* actions through the same writers."""
import json

import pytest

from kernel.refusals import Refused
from tools_app.families.comments import actions
from tools_app.families.comments.models import FEEDBACK_KEY, Annotation

from .helpers import Desk

FILE = "file:///work/app.py"


def annotations_of(desk):
    return f"{desk.session_uri}/annotations"


def comment(desk, comment_id, text, state="accepted", kind="user", resolved=False, line=3):
    """A comment as a client (the person's editor) writes it."""
    return {"id": comment_id, "turnId": "t0", "resource": FILE, "resolved": resolved,
            "range": {"start": {"line": line - 1, "character": 0}, "end": {"line": line, "character": 0}},
            "entries": [{"id": f"{comment_id}:0", "text": text, "_meta": {FEEDBACK_KEY: {"author": "user"}}}],
            "_meta": {FEEDBACK_KEY: {"kind": kind, "state": state, "sessionResource": desk.session_uri}}}


def client_sets(desk, annotation):
    desk.client.dispatch(annotations_of(desk), {"type": "annotations/set", "annotation": annotation})
    return desk.client.action("annotations/set")


RANGE = {"startLineNumber": 3, "startColumn": 1, "endLineNumber": 5, "endColumn": 7}


def listed(desk, **arguments):
    return json.loads(desk.call("listComments", arguments))


def one_based(comment_id, text, kind="user", resolved=False, author="user", **extra):
    """A comment as the tools answer it; `comment()` puts it on lines 3-4."""
    return {"id": comment_id, "resourceUri": FILE, "text": text, "author": author, "kind": kind,
            "resolved": resolved,
            "range": {"startLineNumber": 3, "startColumn": 1, "endLineNumber": 4, "endColumn": 1}, **extra}


def test_add_comment_proposes_a_code_review_comment_with_a_zero_based_range(acme, host):
    with Desk(host, acme) as desk:
        assert desk.client.subscribe(annotations_of(desk)) == {"annotations": []}
        assert desk.call("addComment", {"resourceUri": FILE, "range": RANGE, "text": "Off by one"}) == "Comment added."
        made = desk.client.action("annotations/set")["action"]["annotation"]
        assert made["range"] == {"start": {"line": 2, "character": 0}, "end": {"line": 4, "character": 6}}
        assert made["_meta"][FEEDBACK_KEY] == {"kind": "codeReview", "state": "created",
                                               "sessionResource": desk.session_uri}
        assert made["entries"][0]["_meta"][FEEDBACK_KEY] == {"author": "agent"}
        assert desk.client.subscribe(annotations_of(desk))["annotations"] == [made]


def test_add_comment_refuses_as_the_reference_host_does(acme, host):
    with Desk(host, acme) as desk:
        assert desk.call("addComment", {"resourceUri": FILE, "range": {**RANGE, "startColumn": 0}, "text": "x"}) == (
            "Invalid addComment input: range.startColumn must be a positive integer.")
        assert desk.call("addComment", {"resourceUri": "", "range": RANGE, "text": "x"}) == (
            "Invalid addComment input: resourceUri must be a non-empty string.")
        assert desk.call("addComment", {"resourceUri": FILE, "text": "x"}) == (
            "Invalid input for addComment at /: 'range' is a required property")
        assert desk.call("deleteComments", {"commentIds": []}) == (
            "Invalid deleteComments input: commentIds must be a non-empty string array.")


def test_add_comment_offers_the_reference_schema(acme, host):
    from tools_app.catalog.host_tools import REGISTRY

    schema = REGISTRY.get("addComment").input_schema
    assert schema["required"] == ["resourceUri", "range", "text"]
    assert schema["properties"]["range"]["required"] == ["startLineNumber", "startColumn", "endLineNumber",
                                                         "endColumn"]


WAITING_NOTE = ("There is 1 code review comment which the user has not reviewed yet. If the user wants you to "
                "tackle them, call the `viewUnreviewedComments` tool to view them.")


def test_list_comments_shows_accepted_ones_resolved_ones_when_asked_and_notes_those_waiting(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "Rename this"))
        client_sets(desk, comment(desk, "c2", "Done already", resolved=True, state="resolved"))
        desk.call("addComment", {"resourceUri": FILE, "range": RANGE, "text": "A proposal"})
        assert listed(desk) == {"comments": [one_based("c1", "Rename this")], "note": WAITING_NOTE}
        assert listed(desk, includeResolved=False) == listed(desk)
        assert listed(desk, includeResolved=True) == {
            "comments": [one_based("c1", "Rename this"), one_based("c2", "Done already", resolved=True)],
            "note": WAITING_NOTE}
        assert desk.call("listComments", {"includeResolved": "yes"}) == (
            "Invalid input for listComments at /includeResolved: 'yes' is not of type 'boolean'")


def test_list_comments_offers_include_resolved(acme, host):
    from tools_app.catalog.host_tools import REGISTRY

    assert REGISTRY.get("listComments").input_schema == {"type": "object", "properties": {
        "includeResolved": {"type": "boolean", "description": "Also list resolved comments. Defaults to false."}}}


def test_every_comment_and_reply_names_its_author(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        thread = comment(desk, "c1", "Why a loop here?")
        thread["entries"] += [
            {"id": "c1:1", "text": "To keep the order.", "_meta": {FEEDBACK_KEY: {"author": "agent"}}},
            {"id": "c1:2", "text": {"markdown": "Keep it, then."}},  # no author: a reply is the person's
        ]
        client_sets(desk, thread)
        review = comment(desk, "c2", "Tests are missing", kind="prReview")
        del review["entries"][0]["_meta"]  # no author: the opening entry is its kind's, a reviewer's
        review["entries"].append({"id": "c2:1", "text": "Looks fine", "_meta": {FEEDBACK_KEY: {"author": "someone"}}})
        client_sets(desk, review)
        accepted_review = comment(desk, "c3", "Off by one", kind="codeReview")
        del accepted_review["entries"][0]["_meta"]  # a code review's opening entry is an agent's
        client_sets(desk, accepted_review)
        assert listed(desk) == {"comments": [
            one_based("c1", "Why a loop here?", replies=[
                {"author": "agent", "text": "To keep the order."}, {"author": "user", "text": "Keep it, then."}]),
            one_based("c2", "Tests are missing", kind="prReview", author="prReviewer",
                      replies=[{"author": "user", "text": "Looks fine"}]),
            one_based("c3", "Off by one", kind="codeReview", author="agent"),
        ]}


def test_annotations_without_feedback_meta_are_someone_elses(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        foreign = comment(desk, "x1", "Not feedback")
        del foreign["_meta"]
        client_sets(desk, foreign)
        other_session = comment(desk, "x2", "Another session's")
        other_session["_meta"][FEEDBACK_KEY]["sessionResource"] = "ahp-session:/00000000-0000-0000-0000-000000000000"
        client_sets(desk, other_session)
        assert listed(desk) == {"comments": []}
        assert desk.call("replyToComment", {"commentId": "x1", "text": "hi"}) == "No comment x1 in this session."
        assert json.loads(desk.call("deleteComments", {"commentIds": ["x1", "x2"]})) == {
            "deletedCommentIds": [], "notFoundCommentIds": ["x1", "x2"], "remainingComments": []}
        assert json.loads(desk.call("resolveComments", {"commentIds": ["x1"]}))["notFoundCommentIds"] == ["x1"]
        assert Annotation.objects.filter(annotation_id__in=["x1", "x2"]).count() == 2


def test_reply_adds_an_agent_entry_listed_as_a_reply(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "Why?"))
        assert json.loads(desk.call("replyToComment", {"commentId": "c1", "text": "Because."})) == {
            "repliedCommentId": "c1"}
        entry = desk.client.action("annotations/entrySet", annotationId="c1")["action"]["entry"]
        assert entry["text"] == "Because." and entry["_meta"][FEEDBACK_KEY] == {"author": "agent"}
        assert listed(desk) == {"comments": [one_based("c1", "Why?", replies=[{"author": "agent", "text": "Because."}])]}


def test_resolve_and_submit_again(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "Fix"))
        assert json.loads(desk.call("resolveComments", {"commentIds": ["c1", "zz"]})) == {
            "resolved": True, "updatedCommentIds": ["c1"], "notFoundCommentIds": ["zz"],
            "comments": [one_based("c1", "Fix", resolved=True)]}
        resolved = desk.client.action("annotations/set")["action"]["annotation"]
        assert resolved["resolved"] is True and resolved["_meta"][FEEDBACK_KEY]["state"] == "resolved"
        assert json.loads(desk.call("resolveComments", {"commentIds": ["c1"], "resolved": False}))["resolved"] is False
        again = desk.client.action("annotations/set")["action"]["annotation"]
        assert again["resolved"] is False and again["_meta"][FEEDBACK_KEY]["state"] == "submitted"


def test_delete_answers_what_it_deleted_what_it_did_not_find_and_what_remains(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "One"))
        client_sets(desk, comment(desk, "c2", "Two"))
        client_sets(desk, comment(desk, "c3", "Three"))
        assert json.loads(desk.call("deleteComments", {"commentIds": ["c1", "c9", "c2", "c1"]})) == {
            "deletedCommentIds": ["c1", "c2"], "notFoundCommentIds": ["c9"],
            "remainingComments": [one_based("c3", "Three")]}
        assert desk.client.action("annotations/removed")["action"]["annotationId"] == "c1"
        assert [a["id"] for a in desk.client.subscribe(annotations_of(desk))["annotations"]] == ["c3"]


def test_view_unreviewed_comments_asks_first_and_reading_accepts(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(desk.session_uri)
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "Waiting one", state="created", kind="prReview"))
        turn = desk.start("viewUnreviewedComments")
        request = desk.client.action("session/inputNeededSet")["action"]["request"]
        assert (request["kind"], request["toolCall"]["status"]) == ("toolConfirmation", "pending-confirmation")
        assert request["toolCall"]["confirmationTitle"] == "Show the agent 1 comment waiting for your review?"
        desk.client.dispatch(desk.chat_uri, {"type": "chat/toolCallConfirmed", "turnId": turn,
                                             "toolCallId": request["id"], "approved": True, "confirmed": "user-action"})
        assert desk.client.action("chat/toolCallConfirmed")["origin"]["clientId"] == "alice"
        assert desk.client.action("session/inputNeededRemoved")["action"]["id"] == request["id"]
        shown = {"comments": [one_based("c1", "Waiting one", kind="prReview")]}
        assert json.loads(desk.client.reply_to(turn)) == shown
        accepted = desk.client.action("annotations/set")["action"]["annotation"]
        assert accepted["_meta"][FEEDBACK_KEY]["state"] == "submitted"
        assert listed(desk) == shown


def test_view_unreviewed_comments_declined_shows_nothing(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(desk.session_uri)
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "Private", state="created", kind="codeReview"))
        turn = desk.start("viewUnreviewedComments")
        request = desk.client.action("session/inputNeededSet")["action"]["request"]
        desk.client.dispatch(desk.chat_uri, {"type": "chat/toolCallConfirmed", "turnId": turn,
                                             "toolCallId": request["id"], "approved": False, "reason": "denied"})
        assert desk.client.reply_to(turn) == "The person declined to show the waiting comments."
        assert Annotation.objects.get(annotation_id="c1").feedback["state"] == "created"


def test_a_guest_may_not_write_comments_but_may_list_them(acme, host):
    session = actions_session(acme)
    guest = acme.principal("guest")
    with pytest.raises(Refused) as refused:
        actions.do_set_annotation(guest, session, {"id": "g", "turnId": "", "resource": FILE, "resolved": False,
                                                   "entries": [{"id": "g:0", "text": "hi"}]})
    assert refused.value.sentence == "acme-guest may not session:review here"


def test_a_guests_client_action_is_rejected_with_the_same_sentence(acme, host):
    with Desk(host, acme) as desk:
        from ...ahp.protocol.harness import AhpClient

        with AhpClient(host.port, acme.tokens["guest"], "guest-ide") as guest:
            guest.subscribe(annotations_of(desk))
            guest.dispatch(annotations_of(desk), {"type": "annotations/set", "annotation": comment(desk, "g1", "hi")})
            rejected = guest.action("annotations/set", rejected=True)
            assert rejected["rejectionReason"] == "acme-guest may not session:review here"


def actions_session(people):
    from sessions_app import actions as session_actions

    return session_actions.do_create_session(people.principal("member"), "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f")
