"""Session artifacts and references, as kept in `_meta['agentHost/sessionArtifacts']`. Pure:
the writer in actions.py locks the session and publishes."""
import uuid
from urllib.parse import urlparse

META_KEY = "agentHost/sessionArtifacts"
TYPES = ("pullRequest", "issue", "commit", "website", "file", "resource")
LINK_TYPES = ("pullRequest", "issue", "commit", "website")
URI_TYPES = ("file", "resource")
CLASSIFICATION = ("An issue or pull request you create or attempt to fix, change, or unblock is an artifact; "
                  "inspection or review alone makes it a reference.")
INSTRUCTION = ("Record notable artifacts and references with `add_artifact_or_reference` so they are surfaced next "
               "to the chat input. Registration is optional; default to no registration. " + CLASSIFICATION)


class InvalidArtifact(ValueError):
    pass


def read(meta):
    """The recorded entries; anything malformed in the bag is skipped, never fatal."""
    value = (meta or {}).get(META_KEY)
    if not isinstance(value, list):
        return []
    return [e for e in value if isinstance(e, dict) and isinstance(e.get("id"), str) and e.get("type") in TYPES]


def with_artifacts(meta, artifacts):
    meta = dict(meta or {})
    if artifacts:
        meta[META_KEY] = artifacts
    else:
        meta.pop(META_KEY, None)
    return meta


def value_of(entry):
    """What identifies an entry for de-duplication: its link, URI or commit hash."""
    return (entry.get("link") or entry.get("uri") or entry.get("commitHash") or "").strip().lower()


def _text(item, field):
    value = item.get(field)
    if not isinstance(value, str) or not value.strip():
        raise InvalidArtifact(f"Invalid add_artifact_or_reference input: {field} must be a non-empty string.")
    return value.strip()


def parse_item(item):
    if not isinstance(item, dict):
        raise InvalidArtifact("Invalid add_artifact_or_reference input: each item must be an object.")
    kind = item.get("type")
    if kind not in TYPES:
        raise InvalidArtifact(f"Invalid add_artifact_or_reference input: type must be one of {', '.join(TYPES)}.")
    if not isinstance(item.get("isArtifact"), bool):
        raise InvalidArtifact("Invalid add_artifact_or_reference input: isArtifact must be a boolean — true for an "
                              "artifact, false for a reference.")
    entry = {"type": kind, "label": _text(item, "label"), "isArtifact": item["isArtifact"]}
    if kind in LINK_TYPES:
        link = _text(item, "link")
        if urlparse(link).scheme not in ("http", "https"):
            raise InvalidArtifact("Invalid add_artifact_or_reference input: link must be an absolute http(s) URL.")
        entry["link"] = link
        if kind in ("pullRequest", "issue"):
            host = urlparse(link).hostname or ""
            entry["isGitHub"] = host in ("github.com", "www.github.com") or host.endswith(".github.com")
    if kind in URI_TYPES:
        uri = _text(item, "uri")
        scheme = urlparse(uri).scheme
        if len(scheme) < 2:
            raise InvalidArtifact("Invalid add_artifact_or_reference input: uri must be an absolute URI including its "
                                  "scheme, such as 'file:///path/to/file' — not a plain file system path.")
        if scheme == "agent-host-session":
            raise InvalidArtifact("Invalid add_artifact_or_reference input: sessions and chats created with "
                                  "session-management tools must not be recorded as artifacts or references.")
        entry["uri"] = uri
    if kind == "commit":
        entry["commitHash"] = _text(item, "commitHash")
    return entry


def add(artifacts, entry):
    """(next list, status, the entry kept). Adding an artifact that matches a reference promotes
    the reference and keeps its id; a duplicate never turns an artifact back into a reference."""
    value = value_of(entry)
    for index, existing in enumerate(artifacts):
        if value_of(existing) != value:
            continue
        if entry["isArtifact"] and not existing.get("isArtifact"):
            promoted = {**existing, **{k: v for k, v in entry.items()}, "id": existing["id"], "isArtifact": True}
            return [*artifacts[:index], promoted, *artifacts[index + 1:]], "Promoted artifact", promoted
        return artifacts, "Already recorded", existing
    created = {"id": str(uuid.uuid4()), **entry}
    return [*artifacts, created], f"Added {'artifact' if entry['isArtifact'] else 'reference'}", created


def describe(entry):
    value = entry.get("link") or entry.get("uri") or entry.get("commitHash") or ""
    noun = "artifact" if entry.get("isArtifact") else "reference"
    return f"{entry['id']} ({entry['type']}, {noun}) {entry.get('label', '')}" + (f" — {value}" if value else "")
