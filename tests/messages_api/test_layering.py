"""The package's floors: who may import whom.

`messages_api` (the Messages API as data) imports no other part of the package; `runtime` and
`emulator` build on it and never import each other; `runtime` knows nothing of Jupyter.
Checked on the source, imports inside functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import forkagent_jupyter

PACKAGE = Path(forkagent_jupyter.__file__).parent

FORBIDDEN: dict[str, set[str]] = {
    "messages_api": {"runtime", "emulator", "kernel", "cli"},
    "runtime": {"emulator", "kernel", "cli"},
    "emulator": {"runtime", "kernel", "cli"},
}
JUPYTER = {"IPython", "ipykernel", "ipywidgets", "jupyter_client", "comm", "traitlets"}
SHELL_HOSTS = {"runtime/executors/dask_child.py"}
"""A worker process on a Dask machine runs the user's code in an IPython shell of its own
(displays and figures as in the kernel); it is a process entry point, not the kernel."""


def _imports(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, absolute dotted module) of every import in `path`."""
    rel = path.relative_to(root.parent).with_suffix("")
    package = list(rel.parts[:-1])
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
                names = [f"{module}.{a.name}" for a in node.names] if not node.module else []
                found += [(node.lineno, m) for m in [module, *names]]
            else:
                found.append((node.lineno, node.module or ""))
    return found


def _floor(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "forkagent_jupyter" else None


def _violations(floor: str, root: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted((root / floor).rglob("*.py")):
        for line, module in _imports(path, root):
            where = f"{path.relative_to(root)}:{line}"
            if _floor(module) in FORBIDDEN[floor]:
                bad.append(f"{where} imports {module}")
            shell_host = str(path.relative_to(root)) in SHELL_HOSTS
            if module.split(".")[0] in JUPYTER and not shell_host:
                bad.append(f"{where} imports {module} (Jupyter)")
    return bad


@pytest.mark.parametrize("floor", sorted(FORBIDDEN))
def test_no_import_crosses_a_floor(floor: str) -> None:
    assert _violations(floor) == []


def test_the_checker_sees_relative_and_nested_imports(tmp_path: Path) -> None:
    """The rule catches the circle this layering replaced: runtime -> emulator, in a function."""
    root = tmp_path / "forkagent_jupyter"
    (root / "runtime" / "tools").mkdir(parents=True)
    (root / "runtime" / "tools" / "probe.py").write_text(
        "import json\nfrom .. import loop\n\n\ndef f():\n    from ...emulator.cache import X\n"
    )
    (root / "runtime" / "ok.py").write_text("from ..messages_api import usage\n")
    assert _violations("runtime", root) == [
        "runtime/tools/probe.py:6 imports forkagent_jupyter.emulator.cache"
    ]
