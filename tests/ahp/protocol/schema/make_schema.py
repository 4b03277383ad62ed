"""Writes ahp-1.1.schema.json: a JSON Schema (2020-12) of the AHP 1.1 frames a scripted session
exchanges, written by hand from microsoft/agent-host-protocol's `types/` (common/commands.ts,
channels-*/actions.ts, channels-*/state.ts, channels-root/notifications.ts) for the shapes this
host sends and accepts. Actions and notification params are closed (a field the types do not name
is a violation); states are checked for the fields the types require. Where the host departs on
purpose (docs/wire.md), the departure is named beside the shape that allows it.

Run `python tests/ahp/protocol/schema/make_schema.py` after changing a shape; the test reads the
JSON file, never this script."""
import json
from pathlib import Path
from typing import Any

STRING, INTEGER, NUMBER, BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
OBJECT = {"type": "object"}
ANY: dict[str, Any] = {}
META = {"type": "object"}  # _meta: Record<string, unknown>


def ref(name):
    return {"$ref": f"#/$defs/{name}"}


def closed(required, optional=None):
    """An object with exactly these fields (each required one present)."""
    properties = {**required, **(optional or {})}
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def shaped(required, optional=None):
    """An object with at least these fields (states: the host adds fields the types leave open)."""
    return {"type": "object", "properties": {**required, **(optional or {})}, "required": list(required)}


def array(items):
    return {"type": "array", "items": items}


def items_of(schema):  # `{items: [...]}` wrappers kept for forward compatibility
    return closed({"items": array(schema)})


def nullable(schema):
    return {"anyOf": [schema, {"type": "null"}]}


STRING_OR_MARKDOWN = {"anyOf": [STRING, shaped({"markdown": STRING})]}

DEFS = {
    "URI": STRING,
    "Message": shaped({"text": STRING}, {"origin": shaped({"kind": STRING}), "attachments": array(OBJECT),
                                         "model": OBJECT, "agent": OBJECT, "_meta": META}),
    "ChatSummary": shaped({"resource": STRING, "title": STRING, "status": INTEGER, "modifiedAt": STRING},
                          {"origin": shaped({"kind": STRING})}),
    "SessionChatSummary": shaped({"resource": STRING, "title": STRING, "status": INTEGER},
                                 {"origin": shaped({"kind": STRING})}),
    # SessionSummary; `workingDirectories` (an array) besides the types' single workingDirectory is
    # the host's departure (docs/wire.md, createSession).
    "SessionSummary": shaped({"resource": STRING, "provider": STRING, "title": STRING, "status": INTEGER,
                              "createdAt": STRING, "modifiedAt": STRING},
                             {"chats": array(ref("SessionChatSummary")), "defaultChat": STRING,
                              "workingDirectories": array(STRING)}),
    "ResponsePart": shaped({"kind": {"enum": ["markdown", "contentRef", "toolCall", "reasoning",
                                              "systemNotification", "subagent"]}}),
    "ToolCallResult": shaped({"success": BOOLEAN}, {"pastTenseMessage": STRING_OR_MARKDOWN, "content": array(OBJECT),
                                                    "error": shaped({"message": STRING}),
                                                    "structuredContent": ANY}),
    "ToolCallContributor": shaped({"kind": STRING}),
    "ErrorInfo": shaped({"errorType": STRING, "message": STRING}),
    "Snapshot": closed({"resource": STRING, "state": OBJECT, "fromSeq": INTEGER}),
    "TerminalInfo": shaped({"resource": STRING, "title": STRING}, {"claim": OBJECT, "exitCode": INTEGER}),
    "Annotation": shaped({"id": STRING, "resource": STRING, "resolved": BOOLEAN, "entries": array(ref("AnnotationEntry"))},
                         {"range": OBJECT, "turnId": STRING, "_meta": META}),
    "AnnotationEntry": shaped({"id": STRING, "text": STRING_OR_MARKDOWN}, {"_meta": META}),
    "ResourceChange": closed({"uri": STRING, "type": {"enum": ["added", "updated", "deleted"]}}),
    "ActionOrigin": closed({"clientId": STRING, "clientSeq": INTEGER}),
    "ActionEnvelope": closed({"channel": STRING, "action": ref("StateAction"), "serverSeq": {"type": "integer",
                                                                                            "minimum": 0}},
                             {"origin": ref("ActionOrigin"), "rejectionReason": STRING}),
}

