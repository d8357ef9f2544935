"""What a worker shows breaks nothing: text with lone surrogates, tqdm progress bars, figures
whatever backend the kernel uses, and many figures."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.reported import tool_outputs

from .conftest import Kernel
from .test_compute import SESSION, _card_outputs, setup, status

pytestmark = pytest.mark.kernel


def _card_text(kernel: Kernel) -> str:
    kernel.drain()
    return "".join(o.get("text", "") for o in _card_outputs(kernel))


def _pngs(kernel: Kernel) -> list[bytes]:
    kernel.drain()
    return [
        base64.b64decode(o["data"]["image/png"])
        for o in _card_outputs(kernel)
        if "image/png" in o.get("data", {})
    ]


def test_a_lone_surrogate_breaks_neither_a_worker_nor_the_conversation(
    kernel: Kernel, tmp_path: Path
) -> None:
    setup(kernel)
    folder = tmp_path / "files"
    folder.mkdir()
    with open(bytes(folder) + b"/caf\xe9.csv", "w") as file:  # a Latin-1 name
        file.write("1")
    listing = f"`py: import os; names = os.listdir({str(folder)!r}); print(*names)`"
    kernel.execute(f"%fork --name lister list {listing}")
    kernel.run_approving("%tasks --wait lister", timeout=60)
    error = kernel.value(f"{SESSION}.registry.get('lister').error")
    assert status(kernel, "lister") == "completed", error
    assert "caf\\udce9.csv" in _card_text(kernel)
    assert "caf\\udce9.csv" in kernel.value(f"{SESSION}.registry.get('lister').result")
    # the parent's own call: this turn and the next ones go on
    first = kernel.run_approving(f"%%agent\nList {listing}", timeout=60)
    assert first.status == "ok", first.texts()
    second = kernel.run_approving("%%agent\nAnd now? `py: 1 + 1`", timeout=60)
    assert second.status == "ok" and "2" in tool_outputs(second.texts()), second.texts()
    kernel.execute("%fork --name after fine `py: 6 * 7`")
    kernel.run_approving("%tasks --wait after", timeout=60)
    assert status(kernel, "after") == "completed"


def test_tqdm_auto_in_a_worker_shows_text_progress_on_the_card(kernel: Kernel) -> None:
    pytest.importorskip("tqdm")
    setup(kernel)
    kernel.execute("from tqdm.auto import tqdm, trange")  # as a notebook's first cell does
    kernel.execute(
        "%fork --name bars progress `py: total = sum(tqdm(range(50), desc='rows')); "
        "import tqdm.notebook as tn; total += sum(tn.tqdm(range(5), desc='again'))`"
    )
    kernel.run_approving("%tasks --wait bars", timeout=60)
    assert status(kernel, "bars") == "completed", kernel.value(
        f"{SESSION}.registry.get('bars').error"
    )
    card = _card_text(kernel)
    assert "rows: 100%" in card and "50/50" in card
    assert "again: 100%" in card and "5/5" in card


def test_a_worker_draws_its_own_figures_whatever_the_kernel_backend(kernel: Kernel) -> None:
    pytest.importorskip("ipympl")
    setup(kernel)
    kernel.execute("%matplotlib widget")
    kernel.execute(
        "import matplotlib.pyplot as plt\nkernel_fig = plt.figure()\nplt.plot([9, 9, 9])\n"
        "plt.title('the kernel figure')"
    )
    kernel.execute(
        "%fork --name draw plots `py: import matplotlib.pyplot as plt; "
        "f = plt.figure(); plt.plot([1, 2, 3]); plt.title('worker one'); "
        "plt.plot([3, 2, 1]); backend = plt.get_backend(); n = len(f.axes[0].lines)`"
    )
    kernel.run_approving("%tasks --wait draw", timeout=60)
    error = kernel.value(f"{SESSION}.registry.get('draw').error")
    assert status(kernel, "draw") == "completed", error
    kernel.execute("%tasks --pull draw backend n")
    assert "ipympl" not in kernel.value("backend").lower() and kernel.value("n") == 2
    [png] = _pngs(kernel)  # its own figure only, not the one the kernel has open
    assert png.startswith(b"\x89PNG")
    assert kernel.value("plt.fignum_exists(kernel_fig.number)") is True  # the kernel's stays


def test_many_figures_are_capped_and_the_rest_counted(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("%matplotlib inline")
    kernel.execute(
        "%fork --name many plots `py: import matplotlib.pyplot as plt; "
        "[plt.plot([i, i]) for i in range(60) if plt.figure(figsize=(1, 1))]`"
    )
    kernel.run_approving("%tasks --wait many", timeout=120)
    assert status(kernel, "many") == "completed"
    assert len(_pngs(kernel)) == 20
    assert "[40 more figure(s) left out: at most 20 per call are shown]" in _card_text(kernel)


HOSTILE = (
    "from IPython.display import display, HTML, Javascript; "
    "display(HTML('<b>kept</b><img src=x onerror=\"window.pwned=1\"><script>window.pwned=2'"
    "'</script><a href=\"javascript:pwn()\">link</a><style>@import url(x.css)</style>'"
    '\'<table class="dataframe"><tr><td style="position:fixed">cell-42</td></tr></table>\')); '
    "display(Javascript('window.pwned = 3')); "
    "display(dict([('text/plain', 'plain-fallback'), ('application/vnd.custom+json', 1)]), "
    "raw=True)"
)


def test_what_a_worker_displays_cannot_run_script_in_the_page(kernel: Kernel) -> None:
    # (no braces in the code: a line magic would expand them)
    # a card's output area renders as trusted: the worker's HTML and JavaScript (the model's
    # code, or data it printed) would run in the page, with the server's token at hand
    setup(kernel)
    kernel.execute(f"%fork --name show html `py: {HOSTILE}`")
    kernel.run_approving("%tasks --wait show", timeout=60)
    assert status(kernel, "show") == "completed"
    kernel.drain()
    bundles = [o["data"] for o in _card_outputs(kernel) if o["output_type"] == "display_data"]
    html = "".join(b.get("text/html", "") for b in bundles)
    assert "<b>kept</b>" in html and "cell-42</td>" in html and "<table" in html
    for bad in ("onerror", "<script", "window.pwned", "javascript:", "<style", "position:"):
        assert bad not in html.lower(), (bad, html)
    assert not [b for b in bundles if set(b) - {"text/plain", "text/html"}], bundles
    assert any(b.get("text/plain") == "plain-fallback" for b in bundles)
