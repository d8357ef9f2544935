"""Who may do what: the gate every tool call passes (`gate`) and the limit a command's
`allowed-tools` puts on it (`limits`), the modes (`modes`), the answers and policies
(`policies`), the rule language (`rules`, `matching`, `rulebook`) and what a shell command
really runs (`shell_syntax`, `shell_programs`).

May import: config, tools and the leaves. Imported by: loop, mcp, workers, session.
"""