TOOL_CALL = {"turnId": STRING, "toolCallId": STRING}
TOOL_CALL_META = {"_meta": META}
ACTIONS = {
    # root
    "root/configChanged": closed({"config": OBJECT}, {"replace": BOOLEAN}),
    "root/terminalsChanged": closed({"terminals": array(ref("TerminalInfo"))}),
    # session
    "session/ready": closed({}),
    "session/creationFailed": closed({"error": ref("ErrorInfo")}),
    "session/chatAdded": closed({"summary": ref("ChatSummary")}),
    "session/chatRemoved": closed({"chat": STRING}),
    "session/chatUpdated": closed({"chat": STRING, "changes": OBJECT}),
    "session/defaultChatChanged": closed({}, {"defaultChat": STRING}),
    "session/titleChanged": closed({"title": STRING}),
    "session/isReadChanged": closed({"isRead": BOOLEAN}),
    "session/isArchivedChanged": closed({"isArchived": BOOLEAN}),
    "session/serverToolsChanged": closed({"tools": array(shaped({"name": STRING}))}),
    "session/activeClientSet": closed({"activeClient": shaped({"clientId": STRING})}),
    "session/activeClientRemoved": closed({"clientId": STRING}),
    "session/workingDirectorySet": closed({"directory": STRING}),
    "session/workingDirectoryRemoved": closed({"directory": STRING}),
    "session/inputNeededSet": closed({"request": shaped({"id": STRING, "kind": STRING})}),
    "session/inputNeededRemoved": closed({"id": STRING}),
    "session/configChanged": closed({"config": OBJECT}, {"replace": BOOLEAN}),
    "session/metaChanged": closed({}, {"_meta": META}),
    "session/customizationToggled": closed({"id": STRING, "enablement": array(OBJECT)}),
    # chat
    "chat/turnStarted": closed({"turnId": STRING, "startedAt": STRING, "message": ref("Message")},
                               {"queuedMessageId": STRING, "_meta": META}),
    "chat/delta": closed({"turnId": STRING, "partId": STRING, "content": STRING}, {"_meta": META}),
    "chat/responsePart": closed({"turnId": STRING, "part": ref("ResponsePart")}, {"_meta": META}),
    "chat/turnComplete": closed({"turnId": STRING, "duration": NUMBER}, {"_meta": META}),
    "chat/turnCancelled": closed({"turnId": STRING}, {"duration": NUMBER, "_meta": META}),
    "chat/error": closed({"turnId": STRING, "error": ref("ErrorInfo")}, {"duration": NUMBER, "_meta": META}),
    "chat/usage": closed({"turnId": STRING, "usage": OBJECT}, {"_meta": META}),
    "chat/reasoning": closed({"turnId": STRING, "partId": STRING, "content": STRING}, {"_meta": META}),
    "chat/toolCallStart": closed({**TOOL_CALL, "toolName": STRING, "displayName": STRING},
                                 {**TOOL_CALL_META, "intention": STRING, "contributor": ref("ToolCallContributor")}),
    "chat/toolCallDelta": closed({**TOOL_CALL, "content": STRING},
                                 {**TOOL_CALL_META, "invocationMessage": STRING_OR_MARKDOWN}),
    "chat/toolCallReady": closed({**TOOL_CALL, "invocationMessage": STRING_OR_MARKDOWN},
                                 {**TOOL_CALL_META, "contributor": ref("ToolCallContributor"), "intention": STRING,
                                  "toolInput": STRING, "confirmationTitle": STRING_OR_MARKDOWN,
                                  "riskAssessment": OBJECT, "edits": OBJECT, "editable": BOOLEAN,
                                  "confirmed": STRING, "options": array(OBJECT)}),
    "chat/toolCallConfirmed": closed({**TOOL_CALL, "approved": BOOLEAN},
                                     {**TOOL_CALL_META, "confirmed": STRING, "editedToolInput": STRING,
                                      "selectedOptionId": STRING, "reason": STRING,
                                      "userSuggestion": ref("Message"), "reasonMessage": STRING_OR_MARKDOWN}),
    "chat/toolCallComplete": closed({**TOOL_CALL, "result": ref("ToolCallResult")},
                                    {**TOOL_CALL_META, "requiresResultConfirmation": BOOLEAN}),
    "chat/toolCallContentChanged": closed({**TOOL_CALL, "content": array(OBJECT)}, TOOL_CALL_META),
    "chat/pendingMessageSet": closed({"kind": {"enum": ["steering", "queued"]}, "id": STRING,
                                      "message": ref("Message")}),
    "chat/pendingMessageRemoved": closed({"kind": {"enum": ["steering", "queued"]}, "id": STRING}),
    "chat/queuedMessagesReordered": closed({"order": array(STRING)}),
    "chat/truncated": closed({}, {"turnId": STRING}),
    "chat/draftChanged": closed({}, {"draft": OBJECT}),
    "chat/workingDirectorySet": closed({"directory": STRING}),
    "chat/workingDirectoryRemoved": closed({"directory": STRING}),
    # terminal
    "terminal/data": closed({"data": STRING}),
    "terminal/input": closed({"data": STRING}),
    "terminal/resized": closed({"cols": INTEGER, "rows": INTEGER}),
    "terminal/claimed": closed({"claim": OBJECT}),
    "terminal/titleChanged": closed({"title": STRING}),
    "terminal/cleared": closed({}),
    "terminal/exited": closed({}, {"exitCode": INTEGER}),
    # annotations (a session's `/annotations` channel)
    "annotations/set": closed({"annotation": ref("Annotation")}),
    "annotations/updated": closed({"annotationId": STRING},
                                  {"turnId": STRING, "resource": STRING, "range": OBJECT, "resolved": BOOLEAN}),
    "annotations/removed": closed({"annotationId": STRING}),
    "annotations/entrySet": closed({"annotationId": STRING, "entry": ref("AnnotationEntry")}),
    "annotations/entryRemoved": closed({"annotationId": STRING, "entryId": STRING}),
    # resource watch
    "resourceWatch/changed": closed({"changes": items_of(ref("ResourceChange"))}),
}


