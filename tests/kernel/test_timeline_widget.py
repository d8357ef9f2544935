"""`%tasks --timeline` as an ipympl canvas in a real kernel: where widgets render (the
JupyterLab extension connected, or `%matplotlib widget`), the display is ipympl's canvas
widget; the pointer over a bar names it in the canvas's footer, a click pins its details;
everything it draws runs off the kernel's loop (the `kernel` fixture's loop guard)."""

from __future__ import annotations

import json
import queue
import time
from typing import Any

import pytest

from .conftest import Execution, Kernel
from .test_timeline_magic import _fan_out, _pngs

pytestmark = pytest.mark.kernel

pytest.importorskip("ipympl")

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _canvas(kernel: Kernel, drawn: Execution) -> tuple[str, dict[str, Any]]:
    """The model id the cell displayed and the state its comm was opened with."""
    [view] = [
        m["content"]["data"][WIDGET_VIEW]
        for m in drawn.messages
        if m["msg_type"] == "display_data" and WIDGET_VIEW in m["content"]["data"]
    ]
    model_id = view["model_id"]
    [state] = [
        m["content"]["data"]["state"]
        for m in kernel.iopub
        if m["msg_type"] == "comm_open" and m["content"]["comm_id"] == model_id
    ]
    return model_id, state


def _states(kernel: Kernel, comm_id: str, key: str) -> list[Any]:
    return [
        m["content"]["data"]["state"][key]
        for m in kernel.iopub
        if m["msg_type"] == "comm_msg"
        and m["content"]["comm_id"] == comm_id
        and m["content"]["data"].get("method") == "update"
        and key in m["content"]["data"].get("state", {})
    ]


