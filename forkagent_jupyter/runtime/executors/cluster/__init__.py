"""Workers on a Dask cluster: the kernel's side (`backend`: the connection to a cluster and
one runner per agent), what of the kernel's namespace a worker gets and how it travels
(`shipping`), the actor that owns an agent's process on a Dask worker (`actor`), and that
process (`child`, started with `python -m`; a process entry point, so it may make an IPython
shell of its own).

May import: `process/` (a Dask child serves calls as a local worker does), `confinement/`,
the shared modules of `executors/` (base, pulled, wire) and the leaves; never `plane`."""
