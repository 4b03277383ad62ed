"""Comments: agent feedback as annotations on the session's annotations channel, written by the
tools and by clients' annotations/* actions through the same writers."""
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


def test_add_comment_proposes_a_code_review_comment_with_a_zero_based_range(acme, host):
    with Desk(host, acme) as desk:
        assert desk.client.subscribe(annotations_of(desk)) == {"annotations": []}
        reply = desk.call("addComment", {"resource": FILE, "range": {"startLine": 3, "endLine": 5}, "text": "Off by one"})
        made = desk.client.action("annotations/set")["action"]["annotation"]
        assert reply == f"Added comment {made['id']}. It is a proposal: listComments shows it once the person accepts it."
        assert made["range"] == {"start": {"line": 2, "character": 0}, "end": {"line": 4, "character": 0}}
        assert made["_meta"][FEEDBACK_KEY] == {"kind": "codeReview", "state": "created",
                                               "sessionResource": desk.session_uri}
        assert made["entries"][0]["_meta"][FEEDBACK_KEY] == {"author": "agent"}
        assert desk.client.subscribe(annotations_of(desk))["annotations"] == [made]


def test_list_comments_shows_accepted_ones_and_counts_those_waiting(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "Rename this", line=3))
        client_sets(desk, comment(desk, "c2", "Done already", resolved=True, state="resolved"))
        desk.call("addComment", {"resource": FILE, "text": "A proposal"})
        assert desk.call("listComments") == (
            f"- c1 [user] {FILE} lines 3-4\n  opened by user: Rename this\n"
            "1 comment waits for review; call viewUnreviewedComments to see it.")
        assert desk.call("listComments", {"includeResolved": True}).split("\n")[:4] == [
            f"- c1 [user] {FILE} lines 3-4", "  opened by user: Rename this",
            f"- c2 [user] {FILE} lines 3-4 (resolved)", "  opened by user: Done already"]


def test_annotations_without_feedback_meta_are_someone_elses(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        foreign = comment(desk, "x1", "Not feedback")
        del foreign["_meta"]
        client_sets(desk, foreign)
        other_session = comment(desk, "x2", "Another session's")
        other_session["_meta"][FEEDBACK_KEY]["sessionResource"] = "ahp-session:/00000000-0000-0000-0000-000000000000"
        client_sets(desk, other_session)
        assert desk.call("listComments", {"includeResolved": True}) == "No comments."
        assert desk.call("replyToComment", {"commentId": "x1", "text": "hi"}) == "No comment x1 in this session."
        assert desk.call("deleteComments", {"commentIds": ["x1", "x2"]}) == "Deleted: none.\nNot found: x1, x2."
        assert desk.call("resolveComments", {"commentIds": ["x1"]}) == "Resolved: none.\nNot found: x1."
        assert Annotation.objects.filter(annotation_id__in=["x1", "x2"]).count() == 2


def test_reply_adds_an_agent_entry_and_list_names_the_authors(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "Why?"))
        assert desk.call("replyToComment", {"commentId": "c1", "text": "Because."}) == "Replied to comment c1."
        entry = desk.client.action("annotations/entrySet", annotationId="c1")["action"]["entry"]
        assert entry["text"] == "Because." and entry["_meta"][FEEDBACK_KEY] == {"author": "agent"}
        assert desk.call("listComments") == f"- c1 [user] {FILE} lines 3-4\n  opened by user: Why?\n  reply from agent: Because."


def test_resolve_and_submit_again(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "Fix"))
        assert desk.call("resolveComments", {"commentIds": ["c1", "zz"]}) == "Resolved: c1.\nNot found: zz."
        resolved = desk.client.action("annotations/set")["action"]["annotation"]
        assert resolved["resolved"] is True and resolved["_meta"][FEEDBACK_KEY]["state"] == "resolved"
        assert desk.call("listComments") == "No comments."
        assert desk.call("resolveComments", {"commentIds": ["c1"], "resolved": False}) == "Submitted again: c1."
        again = desk.client.action("annotations/set")["action"]["annotation"]
        assert again["resolved"] is False and again["_meta"][FEEDBACK_KEY]["state"] == "submitted"


def test_delete_answers_what_it_deleted_and_what_it_did_not_find(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "One"))
        client_sets(desk, comment(desk, "c2", "Two"))
        assert desk.call("deleteComments", {"commentIds": ["c1", "c9", "c2"]}) == "Deleted: c1, c2.\nNot found: c9."
        assert desk.client.action("annotations/removed")["action"]["annotationId"] == "c1"
        assert desk.client.subscribe(annotations_of(desk)) == {"annotations": []}


def test_view_unreviewed_comments_asks_first_and_reading_accepts(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(desk.session_uri)
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "Waiting one", state="created"))
        turn = desk.start("viewUnreviewedComments")
        request = desk.client.action("session/inputNeededSet")["action"]["request"]
        assert (request["kind"], request["toolCall"]["status"]) == ("toolConfirmation", "pending-confirmation")
        assert request["toolCall"]["confirmationTitle"] == "Show the agent 1 comment waiting for your review?"
        desk.client.dispatch(desk.chat_uri, {"type": "chat/toolCallConfirmed", "turnId": turn,
                                             "toolCallId": request["id"], "approved": True, "confirmed": "user-action"})
        assert desk.client.action("chat/toolCallConfirmed")["origin"]["clientId"] == "alice"
        assert desk.client.action("session/inputNeededRemoved")["action"]["id"] == request["id"]
        assert desk.client.reply_to(turn) == f"- c1 [user] {FILE} lines 3-4\n  opened by user: Waiting one"
        accepted = desk.client.action("annotations/set")["action"]["annotation"]
        assert accepted["_meta"][FEEDBACK_KEY]["state"] == "submitted"
        assert desk.call("listComments") == f"- c1 [user] {FILE} lines 3-4\n  opened by user: Waiting one"


def test_view_unreviewed_comments_declined_shows_nothing(acme, host):
    with Desk(host, acme) as desk:
        desk.client.subscribe(desk.session_uri)
        desk.client.subscribe(annotations_of(desk))
        client_sets(desk, comment(desk, "c1", "Private", state="created"))
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
