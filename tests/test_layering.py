"""The package's floors: who may import whom.

`messages_api` (the Messages API as data) imports no other part of the package; `runtime` and
`emulator` build on it and never import each other; `runtime` knows nothing of Jupyter.
Inside `runtime/` and `kernel/` each room (a top-level module or a package) imports only
rooms on lower floors, so no two rooms import each other, however indirectly; the kernel
imports the runtime only through its facade. Checked on the source, imports inside functions
and under `TYPE_CHECKING` included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import forkagent_jupyter
import forkagent_jupyter.runtime as facade

PACKAGE = Path(forkagent_jupyter.__file__).parent

FORBIDDEN: dict[str, set[str]] = {
    "messages_api": {"runtime", "emulator", "kernel", "cli"},
    "runtime": {"emulator", "kernel", "cli"},
    "emulator": {"runtime", "kernel", "cli"},
}
JUPYTER = {"IPython", "ipykernel", "ipywidgets", "jupyter_client", "comm", "traitlets"}
SHELL_HOSTS = {"runtime/executors/cluster/child.py"}
"""A worker process on a Dask machine runs the user's code in an IPython shell of its own
(displays and figures as in the kernel); it is a process entry point, not the kernel."""

FLOORS: dict[str, list[set[str]]] = {
    "runtime": [
        {"errors", "secrets", "events", "history", "output"},
        {"executors"},
        {"tasks"},
        {"model", "transcripts"},
        {"config", "tools"},
        {"permissions"},
        {"loop", "mcp"},
        {"workers"},
        {"batch"},
        {"session"},
    ],
    "kernel": [
        {"said", "parents", "interpolation", "settings", "render", "comm", "headless"},
        {"cards", "views"},
        {"host"},
        {"frontend"},
        {"approvals"},
        {"ui"},
        {"core"},
        {"magics"},
        {"extension"},
        {"api"},
    ],
}
"""Lowest first. A room is a module or a package directly in `runtime/` or `kernel/`."""

MAX_MODULES = 12
"""Top-level modules of `runtime/` or `kernel/` (their `__init__` aside): past this, group."""


def _imports(path: Path, root: Path = PACKAGE) -> list[tuple[int, str, list[str]]]:
    """(line, absolute dotted module, names imported from it) of every import in `path`."""
    rel = path.relative_to(root.parent).with_suffix("")
    package = list(rel.parts[:-1])
    found: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
                found.append((node.lineno, module, names))
                if not node.module:  # `from .. import x`: x may be a module
                    found += [(node.lineno, f"{module}.{name}", []) for name in names]
            else:
                found.append((node.lineno, node.module or "", names))
    return found


def _floor(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "forkagent_jupyter" else None


def _violations(floor: str, root: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted((root / floor).rglob("*.py")):
        for line, module, _ in _imports(path, root):
            where = f"{path.relative_to(root)}:{line}"
            if _floor(module) in FORBIDDEN[floor]:
                bad.append(f"{where} imports {module}")
            shell_host = str(path.relative_to(root)) in SHELL_HOSTS
            if module.split(".")[0] in JUPYTER and not shell_host:
                bad.append(f"{where} imports {module} (Jupyter)")
    return bad


def _room(module: str, part: str) -> str | None:
    """The room of `part` (runtime or kernel) that `module` lies in, if any."""
    parts = module.split(".")
    if parts[:2] != ["forkagent_jupyter", part] or len(parts) < 3:
        return None
    return parts[2]


def _level(part: str) -> dict[str, int]:
    return {room: n for n, rooms in enumerate(FLOORS[part]) for room in rooms}


def _upward(part: str, root: Path = PACKAGE) -> list[str]:
    """Imports from a room of `part` to a room on its own floor or above."""
    level = _level(part)
    bad = []
    for path in sorted((root / part).rglob("*.py")):
        rel = path.relative_to(root / part)
        if rel == Path("__init__.py"):
            continue  # the facade: it names every room
        mine = rel.parts[0].removesuffix(".py")
        for line, module, _ in _imports(path, root):
            theirs = _room(module, part)
            if theirs is None or theirs == mine:
                continue
            if theirs not in level or mine not in level or level[theirs] >= level[mine]:
                bad.append(f"{part}/{rel}:{line} ({mine}) imports {module} ({theirs})")
    return bad


def _past_the_facade(root: Path = PACKAGE) -> list[str]:
    """The kernel's imports of the runtime that name more than the facade offers."""
    bad = []
    for path in sorted((root / "kernel").rglob("*.py")):
        for line, module, names in _imports(path, root):
            if _floor(module) != "runtime":
                continue
            where = f"{path.relative_to(root)}:{line}"
            if module != "forkagent_jupyter.runtime":
                bad.append(f"{where} imports {module}")
            bad += [
                f"{where} imports {n}, not in the facade" for n in names if n not in facade.__all__
            ]
    return bad


