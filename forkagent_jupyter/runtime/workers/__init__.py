"""Running agents in the background: the workers of a session (`workers`), how a run is made
(`new_runs`), one agent's live state (`agent_run`), configs derived from the parent's
(`configs`), fork groups and the sibling hold (`fork_groups`), progress (`task_progress`),
worktrees (`worktree`, `run_worktree`), teams of teammates and their mailboxes (`teams`) and
the model's agent tools: Agent, SendMessage, TaskStop, TaskOutput (`agent_tools`).

May import: loop, mcp, config, tools, transcripts, tasks, model, executors and the leaves.
Imported by: batch, session.
"""
