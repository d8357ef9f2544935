"""A large fan-out in JupyterLab in Chromium: does the page keep up?

One cell forks N quick workers (offline model; each runs `time.sleep(2); print(i)`;
`max_workers` 16) in a real JupyterLab (Debian Chromium, Python Playwright, the extension as
built in this checkout). The page is measured with the browser's long-task observer (main-thread
tasks over 50 ms) from the cell's run until every one of the N tasks shows "completed" on the
page (a card's status, or the count of a collapsed cards' summary row):

* `completed_s`: run to all N completed on the page;
* `lag_s`: the page showing all completed, after the kernel's last task ended (wall clocks of
  the same machine);
* long tasks: count, `blocked_s` (sum of their durations), `blocked_share` (of the run),
  `worst_ms`;
* `click_ms`: the slowest of a few clicks on a cell during the run (the Event Timing API:
  from the input to the next paint);
* after the run: `dom_nodes` (elements in the document), `js_heap_mb` (CDP), and the count of
  notification cells the fan-out added.

N = 10, 100, 300 and 1,000 (`--quick`: 10 and 40, the CI size). `--check` binds the larger
run against N = 10 of the same run (`BOUNDS`: ratios and counts, never this machine's absolute
times) and the issue's absolute targets where they are shares or counts. Timings on a shared
2-core machine are noisy: compare ratios within one run.

Skipped (exit 0, `skipped` in the JSON) when Chromium or Playwright is missing, unless
FORKAGENT_E2E=require.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.lab_server import CHROMIUM, CHROMIUM_ARGS, notebook_json, serve
from benchmarks.lab_server import missing as chromium_missing
from benchmarks.output import finish, options

SIZES = {"full": [10, 100, 300, 1000], "quick": [10, 40]}
SLEEP_S = 2.0
MAX_WORKERS = 16
# The goals for 300 workers, reported per row (`goals`), not bound: absolute times of a
# shared machine.
GOALS = {"blocked_share": 0.10, "worst_ms": 200, "lag_s": 2.0}
# --check: each larger run against N = 10 of the same run (ratios and differences, so a busy
# machine, which slows both, does not fail them; a regression that grows with N does).
BOUNDS = {
    # DOM elements after the run: cards past the visible ones collapse and notifications come
    # as one digest, so the page may grow by at most this share over N = 10's
    "dom_ratio": 1.5,
    # the share of the run the main thread spent in long tasks: at most this multiple of
    # N = 10's (or this floor: on a shared 2-core machine N = 10 alone measured 15-45 %)
    "blocked_share_ratio": 2.0,
    "blocked_share_floor": 0.30,
    # the worst long task: at most this multiple of N = 10's (or this floor); before the
    # cards collapsed, 100 workers had a 252 s task
    "worst_ratio": 5.0,
    "worst_floor_ms": 1000,
    # the page shows all completed at most this much later after the kernel's last task
    # ended than at N = 10 (the 2 s)
    "lag_extra_s": 2.0,
    # notification cells the fan-out adds: one digest
    "notification_cells": 1,
}

OBSERVER = """
(() => {
  window.__fa = { longtasks: [], events: [], done: null, t0: null };
  new PerformanceObserver(list => {
    for (const e of list.getEntries())
      window.__fa.longtasks.push([e.startTime, e.duration]);
  }).observe({ type: 'longtask', buffered: true });
  new PerformanceObserver(list => {
    for (const e of list.getEntries())
      if (e.name === 'pointerdown' || e.name === 'mousedown' || e.name === 'click')
        window.__fa.events.push([e.name, e.startTime, e.duration]);
  }).observe({ type: 'event', durationThreshold: 16, buffered: true });
})();
"""

# How many tasks the page shows as completed: cards whose status says so, plus the counts in
# the summary rows of collapsed cards.
COMPLETED = """
() => {
  let n = 0;
  for (const c of document.querySelectorAll('.jp-NotebookPanel .forkagent-card'))
    if (/\\bcompleted\\b/.test(c.querySelector('.widget-html-content, .widget-html')?.textContent
        ?? c.textContent)) n++;
  for (const s of document.querySelectorAll('.jp-NotebookPanel .forkagent-completed-count'))
    n += Number(s.textContent) || 0;
  return n;
}
"""

WATCH = """
([n, poll]) => {
  const count = COMPLETED;
  window.__fa.t0 = performance.now();
  window.__fa.t0wall = Date.now();
  const tick = () => {
    if (count() >= n) {
      window.__fa.done = performance.now();
      window.__fa.doneWall = Date.now();
    } else {
      setTimeout(tick, poll);
    }
  };
  setTimeout(tick, poll);
}
""".replace("COMPLETED", COMPLETED.strip())


def notebook(n: int) -> dict[str, Any]:
    directives = (
        f"[f'worker {{i}} `py: import time; time.sleep({SLEEP_S}); print({{i}})`'"
        f" for i in range({n})]"
    )
    sources = [
        f"%load_ext forkagent_jupyter\n%config ForkAgent.max_workers = {MAX_WORKERS}\n"
        "from forkagent_jupyter.kernel import api\napi.allow('Python')",
        "import asyncio, json, time\n"
        "from forkagent_jupyter.kernel import api\n"
        f"fan = await api.fan_out({directives})\n"
        "async def _record():\n"
        "    await api.session().wait(*(t.id for t in fan.tasks), timeout=3600)\n"
        "    ended = max(t.ended_at or time.time() for t in fan.tasks)\n"
        "    statuses = [t.status for t in fan.tasks]\n"
        "    with open('kernel_done.json', 'w') as f:\n"
        "        json.dump({'ended': ended, 'completed': statuses.count('completed')}, f)\n"
        "_recorder = asyncio.ensure_future(_record())",
    ]
    return notebook_json(sources)


@contextlib.contextmanager
def lab(base: Path, app: str = "jupyterlab") -> Iterator[tuple[str, str, Path]]:
    """A Jupyter server (JupyterLab or Notebook 7) with this checkout's package and extension;
    yields (url, token, root)."""
    root, home, settings = base / "root", base / "home", base / "settings"
    apputils = settings / "@jupyterlab" / "apputils-extension"
    for d in (root, home, apputils):
        d.mkdir(parents=True)
    (apputils / "kernels-settings.jupyterlab-settings").write_text(
        json.dumps({"commsOverSubshells": "perComm"})
    )
    (apputils / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = dict(os.environ)
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        env.pop(key, None)
    env["FORKAGENT_BACKEND"] = "offline"
    with serve(app, base, env, base / "server.log", start_timeout=90) as (url, token, _):
        yield url, token, root


def _run_cell(page: Any, index: int) -> None:
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index).locator(
        ".jp-InputArea-editor"
    ).click()
    page.keyboard.press("Control+Enter")


def measure(
    n: int, timeout: float, app: str = "jupyterlab", profile: Path | None = None
) -> dict[str, Any]:
    """One fan-out of `n` workers in a fresh server and page."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, lab(Path(tmp), app) as (url, token, root):
        name = "fanout.ipynb"
        (root / name).write_text(json.dumps(notebook(n)))
        path = "notebooks" if app == "notebook" else "lab/tree"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                context.set_default_timeout(120_000)
                page = context.new_page()
                page.add_init_script(OBSERVER)
                page.goto(f"{url}/{path}/{name}?token={token}")
                page.wait_for_selector(".jp-NotebookPanel[data-forkagent-kernel]", state="attached")
                page.wait_for_selector(
                    ".jp-Notebook-ExecutionIndicator[data-status='idle']", state="attached"
                )
                _run_cell(page, 0)
                page.wait_for_selector(
                    ".jp-NotebookPanel[data-forkagent-connected]", state="attached"
                )
                page.wait_for_function(
                    "() => document.querySelector('.jp-Cell .jp-InputPrompt')"
                    "?.textContent.includes('[1]')"
                )
                cells_before = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").count()
                page.evaluate(WATCH, [n, 100])
                profiler = None
                if profile is not None:  # a CPU profile of the page during the run
                    profiler = context.new_cdp_session(page)
                    profiler.send("Profiler.enable")
                    profiler.send("Profiler.start")
                start = time.monotonic()
                _run_cell(page, 1)
                clicks = 0
                while page.evaluate("() => window.__fa.done") is None:
                    if time.monotonic() - start > timeout:
                        page.screenshot(
                            path=str(Path(tempfile.gettempdir()) / "browser_fanout.png")
                        )
                        raise TimeoutError(
                            f"{n} workers: {page.evaluate(COMPLETED)} completed on the page "
                            f"after {timeout:.0f} s"
                        )
                    time.sleep(2.0)
                    # a person clicks on the first cell meanwhile (Event Timing measures it)
                    prompt = page.locator(".jp-NotebookPanel .jp-Cell .jp-InputPrompt").first
                    with contextlib.suppress(Exception):
                        prompt.click(timeout=30_000)
                        clicks += 1
                fa = page.evaluate("() => window.__fa")
                if profiler is not None and profile is not None:
                    cpu = profiler.send("Profiler.stop")["profile"]
                    profile.write_text(json.dumps(cpu))
                kernel_file = root / "kernel_done.json"
                deadline = time.monotonic() + 60
                while not kernel_file.exists() and time.monotonic() < deadline:
                    time.sleep(0.2)
                kernel = json.loads(kernel_file.read_text()) if kernel_file.exists() else {}
                time.sleep(1.0)  # notification cells of the last tasks
                cdp = context.new_cdp_session(page)
                cdp.send("Performance.enable")
                metrics = {
                    m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]
                }
                dom = page.evaluate("() => document.getElementsByTagName('*').length")
                cells_after = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").count()
            finally:
                browser.close()
    t0, done = fa["t0"], fa["done"]
    window = [(s, d) for s, d in fa["longtasks"] if s + d >= t0 and s <= done]
    blocked = sum(d for _, d in window) / 1000
    run_s = (done - t0) / 1000
    clicks_ms = [d for _, s, d in fa["events"] if s >= t0]
    lag = fa["doneWall"] / 1000 - kernel["ended"] if kernel else None
    return {
        "workers": n,
        "app": app,
        "completed_s": round(run_s, 2),
        "kernel_completed": kernel.get("completed"),
        "lag_s": round(lag, 2) if lag is not None else None,
        "long_tasks": len(window),
        "blocked_s": round(blocked, 2),
        "blocked_share": round(blocked / run_s, 3) if run_s else None,
        "worst_ms": round(max((d for _, d in window), default=0.0)),
        # when the worst task started, seconds into the run
        "worst_at_s": round((max(window, key=lambda w: w[1])[0] - t0) / 1000, 2)
        if window
        else None,
        "long_tasks_ms": [[round((s - t0) / 1000, 2), round(d)] for s, d in window],
        "clicks": clicks,
        "click_ms": round(max(clicks_ms, default=0.0)),
        "dom_nodes": dom,
        "dom_nodes_cdp": int(metrics.get("Nodes", 0)),
        "js_heap_mb": round(metrics.get("JSHeapUsedSize", 0) / 1e6, 1),
        "notification_cells": cells_after - cells_before,
    }