@pytest.mark.parametrize("floor", sorted(FORBIDDEN))
def test_no_import_crosses_a_floor(floor: str) -> None:
    assert _violations(floor) == []


@pytest.mark.parametrize("part", sorted(FLOORS))
def test_every_room_imports_only_rooms_below_it(part: str) -> None:
    assert _upward(part) == []


@pytest.mark.parametrize("part", sorted(FLOORS))
def test_every_room_has_a_floor(part: str) -> None:
    rooms = {
        p.name.removesuffix(".py")
        for p in (PACKAGE / part).iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
    }
    assert rooms == set(_level(part))


@pytest.mark.parametrize("part", sorted(FLOORS))
def test_a_part_keeps_few_loose_modules_and_every_package_says_what_it_holds(part: str) -> None:
    modules = [p for p in (PACKAGE / part).glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= MAX_MODULES, sorted(p.name for p in modules)
    for init in sorted((PACKAGE / part).rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.split()) >= 15, f"{init.relative_to(PACKAGE)} does not say what it holds"


def test_the_kernel_imports_the_runtime_only_through_its_facade() -> None:
    assert _past_the_facade() == []


def test_the_facade_names_resolve_and_load_lazily() -> None:
    """Every name of `forkagent_jupyter.runtime.__all__` resolves; the facade's table and its
    `__all__` are the same list."""
    assert sorted(facade.__all__) == sorted(facade._WHERE)
    for name in facade.__all__:
        module, attribute = facade._WHERE[name]
        assert getattr(facade, name) is getattr(
            __import__(f"forkagent_jupyter.runtime.{module}", fromlist=[attribute]), attribute
        )
    with pytest.raises(AttributeError):
        _ = facade.NoSuchName  # type: ignore[attr-defined]


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


def test_the_checker_sees_a_room_that_imports_upward_or_past_the_facade(tmp_path: Path) -> None:
    """A leaf tool that lazily imports workers (the arrow that once tied tools to the top of the
    runtime), a type-only import between two rooms of one floor, and a kernel module that
    reaches into a runtime module are each found."""
    root = tmp_path / "forkagent_jupyter"
    for folder in ("runtime/tools", "runtime/workers", "runtime/loop", "runtime/mcp", "kernel"):
        (root / folder).mkdir(parents=True)
    (root / "runtime" / "tools" / "agents.py").write_text(
        "def f():\n    from ..workers.workers import Workers\n"
    )
    (root / "runtime" / "loop" / "fork.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..mcp import servers\n"
    )
    (root / "runtime" / "workers" / "ok.py").write_text("from ..tools.base import Tool\n")
    (root / "kernel" / "ui.py").write_text(
        "from ..runtime import Session\nfrom ..runtime.tasks.registry import Task\n"
    )
    assert _upward("runtime", root) == [
        "runtime/loop/fork.py:3 (loop) imports forkagent_jupyter.runtime.mcp (mcp)",
        "runtime/tools/agents.py:2 (tools) imports forkagent_jupyter.runtime.workers.workers"
        " (workers)",
    ]
    assert _past_the_facade(root) == [
        "kernel/ui.py:2 imports forkagent_jupyter.runtime.tasks.registry"
    ]
