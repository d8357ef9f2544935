"""`%tasks --timeline` and `api.timeline()` in a real kernel: a PNG any frontend shows, the
rows as a DataFrame, the same fan-out drawn again after a kernel restart."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from .conftest import Execution, Kernel

pytestmark = pytest.mark.kernel

PNG = b"\x89PNG\r\n\x1a\n"


def _pngs(execution: Execution) -> list[bytes]:
    return [
        base64.b64decode(m["content"]["data"]["image/png"])
        for m in execution.messages
        if m["msg_type"] in ("display_data", "execute_result")
        and "image/png" in m["content"].get("data", {})
    ]


def _fan_out(kernel: Kernel) -> None:
    assert (
        kernel.execute("from forkagent_jupyter.kernel import api\napi.allow('Python')").status
        == "ok"
    )
    assert kernel.execute("%%agent\nContext: " + "facts about the data. " * 300).status == "ok"
    for i, expr in enumerate(["6 * 7", "6 * 8"]):
        assert kernel.execute(f"%fork --name w{i} compute `py: {expr}`").status == "ok"
    done = kernel.execute("%tasks --wait", timeout=120)
    assert done.status == "ok", done.texts()


def test_tasks_timeline_shows_a_png_and_api_returns_figure_and_rows(
    kernel: Kernel, emulator: Any
) -> None:
    _fan_out(kernel)
    drawn = kernel.execute("%tasks --timeline")
    assert drawn.status == "ok", drawn.texts()
    [image] = _pngs(drawn)
    assert image.startswith(PNG) and len(image) > 10_000
    assert "timeline of session" in drawn.texts() and "3 lanes" in drawn.texts()

    code = (
        'figure, rows = (await api.timeline("w1"))[:2]\n'
        "print(type(figure).__name__, sorted(set(rows.lane)), len(rows[rows.kind == 'request']))\n"
        "figure"
    )
    one = kernel.execute(code)
    assert one.status == "ok", one.texts()
    assert "Figure ['parent', 'w1']" in one.texts()
    # w1's two requests, and the parent's answer to w1's report
    assert int(one.texts().split("]")[1].split()[0]) >= 3
    [figure_png] = _pngs(one)  # a bare Figure as the cell's value: shown as a PNG
    assert figure_png.startswith(PNG)
    # the request rows are the ledger's requests of w1, with their cache tokens
    rows = kernel.value(
        "[(r.message_id, r.cache_read, r.cache_write) for r in "
        "(await api.timeline('w1')).timeline.of('request', 'w1')]"
    )
    ledger = {e.message_id: e.usage for e in emulator.ledger.entries()}
    assert len(rows) == 2
    for message_id, read, write in rows:
        assert read == ledger[message_id]["cache_read_input_tokens"]
        assert write == ledger[message_id]["cache_creation_input_tokens"]


def test_bad_timeline_lines_are_one_line_usage_errors(kernel: Kernel) -> None:
    both = kernel.execute("%tasks --timeline --wait")
    assert "UsageError: %tasks: --timeline goes alone" in both.texts()
    nothing = kernel.execute("%tasks --timeline")
    assert "UsageError: timeline: No fan-out to draw" in nothing.texts()
    unknown = kernel.execute("%tasks --timeline nobody")
    assert "No transcript found for agent 'nobody'" in unknown.texts()
    assert "Traceback" not in nothing.texts() + unknown.texts()


def test_the_timeline_after_a_kernel_restart_is_read_from_the_transcripts(
    kernel: Kernel,
) -> None:
    _fan_out(kernel)
    before = kernel.value(
        "[(r.kind, r.lane, r.message_id) for r in (await api.timeline()).timeline.rows]"
    )
    kernel.km.restart_kernel(now=True)
    kernel.client.wait_for_ready(timeout=60)
    assert kernel.execute("%load_ext forkagent_jupyter").status == "ok"
    kernel.guard_findings(clear=True)
    drawn = kernel.execute("%tasks --timeline w0 w1")
    assert drawn.status == "ok", drawn.texts()
    [image] = _pngs(drawn)
    assert image.startswith(PNG)
    after = kernel.value(
        "[(r.kind, r.lane, r.message_id) for r in "
        "(await __import__('forkagent_jupyter.kernel.api', fromlist=['x']).timeline())"
        ".timeline.rows]"
    )
    assert after == before and any(kind == "request" for kind, _, _ in after)