def _wait_state(kernel: Kernel, comm_id: str, key: str, until: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [v for v in _states(kernel, comm_id, key) if until(v)]
        if found:
            return found[-1]
        try:
            kernel.iopub.append(kernel.client.get_iopub_msg(timeout=0.2))
        except queue.Empty:
            pass
    raise TimeoutError(f"{key} of {comm_id} never matched: {_states(kernel, comm_id, key)}")


def _wait_custom(kernel: Kernel, comm_id: str, kind: str, since: int, timeout: float = 60) -> None:
    """Read iopub until the canvas `comm_id` sent its frontend a message of type `kind`
    (after the first `since` messages)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in kernel.iopub[since:]:
            data = m["content"].get("data", {}) if m["msg_type"] == "comm_msg" else {}
            if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id:
                sent = json.loads(data.get("content", {}).get("data") or "{}")
                if data.get("method") == "custom" and sent.get("type") == kind:
                    return
        try:
            kernel.iopub.append(kernel.client.get_iopub_msg(timeout=0.2))
        except queue.Empty:
            pass
    raise TimeoutError(f"canvas {comm_id} sent no {kind!r} message")


def _mouse(kernel: Kernel, comm_id: str, kind: str, xy: tuple[float, float]) -> None:
    """A pointer event exactly as ipympl's frontend sends it (canvas pixels, y from the top)."""
    event = {"type": kind, "x": xy[0], "y": xy[1], "button": 0, "buttons": 0, "modifiers": []}
    kernel.comm_msg(comm_id, {"method": "custom", "content": {**event, "guiEvent": {}}})


def _bar_pixel(kernel: Kernel, model_id: str, agent: str) -> tuple[list[float], dict[str, Any]]:
    """Where the first request bar of `agent` is on the canvas, and that request's row."""
    code = (
        "import ipywidgets, json\n"
        f"_c = ipywidgets.widgets.widget._instances[{model_id!r}]\n"
        "_ax = _c.figure.axes[0]\n"
        f"_p = next(p for p in _ax.patches if str(p.get_gid()).startswith('request:{agent}'))\n"
        "_x, _y = _ax.transData.transform((_p.get_x() + _p.get_width() / 2,"
        " _p.get_y() + _p.get_height() / 2))\n"
        "print(json.dumps([float(_x), float(_c.figure.bbox.height - _y), _p.get_gid()]))"
    )
    result = kernel.execute(code)
    assert result.status == "ok", result.texts()
    x, y, gid = json.loads(result.texts().strip().splitlines()[-1])
    message_id = gid.split(":", 2)[2]
    row = kernel.value(
        f"[(r.message_id, r.cache_read, r.cache_write) for r in "
        f"(await api.timeline()).timeline.rows if r.message_id == {message_id!r}][0]"
    )
    return [x, y], {"message_id": row[0], "read": row[1], "write": row[2]}


def test_with_the_widget_backend_the_timeline_is_an_ipympl_canvas(kernel: Kernel) -> None:
    _fan_out(kernel)
    assert kernel.execute("%matplotlib widget").status == "ok"
    drawn = kernel.execute("%tasks --timeline")
    assert drawn.status == "ok", drawn.texts()
    model_id, state = _canvas(kernel, drawn)
    assert state["_model_name"] == "MPLCanvasModel"
    assert state["_model_module"] == "jupyter-matplotlib"
    assert state["toolbar_visible"] == "visible"
    width, height = _wait_state(kernel, model_id, "_size", lambda size: size[0] > 0)
    assert width > 500 and height > 200
    # the toolbar (zoom, pan) is its own widget model, referenced by the canvas
    toolbar_id = _wait_state(kernel, model_id, "toolbar", bool).removeprefix("IPY_MODEL_")
    [toolbar] = [
        m["content"]["data"]["state"]
        for m in kernel.iopub
        if m["msg_type"] == "comm_open" and m["content"]["comm_id"] == toolbar_id
    ]
    assert toolbar["_model_name"] == "ToolbarModel"
    assert {item[3] for item in toolbar["toolitems"]} >= {"pan", "zoom", "home"}
    # without widgets, the same output shows the PNG and the text
    [image] = _pngs(drawn)
    assert image.startswith(b"\x89PNG")
    assert "timeline of session" in drawn.texts() and "3 lanes" in drawn.texts()

    # junk from the frontend (no type, no coordinates, not a dict): dropped, nothing in a cell
    before = len(kernel.iopub)
    kernel.comm_msg(model_id, {"method": "custom", "content": {"x": "left"}})
    kernel.comm_msg(model_id, {"method": "custom", "content": {"type": "motion_notify"}})
    kernel.comm_msg(model_id, {"method": "custom", "content": ["not", "a", "dict"]})
    later = kernel.execute("print('still here')")
    assert later.texts().strip() == "still here"

    # the pointer over w0's first request: its details in the canvas's footer
    xy, row = _bar_pixel(kernel, model_id, kernel.value("api.agent().session.task('w0').id"))
    _mouse(kernel, model_id, "motion_notify", (xy[0], xy[1]))
    shown = _wait_state(kernel, model_id, "_message", lambda m: "request" in m)
    assert f"w0: request {row['message_id']}" in shown
    assert f"cache read {row['read']:,}, written {row['write']:,} tokens" in shown
    assert "before it" in shown  # what it waited for, or that it did not
    # the junk was handled before (one worker, in order): nothing of it reached a cell
    kernel.drain()
    streamed = [m["content"]["text"] for m in kernel.iopub[before:] if m["msg_type"] == "stream"]
    assert "Traceback" not in "".join(streamed) and "still here" in "".join(streamed)

    # a click pins them in a box over the plot, drawn again (a "draw" asked of the frontend)
    clicked = len(kernel.iopub)
    _mouse(kernel, model_id, "button_press", (xy[0], xy[1]))
    _mouse(kernel, model_id, "button_release", (xy[0], xy[1]))
    box = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not box:
        box = kernel.value(
            "[a.get_text() for a in "
            f"ipywidgets.widgets.widget._instances[{model_id!r}].figure.axes[0].texts"
            " if a.get_gid() == 'details' and a.get_visible()]"
        )
    assert box and f"w0: request {row['message_id']}" in box[0]
    _wait_custom(
        kernel, model_id, "draw", since=clicked
    )  # asked of the frontend after the box is set


def test_the_extension_connected_chooses_the_canvas_and_nbclient_the_png(kernel: Kernel) -> None:
    _fan_out(kernel)
    headless = kernel.execute("%tasks --timeline")
    assert headless.status == "ok", headless.texts()
    assert len(_pngs(headless)) == 1
    assert not any(WIDGET_VIEW in m["content"].get("data", {}) for m in headless.messages)

    kernel.open_comm("lab-1")  # as the JupyterLab extension does on connect
    drawn = kernel.execute("%tasks --timeline w1")
    assert drawn.status == "ok", drawn.texts()
    _, state = _canvas(kernel, drawn)
    assert state["_model_name"] == "MPLCanvasModel"
