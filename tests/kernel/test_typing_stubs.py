"""The stubs in typings/ (what mypy reads for the untyped parts of IPython and ipywidgets)
name only what the installed libraries have, and mypy is pointed at them: a stub that drifts
from its library would type-check calls that fail at run time."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TYPINGS = ROOT / "typings"
STUBS = sorted(TYPINGS.rglob("*.pyi"))


def _module_name(stub: Path) -> str:
    parts = stub.relative_to(TYPINGS).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _has(owner: object, name: str) -> bool:
    """Whether `owner` has `name`: as an attribute, or (a class) as an instance attribute its
    source assigns (`self.name = ...`)."""
    if hasattr(owner, name):
        return True
    return inspect.isclass(owner) and f"self.{name} =" in inspect.getsource(owner)


def _missing(stub: Path) -> list[str]:
    module = importlib.import_module(_module_name(stub))
    missing = []
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            source = importlib.import_module(node.module)
            missing += [f"{node.module}.{a.name}" for a in node.names if not _has(source, a.name)]
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            if node.name.startswith("_") and not hasattr(module, node.name):
                continue  # a private base the stub names for its subclasses
            if not _has(module, node.name):
                missing.append(f"{module.__name__}.{node.name}")
            elif isinstance(node, ast.ClassDef):
                cls = getattr(module, node.name)
                for item in node.body:
                    name = (
                        item.name
                        if isinstance(item, ast.FunctionDef)
                        else item.target.id
                        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                        else None
                    )
                    if name is not None and not _has(cls, name):
                        missing.append(f"{module.__name__}.{node.name}.{name}")
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and not _has(module, node.target.id)
        ):
            missing.append(f"{module.__name__}.{node.target.id}")
    return missing


def test_there_are_stubs_and_mypy_reads_them() -> None:
    assert {_module_name(s) for s in STUBS} >= {
        "IPython.display",
        "IPython.core.magic_arguments",
        "ipywidgets",
    }
    config = (ROOT / "pyproject.toml").read_text()
    assert '\nmypy_path = "$MYPY_CONFIG_FILE_DIR/typings"\n' in config


@pytest.mark.parametrize("stub", STUBS, ids=lambda s: str(s.relative_to(TYPINGS)))
def test_every_stubbed_name_is_in_the_library(stub: Path) -> None:
    assert _missing(stub) == []
