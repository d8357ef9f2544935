"""A stand-in for the Jupyter server that starts a kernel: `python jupyter_server.py
--ServerApp.token=TOKEN -- KERNEL ARGS...`. The token is on its command line (as
`jupyter lab --ServerApp.token=...` puts it) and in its environment (`JUPYTER_TOKEN`, as
docker-stacks sets it), which the kernel, its child, inherits. It passes interrupts on to the
kernel and ends with it; the kernel ends with it."""

import ctypes
import signal
import subprocess
import sys

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


kernel = subprocess.Popen(sys.argv[sys.argv.index("--") + 1 :], preexec_fn=_die_with_parent)
for number in (signal.SIGINT, signal.SIGTERM):
    signal.signal(number, lambda n, _frame: kernel.send_signal(n))
sys.exit(kernel.wait())
