"""What the kernel's widgets share: a text bundle carried whole beside the widget (for a
frontend that cannot draw it), one layout and style for every card part, the status colours,
and HTML escaping.
"""

from __future__ import annotations

import functools
import html

import ipywidgets as w
from ipywidgets.widgets.widget_string import HTMLStyle

__all__ = ["STATUS_COLOURS", "WholeText", "button_layout", "clip", "esc", "shared_style"]

STATUS_COLOURS = {
    "running": "var(--jp-brand-color1, #1976d2)",
    "completed": "var(--jp-success-color1, #388e3c)",
    "failed": "var(--jp-error-color1, #d32f2f)",
    "killed": "var(--jp-warn-color1, #f57c00)",
}


def esc(text: object) -> str:
    return html.escape(str(text))


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class WholeText:
    """ipywidgets clips a widget's `text/plain` to 110 characters and gives no `text/html`; a
    card's text is what a frontend without widgets (a saved notebook on GitHub, nbconvert, a
    terminal) reads, so the bundle carries the same facts whole, as text and as HTML."""

    def _repr_mimebundle_(self, **kwargs: object) -> dict[str, object] | None:
        data: dict[str, object] | None = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if isinstance(data, dict):
            data.update(self.text_bundle())
        return data

    def html_text(self) -> str:
        return f"<pre>{esc(repr(self))}</pre>"

    def text_bundle(self) -> dict[str, str]:
        """The facts without the widget: `text/plain` and `text/html`."""
        return {"text/plain": repr(self), "text/html": self.html_text()}


@functools.cache
def shared_style() -> tuple[w.Layout, HTMLStyle, w.ButtonStyle]:
    """One Layout and one style model for every card part: a card then opens 5 widget
    models instead of about 20 (each part would otherwise bring its own layout and style)."""
    return w.Layout(), HTMLStyle(), w.ButtonStyle()


@functools.cache
def button_layout() -> w.Layout:
    """The cards' Stop buttons: as wide as their label, not a full-width bar."""
    return w.Layout(width="auto", align_self="flex-start", margin="2px 0")
