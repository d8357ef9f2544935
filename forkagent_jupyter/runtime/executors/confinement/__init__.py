"""What confines the code the model writes and the programs the kernel starts for it:
namespaces, a /proc of its own and the kernel's files covered (`sandbox` for a worker
process, `confine` for Bash, hooks and stdio MCP servers, a standard-library script), the
kernel's servers closed to them (`listeners`, with Landlock), and the runtime's own git run
the same way (`own_git`).

May import: the leaves only (secrets); nothing else of `executors/` (`confine` imports the
standard library alone: it starts before the package could be imported)."""
