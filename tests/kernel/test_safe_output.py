"""A worker's display, cut down to what cannot run script in the page (its card renders it as
trusted): script, handlers, javascript: links, styles and frames go; tables and text stay."""

from __future__ import annotations

import pytest

from forkagent_jupyter.kernel.render.safe_output import safe_bundle, safe_html

HOSTILE = [
    '<img src=x onerror="alert(1)">',
    "<script>alert(1)</script>",
    '<a href="javascript:alert(1)">x</a>',
    '<a href=" jav&#x61;script:alert(1)">x</a>',
    '<a href="&#106;avascript:alert(1)">x</a>',
    '<svg onload="alert(1)"><script>alert(1)</script></svg>',
    '<iframe srcdoc="<script>alert(1)</script>"></iframe>',
    '<img src="data:text/html;base64,PHNjcmlwdD4=">',
    "<style>button { display: none }</style>",
    '<div style="position:fixed;inset:0">cover</div>',
    "<scr<script>ipt>alert(1)</script>",
    '<math><mi xlink:href="javascript:alert(1)">m</mi></math>',
    "<form action=https://x><button formaction=javascript:alert(1)>b</button></form>",
    '<object data="javascript:alert(1)"></object>',
    "<!--><script>alert(1)</script>-->",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_nothing_that_runs_script_survives(text: str) -> None:
    out = safe_html(text).lower()
    for bad in ("<script", "onerror", "onload", "javascript:", "<style", "<iframe", "srcdoc",
                "position:", "<svg", "<object", "<form", "data:text"):  # fmt: skip
        assert bad not in out, (text, out)


def test_tables_and_text_stay() -> None:
    table = (
        '<table border="1" class="dataframe"><thead><tr style="text-align: right;"><th></th>'
        "<th>a &amp; b</th></tr></thead><tbody><tr><th>0</th><td>1 &lt; 2</td></tr></tbody>"
        "</table>"
    )
    assert safe_html(table) == (
        '<table border="1" class="dataframe"><thead><tr><th></th><th>a &amp; b</th></tr>'
        "</thead><tbody><tr><th>0</th><td>1 &lt; 2</td></tr></tbody></table>"
    )
    link = '<a href="https://example.com/?q=1&amp;r=2">ok</a><img src="data:image/png;base64,AA">'
    assert safe_html(link) == link


def test_a_bundle_keeps_safe_kinds_and_says_what_it_dropped() -> None:
    assert safe_bundle({"text/plain": "p", "application/javascript": "x"}) == {"text/plain": "p"}
    only = safe_bundle({"application/javascript": "alert(1)"})
    assert only == {
        "text/plain": "[output of type application/javascript not shown on the card: it could "
        "run script]"
    }
    md = safe_bundle({"text/markdown": "<img src=x onerror=y> **b**"})
    assert "onerror=y&gt;" in md["text/html"] and "<strong>b</strong>" in md["text/html"]
    png = safe_bundle({"image/png": b"\x89PNG", "text/plain": "<Figure>"})
    assert png == {"image/png": b"\x89PNG", "text/plain": "<Figure>"}
