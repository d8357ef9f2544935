"""The magics, thin: parse a line, call the runtime through the kernel's agent, show the
result. `agent_magics` declares them; `turn_actions` (%%agent, %compact), `worker_actions`
(%fork, %send, %stop, %bg) and `view_actions` (%tasks, %notifications, %permissions, %mcp,
%hooks, %trust) hold what each does.

May import: core, views, interpolation, said and the runtime's facade.
"""
