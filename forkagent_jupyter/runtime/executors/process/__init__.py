"""Worker processes forked from the kernel: the kernel's side (`process`: the snapshot, one
runner per agent), the worker's side (`child`: the snapshot process and the worker it forks,
serving one agent's calls), what a fork inherits from a kernel that has computed
(`forksafety`), and a worker's process tree (`tree`).

May import: `confinement/`, the shared modules of `executors/` (base, display, memory,
progress, pulled, source, wire) and the leaves; never `cluster/` or `plane`."""
