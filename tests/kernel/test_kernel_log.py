"""The package's log records go to the kernel's own log (the Jupyter server's), never into
whichever cell ran last."""

from __future__ import annotations

import time

import pytest

from .conftest import Kernel

pytestmark = pytest.mark.kernel

KEEP = """
import logging
class _Kept(logging.Handler):
    def __init__(self):
        super().__init__()
        self.seen = []
    def emit(self, record):
        if record.name.startswith("forkagent_jupyter"):
            self.seen.append(record.getMessage())
_kept = _Kept()
get_ipython().kernel.log.addHandler(_kept)
"""

LATER = """
import asyncio, logging
async def _later():
    await asyncio.sleep(0.3)
    logging.getLogger("forkagent_jupyter.runtime.executors.process").error("SNAPSHOT-BROKE")
_task = asyncio.get_running_loop().create_task(_later())
"""


def test_a_record_logged_in_the_background_reaches_the_kernels_log_not_a_cell(
    kernel: Kernel,
) -> None:
    assert kernel.execute(KEEP).status == "ok"
    started = kernel.execute(LATER)
    assert started.status == "ok"
    time.sleep(1)
    kernel.drain()
    streams = [m["content"]["text"] for m in kernel.iopub if m["msg_type"] == "stream"]
    assert not [text for text in streams if "SNAPSHOT-BROKE" in text]
    assert kernel.value("_kept.seen") == ["SNAPSHOT-BROKE"]


def test_unloading_the_extension_takes_its_handler_back(kernel: Kernel) -> None:
    import_ = "import logging; _h = logging.getLogger('forkagent_jupyter').handlers"
    assert kernel.execute(import_).status == "ok"
    assert kernel.value("[type(h).__name__ for h in _h]") == ["ToKernelLog"]
    assert kernel.execute("%reload_ext forkagent_jupyter").status == "ok"
    assert kernel.value("[type(h).__name__ for h in _h]") == ["ToKernelLog"]
    assert kernel.execute("%unload_ext forkagent_jupyter").status == "ok"
    assert kernel.value("_h") == []
