"""What a harness agent is told besides the person's message: which session it serves, the
instructions of the tools its chat's snapshot holds, the rules the session's clients published
(both the snapshot's `instructions`), then its agent definition's own instructions."""


def session_instructions(session, snapshot, definition=None) -> str:
    return "\n\n".join([f"You are the agent of AHP session {session.uri}, run by an AHP host.",
                        *snapshot.instructions,
                        *([definition.instructions] if definition is not None and definition.instructions else [])])
