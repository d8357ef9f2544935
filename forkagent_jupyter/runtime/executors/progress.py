"""Progress bars in a worker: text on its card.

`tqdm.auto` (and `tqdm.notebook`) draw a bar as a widget, and a worker process cannot make
widgets (it has no connection to the frontend). In a snapshot process `text_progress()`
strips the notebook bar class down to tqdm's text bar, which writes to stderr, so to the
worker's card: at once if tqdm is loaded (the kernel's `from tqdm.auto import tqdm` included),
else when it is first imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence

__all__ = ["text_progress"]

_NOTEBOOK = "tqdm.notebook"


def text_progress() -> None:
    module = sys.modules.get(_NOTEBOOK)
    if module is not None:
        _as_text(module)
    elif not any(isinstance(f, _TextBars) for f in sys.meta_path):
        sys.meta_path.insert(0, _TextBars())


def _as_text(module: types.ModuleType) -> None:
    """tqdm_notebook keeps its name and subclasses; its own methods go, leaving tqdm's."""
    notebook = getattr(module, "tqdm_notebook", None)
    if not isinstance(notebook, type):
        return
    for name in list(vars(notebook)):
        if name not in ("__module__", "__doc__", "__dict__", "__weakref__", "__qualname__"):
            delattr(notebook, name)


class _TextBars(importlib.abc.MetaPathFinder):
    """Finds `tqdm.notebook` as usual and makes its bar a text bar once it has loaded."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _NOTEBOOK:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            original(module)
            _as_text(module)

        setattr(loader, "exec_module", exec_module)  # noqa: B010
        return spec
