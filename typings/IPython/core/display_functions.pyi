# `display` and `DisplayHandle` (unannotated in IPython 9): see typings/README.md.
from collections.abc import Mapping, Sequence
from typing import Literal, overload

class DisplayHandle:
    """A handle on an updatable display (`display(..., display_id=True)`)."""

    display_id: str
    def __init__(self, display_id: str | None = None) -> None: ...
    def display(self, obj: object, **kwargs: object) -> None: ...
    def update(self, obj: object, **kwargs: object) -> None: ...

# A true `display_id` (True, or a non-empty id) gives a handle on the display; none gives None.
@overload
def display(
    *objs: object,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    metadata: Mapping[str, object] | None = None,
    transient: Mapping[str, object] | None = None,
    display_id: Literal[True],
    raw: bool = False,
    clear: bool = False,
    **kwargs: object,
) -> DisplayHandle: ...
@overload
def display(
    *objs: object,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    metadata: Mapping[str, object] | None = None,
    transient: Mapping[str, object] | None = None,
    display_id: str | bool | None = None,
    raw: bool = False,
    clear: bool = False,
    **kwargs: object,
) -> DisplayHandle | None: ...
def update_display(obj: object, *, display_id: str, **kwargs: object) -> None: ...
def clear_output(wait: bool = False) -> None: ...
