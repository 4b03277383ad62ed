"""What no tool is handed: inputs too large, too deep, or holding text no database stores."""
import json
import re
from typing import Any

from jsonschema import Draft202012Validator

from kernel.lru_cache import LruCache

MAX_INPUT_BYTES = 256 * 1024  # a tool input, serialized as JSON
NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # \u0000 not itself behind an escaped backslash


_VALIDATORS = LruCache(512)  # a schema as canonical JSON -> its compiled validator


def input_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """The compiled validator of `schema`, kept by its content (bounded): many tools, clients and
    announcements share a few schemas, and a schema's validator says nothing but the schema."""
    key = json.dumps(schema, sort_keys=True)
    return _VALIDATORS.get_or_make(key, lambda: Draft202012Validator(schema))


class ToolRefusal(Exception):
    """A call the snapshot will not run; `str()` is the sentence the model sees."""

    def __init__(self, sentence: str, *, terminalise: bool = False) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        # True when the host must complete the call itself, naming no client as responsible.
        self.terminalise = terminalise


def input_problem(name: str, arguments: Any) -> str | None:
    """Why an input no tool should be handed is refused, or None: over MAX_INPUT_BYTES as JSON,
    nested past what can be walked, or holding text no database stores (NUL, lone surrogates)."""
    try:
        serialized = json.dumps(arguments)  # ASCII: lone surrogates and NUL show as escapes
    except (RecursionError, ValueError, TypeError):
        return f"Invalid input for {name}: it is not plain JSON or nests too deep."
    if len(serialized) > MAX_INPUT_BYTES:
        return f"Input for {name} refused: over {MAX_INPUT_BYTES} bytes as JSON."
    lone_surrogate = "\\ud" in serialized and not _encodable(json.dumps(arguments, ensure_ascii=False))
    if lone_surrogate or NUL_ESCAPE.search(serialized):
        return f"Invalid input for {name}: strings may not hold NUL characters or lone surrogates."
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True
