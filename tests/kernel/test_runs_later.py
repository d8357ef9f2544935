"""In a real kernel: which `.py` would be imported in place of a module is decided from the
kernel's own `sys.modules`, read at each call (a module the person imports in a cell makes a
file of its name asked from then on), and the gate's look at the file system never blocks the
kernel's loop (the fixture's loop guard)."""

from __future__ import annotations

import pytest

from .conftest import Kernel

pytestmark = pytest.mark.kernel

CHECK = """
from pathlib import Path
from forkagent_jupyter.runtime.permissions.gate import PermissionGate
from forkagent_jupyter.runtime.tools.base import ToolContext
from forkagent_jupyter.runtime.tools.files import WriteTool

_gate, _write = PermissionGate(mode="acceptEdits"), WriteTool()

async def decided(name):
    raw = {"file_path": name, "content": "x = 1\\n"}
    ctx = ToolContext(workdir=Path.cwd())
    decision = await _gate.check(_write, _write.parse(raw), ctx, raw)
    return getattr(decision, "message", "allow")
"""


def test_a_module_imported_in_the_kernel_makes_its_name_asked(kernel: Kernel) -> None:
    assert kernel.execute(CHECK).status == "ok"
    assert kernel.value("'colorsys' in __import__('sys').modules") is False
    before = kernel.execute("print(await decided('colorsys.py'))")
    assert before.status == "ok" and before.texts().strip() == "allow", before.texts()
    assert kernel.execute("import colorsys").status == "ok"
    after = kernel.execute("print(await decided('colorsys.py'))")
    said = after.texts().strip()
    assert "colorsys.py runs later without being asked" in said, said
    assert "instead of the module colorsys" in said and "no one can answer" in said
    other = kernel.execute("print(await decided('palette.py'))")
    assert other.texts().strip() == "allow", other.texts()
