"""Model Markdown shown safely: raw HTML and script links stay text."""

from __future__ import annotations

from forkagent_jupyter.kernel.render.markdown import (
    SafeMarkdown,
    code_span,
    markdown_bundle,
    markdown_html,
)

HOSTILE = (
    "**Done.** See below.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "<img src=x onerror=alert(1)> <script>alert(2)</script> [click](javascript:alert(3))\n\n"
    "```python\nif a < b:\n    pass\n```"
)


def test_bundle_renders_markdown_and_escapes_raw_html() -> None:
    bundle = markdown_bundle(HOSTILE)
    html = bundle["text/html"]
    assert "<strong>Done.</strong>" in html and "<td>1</td>" in html
    assert "<img" not in html and "<script" not in html and 'href="javascript' not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "if a &lt; b:" in html  # code keeps its text
    assert bundle["text/markdown"] == HOSTILE and bundle["text/plain"] == HOSTILE


def test_footer_is_ours_and_appended_as_html() -> None:
    shown = SafeMarkdown("*hi*", footer_html="<p><small>usage</small></p>")._repr_mimebundle_()
    assert shown["text/html"].endswith("<p><small>usage</small></p>")
    assert "<em>hi</em>" in shown["text/html"]


def test_a_call_line_stays_one_code_span_whatever_backticks_it_holds() -> None:
    line = "print(`x`) ``y`` <b>"
    html = markdown_html(f"> **Python** {code_span(line)}")
    assert "<code>print(`x`) ``y`` &lt;b&gt;</code>" in html
    assert code_span("`edge`") == "`` `edge` ``"
