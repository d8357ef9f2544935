"""Notifications shown without the JupyterLab extension (the launching cell's display) and by
`api.notifications()`, when the worker's result holds Markdown code blocks of its own: the
launching cell shows each notification's summary, its XML folded under it, then the answer."""

from __future__ import annotations

import re
from html import unescape

import pytest

from .conftest import Kernel

pytestmark = pytest.mark.kernel

_BLOCK = re.compile(r'<pre><code class="language-xml">(.*?)</code></pre>', re.DOTALL)
_FOLDED = re.compile(r"<details class='forkagent-notification-xml'>(.*?)</details>", re.DOTALL)


def _xml_blocks(html: str) -> list[str]:
    return [unescape(block) for block in _BLOCK.findall(html)]


def _whole(block: str) -> bool:
    """One notification, from its opening tag to its closing one, inside one code block."""
    return block.lstrip().startswith("<task-notification>") and block.rstrip().endswith(
        "</task-notification>"
    )


def test_a_result_with_code_blocks_stays_inside_its_notification(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    # the offline model's result quotes the tool's output in a ``` block; this output carries
    # a longer fence of its own too
    code = 'print(chr(96) * 4 + "\\ninside\\n" + chr(96) * 4)'
    assert kernel.execute(f"%fork --name fenced report `py: {code}`").status == "ok"
    assert kernel.execute("%tasks --wait fenced", timeout=60).status == "ok"
    kernel.drain()
    notes = [
        m["content"]["data"]
        for m in kernel.iopub
        if m["msg_type"] == "update_display_data"
        and "<task-notification>" in m["content"]["data"].get("text/markdown", "")
    ]
    assert notes, "no fallback notification display"
    page = notes[-1]["text/html"]
    # the summary first and open: name, status, the result's first lines, tokens and cost
    summary, rest = page.split("<details", 1)
    assert "<b>fenced</b>" in summary and "completed" in summary
    assert "Worker &quot;fenced&quot; completed" in summary
    assert "tokens in " in summary and " · $0." in summary
    assert "<pre class='forkagent-notification-result'>Scope: report" in summary
    assert "task-notification" not in summary  # the XML is not shown before it is asked for
    # the XML one click away: in a closed <details>, whole, the only XML on the page
    [folded] = _FOLDED.findall(page)
    assert folded.startswith("<summary>notification XML (what the parent read)</summary>")
    assert "<details open" not in page
    [block] = _xml_blocks(folded)
    assert _xml_blocks(page) == [block]
    assert _whole(block) and "inside" in block
    assert "````" in block  # the output's own fence, kept as text
    # the transcript lies inside the notebook's folder: shown relative to it, no temp path
    assert "<output-file>.forkagent/sessions/" in block and "/tmp/" not in block
    answer = rest.split("</details>", 1)[1]
    assert "reported back" in answer  # the parent's answer follows the notification
    # a text frontend cannot unfold: the same summary, then the XML whole
    plain = notes[-1]["text/plain"]
    assert plain.startswith('[completed] fenced: Worker "fenced" completed\ntokens in ')
    assert plain.index("\n\n<task-notification>") < plain.index("</task-notification>")

    shown = kernel.execute("from forkagent_jupyter.kernel import api\napi.notifications()")
    [data] = [m["content"]["data"] for m in shown.messages if m["msg_type"] == "execute_result"]
    blocks = _xml_blocks(data["text/html"])
    assert len(blocks) == 1 and _whole(blocks[0]) and "inside" in blocks[0]
    assert "**parent:**" in data["text/markdown"]
    # data, not only a display: api.notifications() had returned a display object (len raised)
    assert kernel.value("len(api.notifications())") == 1
    answered = kernel.value("api.notifications()[0].answer")
    assert "reported back" in answered
    assert "inside" in kernel.value("api.notifications()[0].notifications[0]")


def test_with_auto_respond_off_the_next_cell_reads_and_shows_them(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.execute("%config ForkAgent.auto_respond = False")
    kernel.execute("%fork --name quiet count `py: 6 * 7`")
    kernel.execute("%tasks --wait quiet", timeout=60)
    kernel.drain()
    before = len(kernel.iopub)
    assert kernel.execute("%%agent\nWhat came back?").status == "ok"
    kernel.drain()
    notes = [
        m["content"]["data"]
        for m in kernel.iopub[before:]
        if m["msg_type"] == "update_display_data"
        and "<task-notification>" in m["content"]["data"].get("text/markdown", "")
    ]
    assert notes, "the notification was not shown"
    assert kernel.value("len(__forkagent__.session.responder.auto_turns)") == 1
    sent = kernel.value("str(__forkagent__.session.messages[-2]['content'])")
    assert "<task-notification>" in sent and "What came back?" in sent
