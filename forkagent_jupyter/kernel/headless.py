"""`forkagent demo`: the fan-out example notebook, executed headless in a real kernel.

The notebook runs with nbclient in a fresh kernel (in a temporary work directory, so its
findings and transcripts do not land in the current one); the executed copy is written to
`out`; then the same kernel is asked for the session's cost report, which is printed.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["DEMO_NOTEBOOK", "find_notebook", "run_demo"]

DEMO_NOTEBOOK = "01_fan_out.ipynb"

_REPORT_CELL = (
    "import json as _json\n"
    "from forkagent_jupyter.kernel import api as _api\n"
    "_s = _api.session()\n"
    "print(_json.dumps({'backend': _s.backend, 'costs': _api.costs().to_dict()}))"
)


def find_notebook(name: str = DEMO_NOTEBOOK) -> Path:
    """The example notebook: shipped in the package, or in the source checkout."""
    here = Path(__file__).resolve().parents[1]
    for path in (here / "examples" / name, here.parent / "example_notebooks" / name):
        if path.is_file():
            return path
    raise FileNotFoundError(f"example notebook {name} not found (looked beside {here})")


def _missing_extras() -> list[str]:
    import importlib.util

    wanted = ("nbclient", "nbformat", "pandas", "matplotlib", "palmerpenguins")
    return [m for m in wanted if importlib.util.find_spec(m) is None]


def run_demo(out: Path, backend: str = "offline", timeout: int = 300) -> dict[str, Any]:
    """Execute the fan-out notebook, write the executed copy to `out`, return the report."""
    missing = _missing_extras()
    if missing:
        raise RuntimeError(
            f"the demo needs {', '.join(missing)}: pip install -e '.[examples]' "
            "(or pip install 'forkagent-jupyter[examples]')"
        )
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(find_notebook(), as_version=4)  # type: ignore[no-untyped-call]
    env = dict(os.environ, FORKAGENT_BACKEND=backend)
    source_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source_root, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="forkagent-demo-") as workdir:
        client = NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": workdir}}
        )
        with client.setup_kernel(env=env, cwd=workdir):
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
            nb.cells.append(nbformat.v4.new_code_cell(_REPORT_CELL))  # type: ignore[no-untyped-call]
            try:
                client.execute_cell(nb.cells[-1], len(nb.cells) - 1)
            finally:
                extra = nb.cells.pop()
            client.set_widgets_metadata()  # the cards, in their final state, saved with it
        text = "".join(o.get("text", "") for o in extra.outputs if o.output_type == "stream")
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)  # type: ignore[no-untyped-call]
    report: dict[str, Any] = json.loads(text.strip().splitlines()[-1])
    return report


def format_report(report: dict[str, Any], out: Path) -> str:
    costs = report["costs"]
    tasks = [a for a in costs["agents"] if a["name"] != "parent"]
    total = costs["total"]
    done = sum(1 for a in tasks if a["status"] == "completed")
    lines = [
        f"executed {DEMO_NOTEBOOK} on the {report['backend']} backend ({costs['model']}): "
        f"wrote {out}",
        f"tasks: {len(tasks)} forks, {done} completed",
    ]
    parent = [a for a in costs["agents"] if a["name"] == "parent"]
    for a in [*parent, *tasks]:  # the parent's turns too: its answers to the notifications
        status = "-" if a["name"] == "parent" else a["status"]
        lines.append(
            f"  {a['name']:<13} {status:<9} {a['total_input_tokens']:>7,} prompt tokens, "
            f"{a['cache_hit_ratio']:.0%} from cache, ${a['cost_usd']:.5f}"
        )
    lines += [
        f"tokens: {total['total_input_tokens']:,} prompt "
        f"({total['cache_read_input_tokens']:,} cache read, "
        f"{total['cache_creation_input_tokens']:,} cache write), "
        f"{total['output_tokens']:,} output",
        f"cache hit ratio: {total['cache_hit_ratio']:.0%}",
        f"cost: ${total['cost_usd']:.5f}; without the shared prompt cache: "
        f"${total['uncached_cost_usd']:.5f} ({costs['saving']:.0%} saved)",
    ]
    if report["backend"] == "offline":
        lines.append(
            f"offline: the costs are simulated at {costs['model']}'s list prices from the "
            "offline model's token counts; nothing was charged. The parent answers the "
            "workers' notifications as they arrive, several in one turn when they come "
            "together, so its row (and the totals) can differ a little between runs; each "
            "worker's row does not."
        )
    return "\n".join(lines)
