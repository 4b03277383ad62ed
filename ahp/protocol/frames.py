"""Reading one text frame into a message, refusing what no handler should ever see.

JSON allows things the host cannot keep or pass on: NaN and Infinity (not JSON, but Python
reads them; PostgreSQL's jsonb refuses them), escaped lone surrogates (not Unicode: no database
stores them), NUL characters (PostgreSQL stores none) and nesting deep enough to exhaust the
recursion of whatever walks it next. Each is refused here, once, for every method and action.
"""
import json
import re
from typing import Any, NoReturn

from . import errors

MAX_NESTING = 64
NOT_JSON = "Parse error: the frame is not JSON."
TOO_DEEP = f"Invalid request: the frame nests deeper than {MAX_NESTING} levels."
BAD_TEXT = "Invalid request: strings may not hold NUL characters or lone surrogates."
# Escapes that may decode to NUL or a surrogate; only frames holding one are walked.
SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


class BadFrame(errors.RpcError):
    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(code, message)
        self.request_id = request_id


def _not_a_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _walk(message: Any, check_text: bool) -> None:
    """Raise BadFrame for nesting over MAX_NESTING or (when `check_text`) a string that
    cannot be stored; iterative, so a deep frame cannot exhaust the stack here."""
    stack = [(message, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_NESTING:
                raise BadFrame(errors.INVALID_REQUEST, TOO_DEEP)
            for key, item in value.items():
                if check_text:
                    _check_text(key)
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            if depth > MAX_NESTING:
                raise BadFrame(errors.INVALID_REQUEST, TOO_DEEP)
            stack.extend((item, depth + 1) for item in value)
        elif check_text and isinstance(value, str):
            _check_text(value)


def _check_text(text: str) -> None:
    if "\x00" in text:
        raise BadFrame(errors.INVALID_REQUEST, BAD_TEXT)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadFrame(errors.INVALID_REQUEST, BAD_TEXT) from None


def parse(text: str) -> Any:
    """The JSON value in `text`, or BadFrame (carrying the request id when one was readable)."""
    try:
        message = json.loads(text, parse_constant=_not_a_constant)
    except (ValueError, RecursionError):
        raise BadFrame(errors.PARSE_ERROR, NOT_JSON) from None
    check_text = SUSPECT_ESCAPE.search(text) is not None
    # Cheap first: a frame with fewer brackets than the limit cannot nest past it.
    if check_text or text.count("[") + text.count("{") > MAX_NESTING:
        try:
            _walk(message, check_text)
        except BadFrame as bad:
            request_id = message.get("id") if isinstance(message, dict) else None
            bad.request_id = request_id if isinstance(request_id, (int, str)) else None
            raise
    return message
