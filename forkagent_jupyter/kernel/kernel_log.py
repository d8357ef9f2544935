"""The package's log records go to the kernel's own log, not into a cell.

A record no handler takes is written by Python's last-resort handler to `sys.stderr`, and in a
kernel that is the output of whichever cell ran last: a warning from a background worker, or
the traceback of a snapshot process that failed, landed in an unrelated cell. The kernel's own
log (`kernel.log`) writes to the process's stderr, which is the Jupyter server's log.
Handlers the person adds (to this package's logger or to the root) still get every record.
"""

from __future__ import annotations

import logging

__all__ = ["ToKernelLog", "route_logs", "unroute_logs"]

PACKAGE = "forkagent_jupyter"


class ToKernelLog(logging.Handler):
    """Hands each record to the kernel's log."""

    def __init__(self, kernel_log: logging.Logger) -> None:
        super().__init__()
        self.kernel_log = kernel_log

    def emit(self, record: logging.LogRecord) -> None:
        self.kernel_log.handle(record)


def route_logs(kernel: object) -> None:
    """Give the package's logger a handler that writes to `kernel.log` (once; nothing when
    the kernel has no log, as outside ipykernel)."""
    kernel_log = getattr(kernel, "log", None)
    if not isinstance(kernel_log, logging.Logger):
        return
    package = logging.getLogger(PACKAGE)
    unroute_logs()
    package.addHandler(ToKernelLog(kernel_log))


def unroute_logs() -> None:
    package = logging.getLogger(PACKAGE)
    for handler in [h for h in package.handlers if isinstance(h, ToKernelLog)]:
        package.removeHandler(handler)
