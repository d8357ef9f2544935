"""What a worker shows breaks nothing: text with lone surrogates, tqdm progress bars, figures
whatever backend the kernel uses, many figures, and a display or a figure that fails."""

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


def _tool_results(kernel: Kernel, name: str) -> list[tuple[str, int, bool]]:
    """The worker's tool results as the model got them: (text, images, is_error)."""
    blocks = kernel.value(
        f"[b for m in {SESSION}.workers.runs[{SESSION}.registry.get({name!r}).id].history "
        "if isinstance(m['content'], list) for b in m['content'] "
        "if b.get('type') == 'tool_result']"
    )
    results = []
    for block in blocks:
        content = block["content"]
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        text = "".join(p.get("text", "") for p in parts if p["type"] == "text")
        images = sum(p["type"] == "image" for p in parts)
        results.append((text, images, bool(block.get("is_error"))))
    return results


CLEARS = (
    "`py: from IPython.display import clear_output; print('one'); clear_output(); "
    "[(clear_output(wait=True), print('step', i)) for i in range(5)]; print('last'); "
    "clear_output(wait=True)`"
)


def test_clear_output_in_a_worker_clears_its_card_as_in_a_cell(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute(f"%fork --name clearing progress {CLEARS}")
    kernel.run_approving("%tasks --wait clearing", timeout=60)
    error = kernel.value(f"{SESSION}.registry.get('clearing').error")
    assert status(kernel, "clearing") == "completed", error
    # clear_output() empties it at once; wait=True when the next output comes, so the last
    # one (nothing printed after it) leaves what was there
    assert _card_text(kernel) == "step 4\nlast\n"
    # the model reads the output as the card shows it, told that it was cleared
    [(text, images, failed)] = _tool_results(kernel, "clearing")
    assert not failed and images == 0
    assert text == (
        "[clear_output() cleared this call's earlier output 6 time(s); what follows came "
        "after the last clear]\nstep 4\nlast"
    )


def test_a_clear_output_wait_display_loop_keeps_one_figure(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("%matplotlib inline")
    kernel.execute(
        "%fork --name anim plots `py: import matplotlib.pyplot as plt; "
        "from IPython.display import display, clear_output; f = plt.figure(figsize=(1, 1)); "
        "[(plt.plot([i, i]), clear_output(wait=True), display(f)) for i in range(30)]; "
        "plt.close(f)`"
    )
    kernel.run_approving("%tasks --wait anim", timeout=120)
    error = kernel.value(f"{SESSION}.registry.get('anim').error")
    assert status(kernel, "anim") == "completed", error
    assert len(_pngs(kernel)) == 1  # the last frame, not 20 and a count of the rest
    assert "left out" not in _card_text(kernel)
    [(_text, images, failed)] = _tool_results(kernel, "anim")
    assert images == 1 and not failed


def test_a_widget_or_input_in_a_worker_fails_in_one_line(kernel: Kernel) -> None:
    setup(kernel)
    kernel.execute("import ipywidgets")  # as a notebook that uses widgets has
    kernel.execute("%fork --name slider widget `py: import ipywidgets; s = ipywidgets.IntSlider()`")
    kernel.execute("%fork --name ask prompt `py: name = input('name? ')`")
    kernel.run_approving("%tasks --wait", timeout=60)
    [(text, _images, failed)] = _tool_results(kernel, "slider")
    assert failed
    assert text == (
        "NotInWorkerError: widgets are not available in a worker process: it has no connection "
        "to the notebook's frontend; use --shared to run this worker's code in the kernel, or "
        "make the widget in a cell"
    )
    [(text, _images, failed)] = _tool_results(kernel, "ask")
    assert failed
    assert text == (
        "NotInWorkerError: input() is not available in a worker process: it has no connection "
        "to the notebook's frontend; put the value in the code instead"
    )


FAILING_DISPLAY = (
    "`py: from IPython.display import display; "
    "Bad = type('Bad', (), dict(_repr_html_=lambda self: 1 / 0, __repr__=lambda self: 'bad')); "
    "display(Bad()); print('went on')`"
)


def test_a_display_that_fails_in_a_worker_shows_its_error_and_the_code_goes_on(
    kernel: Kernel,
) -> None:
    # in a cell, IPython shows the formatter's traceback and the code goes on; in a worker it
    # stopped the code with NotInWorkerError (the traceback was to go out as a kernel message)
    setup(kernel)
    kernel.execute(f"%fork --name shows display {FAILING_DISPLAY}")
    kernel.run_approving("%tasks --wait shows", timeout=60)
    [(text, _images, failed)] = _tool_results(kernel, "shows")
    assert not failed, text
    assert "NotInWorkerError" not in text
    assert "ZeroDivisionError" in text and "went on" in text
    card = _card_text(kernel)
    assert "ZeroDivisionError" in card and "went on" in card
    assert "\x1b[" not in text  # the model reads plain text, no terminal colours


def test_a_figure_that_cannot_be_drawn_in_a_worker_shows_its_error_and_goes_on(
    kernel: Kernel,
) -> None:
    setup(kernel)
    kernel.execute("%matplotlib inline")
    kernel.execute(
        "%fork --name fig plots `py: import matplotlib.pyplot as plt; plt.plot([1, 2]); "
        "plt.title(r'$\\frac$'); plt.show(); print('went on')`"
    )
    kernel.run_approving("%tasks --wait fig", timeout=120)
    [(text, _images, failed)] = _tool_results(kernel, "fig")
    assert not failed, text
    assert "NotInWorkerError" not in text and "went on" in text
    assert "ValueError" in text, text