def state_action():
    """StateAction: a known `type`, and that type's fields and no others."""
    cases = []
    for kind, schema in ACTIONS.items():
        fields = {"type": {"const": kind}, **schema["properties"]}
        cases.append({"if": {"properties": {"type": {"const": kind}}, "required": ["type"]},
                      "then": {**schema, "properties": fields}})
    return {"type": "object", "required": ["type"], "properties": {"type": {"enum": list(ACTIONS)}},
            "allOf": cases}


NOTIFICATIONS = {  # server -> client notifications by method: their params
    "action": ref("ActionEnvelope"),
    "root/sessionAdded": closed({"channel": STRING, "summary": ref("SessionSummary")}),
    "root/sessionRemoved": closed({"channel": STRING, "session": STRING}),
    "root/sessionSummaryChanged": closed({"channel": STRING, "session": STRING, "changes": OBJECT}),
    "chat/moved": closed({"channel": STRING, "previousSession": STRING, "previousChat": STRING, "session": STRING,
                          "chat": STRING, "movedChats": array(closed({"previousChat": STRING, "chat": STRING}))}),
}

RESULTS = {  # method -> its result
    "initialize": shaped({"protocolVersion": STRING, "serverSeq": INTEGER, "snapshots": array(ref("Snapshot"))},
                         {"serverInfo": shaped({"name": STRING}, {"version": STRING})}),
    "ping": {"type": "null"},
    "subscribe": closed({}, {"snapshot": ref("Snapshot")}),
    "reconnect": {"oneOf": [
        closed({"type": {"const": "replay"}, "actions": array(ref("ActionEnvelope")), "missing": array(STRING)}),
        closed({"type": {"const": "snapshot"}, "snapshots": array(ref("Snapshot"))})]},
    "listSessions": closed({"items": array(ref("SessionSummary"))}, {"nextCursor": STRING}),
    "createSession": {"type": "null"},
    "disposeSession": {"type": "null"},
    "createChat": {"type": "null"},
    "disposeChat": {"type": "null"},
    # fetchTurns answers {turns, hasMore}: the host pages turns itself (docs/wire.md, Commands).
    "fetchTurns": closed({"turns": array(OBJECT), "hasMore": BOOLEAN}),
    "resourceRead": closed({"data": STRING, "encoding": {"enum": ["utf-8", "base64"]}}, {"contentType": STRING}),
    "resourceWrite": closed({}),
    "resourceList": closed({"entries": array(closed({"name": STRING, "type": {"enum": ["file", "directory"]}}))}),
    "resourceResolve": closed({"uri": STRING, "type": {"enum": ["file", "directory", "symlink"]}},
                              {"size": INTEGER, "mtime": STRING, "ctime": STRING, "contentType": STRING,
                               "etag": STRING}),
    "resourceMkdir": closed({}),
    "resourceDelete": closed({}),
    "resourceRequest": closed({}),
    "createResourceWatch": closed({"channel": STRING}),
    "completions": closed({"items": array(closed(
        {"insertText": STRING, "attachment": shaped({"type": STRING})},
        {"rangeStart": INTEGER, "rangeEnd": INTEGER}))}),
}

