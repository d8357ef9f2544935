"""JupyterLab in Debian Chromium (Python Playwright), with the emulator as the model.

One emulator, one `jupyter lab` server and one browser page per test module. The server's
environment points the kernels at the emulator. A module's SERVER_APP = "notebook" serves
Jupyter Notebook 7 (`python -m notebook`) in its place, with the same settings. Skipped when
Chromium or Playwright is missing, unless FORKAGENT_E2E=require.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchmarks.lab_server import CHROMIUM, CHROMIUM_ARGS, missing, serve
from benchmarks.lab_server import notebook_json as notebook_json
from forkagent_jupyter.emulator import Emulator

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = missing()
    for item in items:
        if not _is_browser(item):
            continue
        item.add_marker(pytest.mark.browser)
        if reason and os.environ.get("FORKAGENT_E2E") != "require":
            item.add_marker(pytest.mark.skip(reason=reason))


def _is_browser(item: pytest.Item) -> bool:
    return "tests/browser" in str(item.fspath).replace(os.sep, "/")


def pytest_collection_finish(session: pytest.Session) -> None:
    """A browser module is one person's session in steps: each test starts from the notebook
    the one before it left (cells run, a kernel restarted). Random ordering (pytest-randomly,
    which reorders during collection) keeps its place for the modules, but the steps inside
    each module run in file order again."""
    slots = [i for i, item in enumerate(session.items) if _is_browser(item)]
    modules: list[str] = []
    for i in slots:
        name = session.items[i].nodeid.split("::")[0]
        if name not in modules:
            modules.append(name)

    def step(item: pytest.Item) -> tuple[int, int]:
        line = item.reportinfo()[1] or 0
        return modules.index(item.nodeid.split("::")[0]), line

    ordered = sorted((session.items[i] for i in slots), key=step)
    for i, item in zip(slots, ordered, strict=True):
        session.items[i] = item


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    process: subprocess.Popen[bytes]
    log: Path
    app: str = "jupyterlab"

    def notebook_url(self, name: str) -> str:
        if self.app == "notebook":  # Notebook 7: one page per notebook
            return f"{self.url}/notebooks/{name}?token={self.token}"
        return f"{self.url}/lab/tree/{name}?token={self.token}&reset"


@pytest.fixture(scope="module")
def browser_emulator(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    """The model of the module's lab; a module's EMULATOR dict adds options (latency)."""
    with Emulator(strict=True, seed=0, **getattr(request.module, "EMULATOR", {})) as emu:
        yield emu
    emu.check()


@pytest.fixture(scope="module")
def lab(
    browser_emulator: Emulator,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Lab]:
    app = getattr(request.module, "SERVER_APP", "jupyterlab")  # or "notebook" (Notebook 7)
    base = tmp_path_factory.mktemp("lab")
    root, home, settings = base / "root", base / "home", base / "settings"
    apputils = settings / "@jupyterlab" / "apputils-extension"
    notebook = settings / "@jupyterlab" / "notebook-extension"
    for d in (root, home, apputils, notebook):
        d.mkdir(parents=True)
    # JupyterLab 4.6's default "perCommTarget" keeps a subshell id per comm target across a
    # kernel restart, and the new kernel drops comm messages sent to that unknown subshell
    # ("Cannot handle comm_msg: Unknown subshell_id"); one subshell per comm avoids that.
    (apputils / "kernels-settings.jupyterlab-settings").write_text(
        json.dumps({"commsOverSubshells": "perComm"})
    )
    # every cell in the DOM (no lazy rendering), so the tests can wait for cells by index
    (notebook / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    (apputils / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = dict(os.environ)
    env.update(
        ANTHROPIC_API_KEY="sk-" + "ant-" + "browser-test",
        ANTHROPIC_BASE_URL=browser_emulator.base_url,
        FORKAGENT_BACKEND="anthropic",
    )
    ARTIFACTS.mkdir(exist_ok=True)
    log = ARTIFACTS / f"{app}.log"
    with serve(app, base, env, log, start_timeout=60) as (url, token, proc):
        yield Lab(url, token, root, proc, log, app)


@pytest.fixture(scope="module")
def page(lab: Lab) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(60_000)
        pg = context.new_page()
        console: list[str] = []
        pg.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        try:
            yield pg
        finally:
            (ARTIFACTS / "console.log").write_text("\n".join(console))
            context.close()
            browser.close()


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and "page" in getattr(item, "funcargs", {}):
        try:
            shot(item.funcargs["page"], f"FAILED-{item.name}")
        except Exception:
            pass
        # what a CI log must carry to explain the failure: the cards as the page shows them,
        # and what the server and the kernel logged that was not routine
        try:
            cards = item.funcargs["page"].locator(".forkagent-card").all_inner_texts()
            report.sections.append(("the cards", "\n---\n".join(t[:600] for t in cards)))
        except Exception:
            pass
        lab = item.funcargs.get("lab")
        if isinstance(lab, Lab) and lab.log.exists():
            lines = lab.log.read_text(errors="replace").splitlines()
            unusual = [line for line in lines if not line.startswith("[I ")]
            report.sections.append(
                ("the server's log, but its [I] lines", "\n".join(unusual[-60:]))
            )


def cells(page: Any) -> Any:
    """The notebook's cells in the page."""
    return page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")


def run_cell(page: Any, index: int) -> None:
    """Run cell `index` as a user does: click into its editor, Ctrl+Enter."""
    cells(page).nth(index).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")


def open_notebook(lab: Lab, page: Any, name: str, notebook: dict[str, Any]) -> Any:
    """Write `notebook` as `name` in the lab's root, open it, and wait until its kernel is
    idle and the extension marked the panel; returns the page."""
    (lab.root / name).write_text(json.dumps(notebook))
    page.goto(lab.notebook_url(name))
    wait_kernel(page)
    return page


def wait_kernel(page: Any) -> None:
    """Wait until the notebook's kernel is idle and the extension marked its panel."""
    page.wait_for_selector(".jp-NotebookPanel[data-forkagent-kernel]", state="attached")
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", state="attached")


def load_and_greet(page: Any) -> Any:
    """Run the set-up cell (0), wait for the extension's comm, run the greeting `%%agent`
    cell (1) and wait for the offline model's answer; returns that cell's outputs."""
    run_cell(page, 0)
    # the kernel side exists now: the extension opens its comm after the cell ran
    page.wait_for_selector(".jp-NotebookPanel[data-forkagent-connected='2']", state="attached")
    run_cell(page, 1)
    answer = cells(page).nth(1).locator(".jp-OutputArea-output")
    answer.filter(has_text="I am the offline model of forkagent-jupyter").first.wait_for()
    return answer
