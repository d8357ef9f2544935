"""forkagent-jupyter: fork subagents in Jupyter.

The public names are imported lazily so that importing the package (and `%load_ext`) stays
cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "Session",
    "SessionOptions",
    "Turn",
    "__version__",
    "load_ipython_extension",
    "unload_ipython_extension",
]

if TYPE_CHECKING:
    from .runtime import Session, SessionOptions, Turn

    __version__: str


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from ._version import package_version

        return package_version()
    if name in ("Session", "SessionOptions", "Turn"):
        from . import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module 'forkagent_jupyter' has no attribute {name!r}")


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt extension shipped in this package."""
    return [{"src": "labextension", "dest": "forkagent-jupyter"}]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext forkagent_jupyter`: magics, the %%agent transformer, the comm target."""
    from .kernel.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """`%unload_ext forkagent_jupyter`: stop the workers and remove the magics' hooks."""
    from .kernel.extension import unload

    unload(ipython)
