"""MCP servers: their lifecycle and approval (`servers`), the client of one server (`client`),
and the tool that calls one (`tool`).

May import: permissions, config, tools, tasks, executors, messages_api (its shapes) and the
leaves. Imported by: workers, session.
"""
