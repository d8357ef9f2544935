"""The process that runs one worker's code on a Dask worker machine.

A `DaskAgent` actor starts it with
`python -m forkagent_jupyter.runtime.executors.cluster.child FD` and talks to it over the
socket FD, with the same frames and requests as a local worker process (`serve_worker` of
`process/child.py`): run, call, pull, and outputs as they happen. It starts empty; the names
its code needs arrive with `bind_names` before the code that uses them runs.

It is a fresh interpreter (not a fork of the Dask worker, whose threads and sockets it must not
share): matplotlib draws with Agg, and when IPython is installed a shell without a kernel is
made, so `display()`, rich final values and figures reach the card as in a local worker.

It runs in user, PID, mount and network namespaces of its own (`sandbox.enter`): the Dask
worker's processes are not in its /proc, and its network holds only a loopback of its own, so
the model's code cannot connect to the cluster's scheduler or workers (a Dask client there
runs any function in the scheduler - in the kernel, when the kernel made the cluster - and in
every worker, whose environment holds what the kernel's did). It talks to its actor over the
socket it inherited. Where the namespaces cannot be made, it runs nothing: every request is
answered with one line saying why (`refuse`).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import sys
from typing import NoReturn

__all__ = ["bind_names", "main", "refusal", "refuse"]


def bind_names(namespace: dict[str, object], blobs: dict[str, bytes]) -> dict[str, str]:
    """Bind shipped values (pickles) to names the worker has not bound itself; returns the
    names that could not be unpickled here, with why."""
    errors: dict[str, str] = {}
    for name, blob in blobs.items():
        if name in namespace:
            continue  # the worker's own value wins over the kernel's
        try:
            namespace[name] = pickle.loads(blob)
        except Exception as exc:
            errors[name] = f"could not be unpickled on the cluster ({type(exc).__name__}: {exc})"
    return errors


def _namespace() -> dict[str, object]:
    namespace: dict[str, object] = {"__name__": "__main__"}
    try:
        from IPython.core.interactiveshell import InteractiveShell
        from IPython.display import display
    except ImportError:
        return namespace
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    namespace.update(display=display, get_ipython=lambda: shell)
    return namespace


def main(argv: list[str]) -> None:
    from ..confinement import sandbox
    from ..process.child import _die_with_parent, serve_worker

    _die_with_parent()
    if len(argv) > 2 and int(argv[2]):
        with contextlib.suppress(OSError):
            os.nice(int(argv[2]))
    os.environ["MPLBACKEND"] = os.environ.get("MPLBACKEND") or "agg"
    # the Dask worker's /proc (its environment) out of sight, the cluster out of reach
    sandbox.enter(int(argv[1]), -1, network=False)
    sock = socket.socket(fileno=int(argv[1]))
    if sandbox.STATE.error is not None:
        refuse(sock, sandbox.STATE.error)
    serve_worker(sock, _namespace())


def refusal(why: str) -> str:
    """The one line every request gets where the child could not be cut off (`why`)."""
    return (
        "Refused: the model's code does not run on this Dask cluster, because its process "
        f"could not be cut off from the cluster's network here ({why}); there it could "
        "reach the scheduler and the other workers, which run code for anyone who connects "
        "(the kernel's own, when the kernel made the cluster). Use local workers "
        "(%config ForkAgent.executor = 'local'), or allow unprivileged user namespaces on "
        "the cluster's machines."
    )


def refuse(sock: socket.socket, why: str) -> NoReturn:
    """Answer every request with `refusal(why)`, running nothing; never returns."""
    from ..base import ExecResult
    from ..wire import FrameSocket

    line = refusal(why)
    conn = FrameSocket(sock)
    try:
        while True:
            request = conn.recv()
            call_id = request[1] if len(request) > 1 else None
            if request[0] == "run":
                conn.send(("done", call_id, ExecResult(error=line), ([], 0)))
            elif request[0] == "call":
                conn.send(("called", call_id, ("error", line)))
            elif request[0] == "pull":
                conn.send(("pulled", call_id, {}, dict.fromkeys(request[2], line)))
            else:
                break
    except (EOFError, OSError):
        pass
    finally:
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
