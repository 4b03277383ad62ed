"""A refusal is a sentence; its kind picks how each door answers it."""
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Answer:
    rpc_code: int  # AHP's JSON-RPC error code
    http_status: int


# AHP's JSON-RPC codes (the protocol's errors table) and the HTTP status of the same meaning.
RefusalKind = Literal["permission", "not_found", "conflict", "exists", "invalid", "no_agent", "turn_in_progress"]

KINDS: dict[RefusalKind, Answer] = {
    "permission": Answer(-32009, 403),
    "not_found": Answer(-32008, 404),
    "conflict": Answer(-32011, 409),
    "exists": Answer(-32010, 409),
    "invalid": Answer(-32602, 400),
    "no_agent": Answer(-32002, 400),
    "turn_in_progress": Answer(-32004, 409),
}


class Refused(Exception):
    """A refusal with the sentence the caller sees; `kind` (a KINDS key) picks the wire answer."""

    def __init__(self, sentence: str, kind: RefusalKind = "permission") -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.kind = kind

    @property
    def answer(self) -> Answer:
        return KINDS[self.kind]
