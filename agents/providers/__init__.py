"""Who answers a turn: one module per provider. Each offers its AgentInfo and a `run_turn`
coroutine that receives the message text and a toolbox (the chat's catalog, bound by the caller),
and a `cancel(session_id)` coroutine that interrupts the session's running turn (chat/turnCancelled)."""
