# `ipywidgets.widgets` (untyped): the widget classes the package uses, their traits as plain
# attributes (see typings/README.md). Constructors take trait values as keyword arguments.
from collections.abc import Callable, Sequence
from typing import Any

from ipywidgets.widgets.widget_string import HTML as HTML
from ipywidgets.widgets.widget_string import HTMLStyle as HTMLStyle
from ipywidgets.widgets.widget_string import Text as Text
from traitlets import HasTraits

class Widget(HasTraits):
    def __init__(self, **kwargs: object) -> None: ...
    def close(self) -> None: ...
    def send_state(self, key: str | Sequence[str] | None = None) -> None: ...
    def _repr_mimebundle_(self, **kwargs: object) -> dict[str, object] | None: ...

class Style(Widget): ...
class ButtonStyle(Style): ...

class Layout(Widget):
    # CSS properties, each a string or None (unset); the package sets `display`
    display: str | None
    width: str | None
    max_width: str | None
    max_height: str | None
    margin: str | None
    overflow: str | None
    align_self: str | None
    def __init__(self, **kwargs: str | None) -> None: ...

class DOMWidget(Widget):
    layout: Layout
    _dom_classes: tuple[str, ...]
    def add_class(self, className: str) -> DOMWidget: ...
    def remove_class(self, className: str) -> DOMWidget: ...

class Box(DOMWidget):
    # traitlets takes any sequence of widgets and keeps a tuple
    @property
    def children(self) -> tuple[Widget, ...]: ...
    @children.setter
    def children(self, value: Sequence[Widget]) -> None: ...
    def __init__(self, children: Sequence[Widget] = (), **kwargs: object) -> None: ...

class VBox(Box): ...
class HBox(Box): ...

class Accordion(Box):
    selected_index: int | None
    titles: tuple[str, ...]

class Button(DOMWidget):
    description: str
    tooltip: str | None
    disabled: bool
    icon: str
    button_style: str
    style: ButtonStyle
    def __init__(self, **kwargs: object) -> None: ...
    def on_click(self, callback: Callable[[Button], object], remove: bool = False) -> None: ...

class Output(DOMWidget):
    # nbformat output dicts (a JSON document each, any of the output types)
    outputs: tuple[dict[str, Any], ...]
    msg_id: str
