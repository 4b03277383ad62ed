"""The artifact tools: record deliverables and references next to the chat input. Not in the
"session" group: they are offered whatever `sessionTools` says."""
from kernel.refusals import Refused
from tools_app.catalog.registry import Tool

from . import actions
from . import entries as artifacts


def add_artifact_or_reference(context, arguments):
    try:
        entries = [artifacts.parse_item(item) for item in arguments["items"]]
    except artifacts.InvalidArtifact as invalid:
        raise Refused(str(invalid)) from None

    def change(current):
        messages = []
        for entry in entries:
            current, status, kept = artifacts.add(current, entry)
            messages.append(f"{status}: {kept['id']}")
        return current, "\n".join(messages)

    return actions.do_change_artifacts(context.session, change)


def remove_artifact_or_reference(context, arguments):
    wanted = arguments["id"]

    def change(current):
        removed = next((e for e in current if e["id"] == wanted), None)
        if removed is None:
            return current, f"No artifact or reference with id {wanted}."
        noun = "artifact" if removed.get("isArtifact") else "reference"
        return [e for e in current if e is not removed], f"Removed {noun}: {wanted}"

    return actions.do_change_artifacts(context.session, change)


def list_artifacts_and_references(context, arguments):
    current = artifacts.read(context.session.__class__.objects.get(pk=context.session.pk).meta)
    if not current:
        return "No artifacts or references recorded for this session."
    return "\n".join(artifacts.describe(e) for e in current)


ARTIFACT_ITEM = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": list(artifacts.TYPES)},
        "label": {"type": "string", "description": "Short label shown to the person."},
        "isArtifact": {"type": "boolean", "description": f"true for an artifact, false for a reference. "
                                                         f"{artifacts.CLASSIFICATION}"},
        "link": {"type": "string", "description": "http(s) URL; required for pullRequest, issue, commit, website."},
        "uri": {"type": "string", "description": "Absolute URI with its scheme; required for file and resource."},
        "commitHash": {"type": "string", "description": "Required for commit."},
    },
    "required": ["type", "label", "isArtifact"],
}

ARTIFACT_TOOLS = (
    Tool("add_artifact_or_reference", title="Add Artifact or Reference",
         description=("Record artifacts (deliverables: an issue or pull request you create or fix, a result the "
                      "person will reopen) or references (existing things worth looking at) next to the chat input. "
                      "Adding an artifact that matches a reference promotes it and keeps its id."),
         input_schema={"type": "object", "properties": {"items": {"type": "array", "minItems": 1, "items": ARTIFACT_ITEM}},
                       "required": ["items"]},
         executor=add_artifact_or_reference, instruction=artifacts.INSTRUCTION, annotations={"readOnlyHint": False},
         effects=frozenset({"writes"})),
    Tool("remove_artifact_or_reference", title="Remove Artifact or Reference",
         description="Remove an artifact or reference recorded in this session, by id.",
         input_schema={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
         executor=remove_artifact_or_reference, defer_loading=True,
         annotations={"readOnlyHint": False, "destructiveHint": True}, effects=frozenset({"writes", "destructive"})),
    Tool("list_artifacts_and_references", title="List Artifacts and References",
         description="List the artifacts and references recorded in this session, with their ids.",
         executor=list_artifacts_and_references, defer_loading=True, annotations={"readOnlyHint": True},
         effects=frozenset({"reads"})),
)
