"""Who may do what: the gate every tool call passes (`gate`) and the limit a command's
`allowed-tools` puts on it (`limits`), the modes (`modes`), the answers and policies
(`policies`), the rule language (`rules`, `matching`, `rulebook`), what a shell command really
runs and writes (`shell_syntax`, `shell_programs`, `shell_git`, `shell_writes`) and the files
that run later without anyone choosing to run them, whose writing is always asked
(`runs_later`).

May import: config, tools, messages_api (its shapes) and the leaves. Imported by: loop, mcp,
workers, session.
"""