def goals(row: dict[str, Any]) -> dict[str, bool]:
    """Which of the issue's goals (`GOALS`) the run met."""
    return {
        "blocked_share": row["blocked_share"] <= GOALS["blocked_share"],
        "worst_ms": row["worst_ms"] <= GOALS["worst_ms"],
        "lag_s": row["lag_s"] is not None and row["lag_s"] <= GOALS["lag_s"],
    }


def check(rows: list[dict[str, Any]]) -> list[str]:
    failures = []
    base = next((r for r in rows if r["workers"] == 10), None)
    for r in rows:
        n = r["workers"]
        if r["kernel_completed"] != n:
            failures.append(f"N={n}: {r['kernel_completed']} of {n} completed in the kernel")
        if base is None or r is base:
            continue
        if r["dom_nodes"] > base["dom_nodes"] * BOUNDS["dom_ratio"]:
            failures.append(
                f"N={n}: {r['dom_nodes']} DOM elements > {BOUNDS['dom_ratio']} x N=10's "
                f"{base['dom_nodes']}"
            )
        share = max(
            BOUNDS["blocked_share_floor"], base["blocked_share"] * BOUNDS["blocked_share_ratio"]
        )
        if r["blocked_share"] > share:
            failures.append(
                f"N={n}: main thread blocked {r['blocked_share']:.0%} of the run > {share:.0%}"
            )
        worst = max(BOUNDS["worst_floor_ms"], base["worst_ms"] * BOUNDS["worst_ratio"])
        if r["worst_ms"] > worst:
            failures.append(f"N={n}: worst long task {r['worst_ms']} ms > {worst:.0f} ms")
        if r["lag_s"] is not None and base["lag_s"] is not None:
            lag = base["lag_s"] + BOUNDS["lag_extra_s"]
            if r["lag_s"] > lag:
                failures.append(f"N={n}: page completed {r['lag_s']} s after the kernel > {lag}")
        if r["notification_cells"] > BOUNDS["notification_cells"]:
            failures.append(f"N={n}: {r['notification_cells']} notification cells added")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = options(__doc__, quick="N = 10 and 40 (CI size)")
    parser.add_argument("--workers", type=int, nargs="*", help="fan-out sizes (N = 10 first)")
    parser.add_argument("--app", choices=["jupyterlab", "notebook"], default="jupyterlab")
    parser.add_argument("--timeout", type=float, default=900.0, help="per size, seconds")
    parser.add_argument(
        "--profile", type=Path, help="write the page's CPU profile of each run (N.cpuprofile)"
    )
    ns = parser.parse_args(argv)
    missing = chromium_missing()
    if missing and os.environ.get("FORKAGENT_E2E") != "require":
        result: dict[str, Any] = {"benchmark": "browser_fanout", "skipped": missing}
        return finish("browser_fanout", result, ns.out, ns.check)
    sizes = ns.workers or SIZES["quick" if ns.quick else "full"]
    rows = []
    for n in sizes:
        print(f"browser_fanout: {n} workers ...", file=sys.stderr, flush=True)
        where = ns.profile / f"{n}.cpuprofile" if ns.profile else None
        if where is not None:
            where.parent.mkdir(parents=True, exist_ok=True)
        row = measure(n, ns.timeout, ns.app, where)
        rows.append({**row, "goals": goals(row)})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    result = {
        "benchmark": "browser_fanout",
        "quick": ns.quick,
        "app": ns.app,
        "sleep_s": SLEEP_S,
        "max_workers": MAX_WORKERS,
        "bounds": BOUNDS,
        "goals": GOALS,
        "rows": rows,
    }
    result["failures"] = check(rows)
    return finish("browser_fanout", result, ns.out, ns.check)


if __name__ == "__main__":
    sys.exit(main())
