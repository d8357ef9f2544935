"""A notification as a person reads it: the summary first, the XML the parent read folded under
it (one click away in HTML), the plain text's summary then the XML whole; the snapshot the
extension and the parent rely on unchanged."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.kernel.comm.protocol import MIME
from forkagent_jupyter.kernel.frontend.delivery import joined, notification_bundle, shown_bundle
from forkagent_jupyter.kernel.frontend.note_view import (
    RESULT_CHARS,
    RESULT_LINES,
    XML_LABEL,
    result_head,
)
from forkagent_jupyter.runtime import TaskSnapshot

LAB = Path(__file__).parents[2] / "labextension" / "test"
CASES = json.loads((LAB / "result-head.json").read_text(encoding="utf-8"))["cases"]
EXAMPLES = json.loads((LAB / "protocol-messages.json").read_text(encoding="utf-8"))
LONG = "\n".join(f"finding {i}: <b>{i * 7}</b>" for i in range(1, 31))
XML_BLOCK = re.compile(r'<pre><code class="language-xml">(.*?)</code></pre>', re.DOTALL)
DETAILS = re.compile(
    r"<details class='forkagent-notification-xml'><summary>(.*?)</summary>(.*?)</details>",
    re.DOTALL,
)


def _runs(runs: list[list[Any]]) -> str:
    return "".join(str(text) * int(times) for text, times in runs)


@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c["what"]))
def test_the_results_first_lines_follow_the_shared_table(case: dict[str, Any]) -> None:
    assert result_head(_runs(case["result"])) == _runs(case["head"])


def _example() -> tuple[TaskSnapshot, dict[str, Any]]:
    """The notification of the shared protocol example, and its display data as sent."""
    insert = next(m for m in EXAMPLES["kernel_to_frontend"] if m["type"] == "insert_cell")
    data: dict[str, Any] = insert["cell"]["outputs"][0]["data"]
    return TaskSnapshot.model_validate(data[MIME]), data


def _long() -> TaskSnapshot:
    """The example's task with a 30-line result that holds HTML, and its notification XML."""
    snapshot, _ = _example()
    xml = snapshot.notification.replace(
        "<result>df has 1,204 rows.</result>",
        "<result>" + LONG.replace("<", "&lt;").replace(">", "&gt;") + "</result>",
    )
    assert xml != snapshot.notification
    return snapshot.model_copy(update={"result": LONG, "notification": xml})


def test_the_html_shows_the_summary_and_folds_the_xml() -> None:
    note = _long()
    bundle = notification_bundle(note)
    page = bundle["text/html"]
    [(label, folded)] = DETAILS.findall(page)
    assert label == XML_LABEL
    before = page.split("<details", 1)[0]
    # the summary, first and open: name, kind, status, summary line, figures
    for shown in ("<b>counter</b>", "fork", "completed", "Worker &quot;counter&quot; completed"):
        assert shown in before, shown
    assert "tokens in 14,484 (cache read 14,200, write 200) / out 150 · $0.0123 · 3.2s" in before
    # the result's first lines, as text (its HTML escaped), and how many more there are
    [result] = re.findall(r"<pre class='forkagent-notification-result'>(.*?)</pre>", before, re.S)
    assert unescape(result) == result_head(LONG)
    assert unescape(result).startswith("finding 1: <b>7</b>\n")
    assert f"finding {RESULT_LINES + 1}:" not in unescape(result)
    assert "[… 20 more lines in the notification below]" in unescape(result)
    assert "<b>7</b>" not in page  # model text is never HTML
    # the XML: nowhere but inside the closed <details>, whole
    assert "task-notification" not in before and "<details open" not in page
    [xml] = XML_BLOCK.findall(folded)
    assert unescape(xml).strip() == note.notification
    assert "finding 30:" in unescape(unescape(xml))  # the whole result is one click away
    # the figures carry dollar amounts: math typesetting skips the note
    assert page.startswith("<div class='forkagent-notification tex2jax_ignore mathjax_ignore'")


