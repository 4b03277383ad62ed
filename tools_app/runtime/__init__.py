"""Running a turn: the session's provider answers it, calling tools through the chat's catalog.

Every call, refused or not, shows in the chat as tool call actions. A host tool runs here; a
client's tool is handed to that client and the agent waits for its result, which may arrive on
any worker process: the row is the truth, the channel layer only wakes the waiter early.

`context` is what a host tool's executor is handed, `toolbox` what a provider calls in one turn,
`waker` how a waiting agent learns its client call's result, `turns` a turn's run from its start
to the chat's next queued message. The turn's one-statement read is in `tools_app.queries`.
"""
