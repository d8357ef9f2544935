# `ipywidgets.widgets.widget_string` (untyped): the string widgets the package uses and the
# HTML widget's style (see typings/README.md).
from ipywidgets.widgets import DOMWidget, Style

class HTMLStyle(Style): ...

class _String(DOMWidget):
    value: str
    placeholder: str
    description: str
    def __init__(self, value: str | None = None, **kwargs: object) -> None: ...

class HTML(_String):
    style: HTMLStyle

class Text(_String):
    continuous_update: bool