def test_the_plain_text_is_a_compact_summary_then_the_xml() -> None:
    note = _long()
    plain = notification_bundle(note)["text/plain"]
    summary, xml = plain.split("\n\n<task-notification>", 1)
    lines = summary.split("\n")
    assert lines[0] == '[completed] counter: Worker "counter" completed'
    assert lines[1] == "tokens in 14,484 (cache read 14,200, write 200) / out 150 · $0.0123 · 3.2s"
    assert "\n".join(lines[2:]) == result_head(LONG)
    assert len(lines) == 2 + RESULT_LINES + 1
    assert "<task-notification>" + xml == note.notification  # a text frontend cannot unfold


def test_the_data_the_extension_and_the_parent_read_is_unchanged() -> None:
    note = _long()
    bundle = notification_bundle(note)
    assert bundle[MIME] is note  # the snapshot as it was: whole result, XML as the parent read
    assert set(bundle) == {MIME, "text/html", "text/plain"}


def test_a_snapshot_without_xml_keeps_its_result_whole() -> None:
    note = _long().model_copy(update={"notification": ""})
    bundle = notification_bundle(note)
    assert "<details" not in bundle["text/html"]
    assert bundle["text/plain"].endswith(LONG)


def test_the_shared_example_shows_what_the_kernel_sends() -> None:
    """The example cell of protocol-messages.json (the extension's tests read it too) carries
    the display data the kernel builds for its notification."""
    snapshot, data = _example()
    built = notification_bundle(snapshot)
    assert data["text/html"] == built["text/html"]
    assert data["text/plain"] == built["text/plain"]


def test_the_launching_cells_area_shows_summaries_then_the_answer() -> None:
    """Without the extension: each notification's summary, its XML folded, then the parent's
    answer; a later delivery below a rule."""
    first, second = _long(), _long().model_copy(update={"name": "second"})
    once = shown_bundle([first, second], "Both **done**.")
    page = once["text/html"]
    assert len(DETAILS.findall(page)) == 2
    assert page.index("<b>counter</b>") < page.index("<details") < page.index("<b>second</b>")
    assert page.rstrip().endswith("<p>Both <strong>done</strong>.</p>")
    markdown = once["text/markdown"]
    assert markdown.count(f"<details><summary>{XML_LABEL}</summary>\n\n```xml\n") == 2
    assert markdown.count("<task-notification>") == 2 and markdown.endswith("Both **done**.")
    assert markdown.index("[completed] counter") < markdown.index("<task-notification>")
    assert once["text/plain"].count("<task-notification>") == 2
    later = joined([once, shown_bundle([first], "")])
    assert later["text/html"].count("<hr>") == 1 and len(DETAILS.findall(later["text/html"])) == 3
    assert later["text/markdown"].count("\n\n---\n\n") == 1


def test_the_extension_folds_and_clips_with_the_same_words() -> None:
    """The extension's renderer (notification.ts) names the folded XML and clips the result
    as the kernel's HTML does."""
    source = (LAB.parent / "src" / "notification.ts").read_text(encoding="utf-8")
    assert f"export const RESULT_LINES = {RESULT_LINES};" in source
    assert f"export const RESULT_CHARS = {RESULT_CHARS};" in source
    assert f"export const XML_LABEL = '{XML_LABEL}';" in source


def test_model_text_is_text_in_every_form() -> None:
    """Name, status, summary, result and XML may carry HTML a model wrote: the HTML shows it as
    text (notification cells are trusted, so nothing in them may be markup of the model's)."""
    bad = '<img src=x onerror="alert(1)">'
    note = TaskSnapshot(
        task_id="a1",
        name=bad,
        kind=bad,
        status=f"failed' onmouseover='{bad}",
        summary=bad,
        result=f"```\n{bad}\n```\n</details>{bad}",
        notification=f"<task-notification>\n<result>{bad}</details></result>\n</task-notification>",
    )
    for form in (notification_bundle(note)["text/html"], shown_bundle([note], bad)["text/html"]):
        assert "<img" not in form and "onmouseover='" not in form
        assert form.count("<details") == form.count("</details>") == 1
    markdown = shown_bundle([note], "")["text/markdown"]
    summary, folded = markdown.split(f"\n\n<details><summary>{XML_LABEL}</summary>\n\n", 1)
    assert summary.startswith("````text\n") and summary.endswith("\n````")  # a longer fence
    assert folded.startswith("```xml\n") and folded.endswith("```\n\n</details>")