REQUESTS = {  # client -> server params by method (the ones a scripted session sends)
    "initialize": shaped({"protocolVersions": array(STRING), "clientId": STRING}),
    "dispatchAction": closed({"channel": STRING, "clientSeq": INTEGER, "action": ref("StateAction")}),
    "subscribe": shaped({"channel": STRING}),
    "unsubscribe": closed({"channel": STRING}),
    "reconnect": shaped({"clientId": STRING, "lastSeenServerSeq": INTEGER, "subscriptions": array(STRING)}),
}


def frame_schema():
    server_response = {"oneOf": [
        closed({"jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "integer", "null"]}, "result": ANY}),
        closed({"jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "integer", "null"]},
                "error": shaped({"code": INTEGER, "message": STRING}, {"data": ANY})})]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "AHP 1.1 frames (hand-written from the protocol's types; see make_schema.py)",
        "$defs": {**DEFS, "StateAction": state_action(),
                  "serverResponse": server_response,
                  "serverNotification": {"type": "object", "required": ["jsonrpc", "method", "params"],
                                         "properties": {"jsonrpc": {"const": "2.0"},
                                                        "method": {"enum": list(NOTIFICATIONS)}, "params": OBJECT},
                                         "additionalProperties": False,
                                         "allOf": [{"if": {"properties": {"method": {"const": m}}},
                                                    "then": {"properties": {"params": p}}}
                                                   for m, p in NOTIFICATIONS.items()]},
                  "clientMessage": {"type": "object", "required": ["jsonrpc", "method"],
                                    "properties": {"jsonrpc": {"const": "2.0"}, "method": STRING,
                                                   "id": {"type": ["string", "integer"]}, "params": OBJECT},
                                    "additionalProperties": False,
                                    "allOf": [{"if": {"properties": {"method": {"const": m}}},
                                               "then": {"properties": {"params": p}}}
                                              for m, p in REQUESTS.items()]},
                  **{f"result:{m}": schema for m, schema in RESULTS.items()}},
    }


if __name__ == "__main__":
    target = Path(__file__).with_name("ahp-1.1.schema.json")
    target.write_text(json.dumps(frame_schema(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {target}")
