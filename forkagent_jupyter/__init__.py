"""forkagent-jupyter: fork subagents in Jupyter.

The public names are imported lazily so that importing the package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Session", "Turn", "__version__"]

if TYPE_CHECKING:
    from .runtime.session import Session, Turn


def __getattr__(name: str) -> Any:
    if name in ("Session", "Turn"):
        from .runtime import session

        return getattr(session, name)
    raise AttributeError(f"module 'forkagent_jupyter' has no attribute {name!r}")
