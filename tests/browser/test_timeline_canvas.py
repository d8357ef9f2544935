"""`%tasks --timeline` in JupyterLab with ipympl installed: the interactive canvas renders
(ipympl's labextension draws the image the kernel sends), and the pointer over a request bar
names it in the canvas's footer. The tests are steps of one session, in file order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Lab, notebook_json, open_notebook, shot
from .conftest import cells as _cells

pytest.importorskip("ipympl")

NAME = "timeline.ipynb"
SOURCES = [
    "%load_ext forkagent_jupyter\n%config ForkAgent.permission_mode = 'bypassPermissions'\n"
    "%config ForkAgent.max_cost_usd = 100.0",
    "%%agent\nContext: " + "facts about the data. " * 50,
    "%fork --name w0 compute `py: 6 * 7`\n%fork --name w1 compute `py: 6 * 8`",
    "%tasks --wait",
    "%tasks --timeline",
    # where w0's first request bar is on the canvas (figure pixels, y from the top)
    "import json, ipywidgets\n"
    "_c = [w for w in ipywidgets.widgets.widget._instances.values()"
    " if type(w).__name__ == 'TimelineCanvas'][-1]\n"
    "_ax = _c.figure.axes[0]\n"
    "_w0 = __forkagent__.session.task('w0').id\n"
    "_p = next(p for p in _ax.patches if str(p.get_gid()).startswith(f'request:{_w0}:'))\n"
    "_x, _y = _ax.transData.transform((_p.get_x() + _p.get_width() / 2,"
    " _p.get_y() + _p.get_height() / 2))\n"
    "print('BAR', json.dumps([float(_x), float(_c.figure.bbox.height - _y),"
    " _p.get_gid().split(':')[2]]))",
]

DARK_PIXELS = """canvas => {
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let dark = 0;
    for (let i = 0; i < data.length; i += 4) if (data[i + 3] > 0 && data[i] < 128) dark++;
    return dark;
}"""


def _run(page: Any, text: str) -> Any:
    """Run the cell whose source starts with `text` (cells move as notifications are
    inserted); returns it."""
    cell = _cells(page).filter(has=page.locator(".jp-InputArea-editor", has_text=text)).first
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    return cell


@pytest.fixture(scope="module")
def nb_page(lab: Lab, page: Any) -> Any:
    return open_notebook(lab, page, NAME, notebook_json(SOURCES))


def test_the_timeline_is_an_ipympl_canvas_that_names_the_bar_under_the_pointer(
    nb_page: Any,
) -> None:
    page = nb_page
    _run(page, "%load_ext")
    page.wait_for_selector(".jp-NotebookPanel[data-forkagent-connected='2']", state="attached")
    _run(page, "%%agent")
    _run(page, "%fork --name w0")
    waited = _run(page, "%tasks --wait")
    waited.locator("table.forkagent-tasks").first.wait_for(timeout=120_000)

    shown = _run(page, "%tasks --timeline")
    figure = shown.locator(".jupyter-matplotlib-figure")
    figure.wait_for(timeout=120_000)
    canvas = figure.locator(".jupyter-matplotlib-canvas-div canvas").first
    canvas.wait_for()
    box = canvas.bounding_box()
    assert box is not None and box["width"] > 500 and box["height"] > 200, box
    # the image the kernel rendered (on its thread) reached the canvas: lanes, bars, text
    page.wait_for_function(
        f"el => ({DARK_PIXELS})(el) > 2000", arg=canvas.element_handle(), timeout=60_000
    )
    assert shown.locator(".jupyter-matplotlib-toolbar").count() == 1  # zoom, pan
    shot(page, "timeline-01-canvas")


def test_the_pointer_over_a_request_bar_names_it_in_the_footer(nb_page: Any) -> None:
    page = nb_page
    shown = _cells(page).filter(has=page.locator(".jupyter-matplotlib-figure")).first
    canvas = shown.locator(".jupyter-matplotlib-canvas-div canvas").first
    located = _run(page, "import json, ipywidgets")
    printed = located.locator(".jp-OutputArea-output").filter(has_text="BAR").first
    printed.wait_for()
    x, y, message_id = json.loads(printed.inner_text().split("BAR", 1)[1])
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()  # where it is now that the page has scrolled
    assert box is not None
    scale = box["width"] / canvas.evaluate("c => c.width / (window.devicePixelRatio || 1)")
    page.mouse.move(box["x"] + 5, box["y"] + 5)
    page.mouse.move(box["x"] + x * scale, box["y"] + y * scale, steps=5)
    footer = shown.locator(".jupyter-matplotlib-footer")
    footer.filter(has_text=f"w0: request {message_id}").wait_for(timeout=60_000)
    assert "cache read" in footer.inner_text() and "before it" in footer.inner_text()
    shot(page, "timeline-02-hover")
