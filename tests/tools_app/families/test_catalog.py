"""The tool families' tools in the catalog: offered whatever sessionTools says, deferred as the issue
says, and the artifact tool carrying its instruction."""
from sessions_app import actions
from tools_app.catalog.loader import catalog_for_chat
from tools_app.models import HostConfig

WORKBENCH = ["add_artifact_or_reference", "remove_artifact_or_reference", "list_artifacts_and_references",
             "addComment", "listComments", "replyToComment", "deleteComments", "resolveComments",
             "viewUnreviewedComments", "setAgentMergeEnabled", "readAgentMergeCI", "replyToAgentMergeReviewThread",
             "rerunAgentMergeWorkflow", "ahp_resource", "ahp_terminals", "schedule_wakeup"]  # the host's own three last
DEFERRED = {"remove_artifact_or_reference", "list_artifacts_and_references", "addComment", "listComments",
            "replyToComment", "deleteComments", "resolveComments", "viewUnreviewedComments", "setAgentMergeEnabled",
            "readAgentMergeCI", "replyToAgentMergeReviewThread", "rerunAgentMergeWorkflow"}


def chat_of(people):
    session = actions.do_create_session(people.principal("member"), "0b3c1d9e-1f1e-4c51-9a0b-2f6c7d8e9a01")
    return session.chats.get()


def test_it_offers_every_family_tool_with_session_tools_on(acme):
    snapshot = catalog_for_chat(chat_of(acme))
    assert [n for n in snapshot.names if n in WORKBENCH] == WORKBENCH


def test_it_offers_them_whatever_session_tools_says(acme):
    chat = chat_of(acme)
    config = HostConfig.for_tenant(acme.tenant)
    config.session_tools = False
    config.save()
    snapshot = catalog_for_chat(chat)
    assert "create_session" not in snapshot.names
    assert [n for n in snapshot.names if n in WORKBENCH] == WORKBENCH


def test_it_defers_all_but_add_resources_terminals_and_wakeups(acme):
    snapshot = catalog_for_chat(chat_of(acme))
    assert snapshot.deferred & set(WORKBENCH) == DEFERRED


def test_the_add_tool_carries_the_instruction(acme):
    snapshot = catalog_for_chat(chat_of(acme))
    assert any(i.startswith("Record notable artifacts and references with `add_artifact_or_reference`")
               for i in snapshot.instructions)


def test_they_are_server_tools_of_the_session(acme):
    snapshot = catalog_for_chat(chat_of(acme))
    assert {d["name"] for d in snapshot.server_tools} >= set(WORKBENCH)
