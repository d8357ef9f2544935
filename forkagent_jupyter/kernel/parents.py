"""Which request a background message answers to.

ipykernel keeps the parent header (the request an IOPub message belongs to) in a context
variable, and an asyncio task copies the context of whoever created it. A card flusher or an
automatic answer started from a `%fork` cell would therefore send every later message as a
reply to that finished cell. JupyterLab applies widget updates whatever their parent, but
headless clients (nbclient, papermill) keep only the messages of the cell they are running,
so the saved notebook would show cards frozen in their first state and no notifications.

Run in an empty context, `kernel.get_parent()` falls back to the context of the kernel's most
recent request: the cell running now, or the last one. That is where such messages belong.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

__all__ = ["in_latest_request"]


def in_latest_request(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Call `fn` so that what it sends (and any task it creates) answers the latest request."""
    return contextvars.Context().run(fn, *args, **kwargs)
