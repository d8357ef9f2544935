"""Claude Code's files, read as Claude Code reads them: settings files (`settings`), hooks and
their approval (`hooks`, `hook_approval`), agent files and named agents' definitions
(`agent_files`, `agent_definitions`), an agent's skills and memory (`skills_and_memory`),
slash commands and skills typed as `/name` (`commands`, and their text: `command_text`), MCP
server configuration (`mcp_config`), workspace trust and what a folder asks for (`trust`,
`trust_asks`), and reading a file anyone may have put there without hanging (`files`).

May import: model, executors, messages_api (its shapes) and the leaves. Imported by: permissions
and everything above.
"""
