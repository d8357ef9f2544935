"""The process that runs one worker's code on a Dask worker machine.

A `DaskAgent` actor starts it with `python -m forkagent_jupyter.runtime.executors.dask_child FD`
and talks to it over the socket FD, with the same frames and requests as a local worker
process (`child.serve_worker`): run, call, pull, and outputs as they happen. It starts empty;
the names its code needs arrive with `bind_names` before the code that uses them runs.

It is a fresh interpreter (not a fork of the Dask worker, whose threads and sockets it must not
share): matplotlib draws with Agg, and when IPython is installed a shell without a kernel is
made, so `display()`, rich final values and figures reach the card as in a local worker.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import sys
from typing import Any

__all__ = ["bind_names", "main"]


def bind_names(namespace: dict[str, Any], blobs: dict[str, bytes]) -> dict[str, str]:
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


def _namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__main__"}
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
    from . import sandbox
    from .child import _die_with_parent, serve_worker

    _die_with_parent()
    if len(argv) > 2 and int(argv[2]):
        with contextlib.suppress(OSError):
            os.nice(int(argv[2]))
    os.environ["MPLBACKEND"] = os.environ.get("MPLBACKEND") or "agg"
    sandbox.enter(int(argv[1]), -1)  # the Dask worker's /proc (its environment) out of sight
    sock = socket.socket(fileno=int(argv[1]))
    serve_worker(sock, _namespace())


if __name__ == "__main__":
    main(sys.argv)
