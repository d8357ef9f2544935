"""Who may do what: the gate every tool call passes (`gate`), the modes (`modes`), the answers
and policies (`policies`), the rule language (`rules`, `matching`, `rulebook`) and what a
shell command really runs and writes (`shell_syntax`, `shell_programs`, `shell_git`,
`shell_writes`).

May import: config, tools and the leaves. Imported by: loop, mcp, workers, session.
"""
