"""The example notebooks, each executed end to end in a real kernel (nbclient)."""

from __future__ import annotations

import ast
import base64
import importlib.resources
import json
import os
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from tests.reported import tool_outputs

from .conftest import NOTEBOOKS, Executed

pytestmark = pytest.mark.kernel

RunNotebook = Callable[..., Executed]


def test_committed_notebooks_have_no_outputs() -> None:
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert "01_fan_out.ipynb" in names
    for name in names:
        nb = json.loads((NOTEBOOKS / name).read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [], f"{name}: a cell has outputs"
                assert cell["execution_count"] is None, f"{name}: a cell has an execution count"


def test_notebooks_say_how_to_run_with_a_key() -> None:
    for path in NOTEBOOKS.glob("*.ipynb"):
        first = json.loads(path.read_text())["cells"][0]
        assert "ANTHROPIC_API_KEY" in "".join(first["source"]), path.name
        assert "offline" in "".join(first["source"]), path.name


def _cost_rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] in ("parent", "profile", "outliers", "correlations", "plot", "total"):
            rows[parts[0]] = parts
    return rows


def test_every_notebook_has_a_papermill_parameters_cell() -> None:
    for path in NOTEBOOKS.glob("*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, path.name
        source = "".join(tagged[0]["source"])
        assert 'max_cost_usd: "Optional[float]" = None' in source, path.name
        assert 'model: str = ""' in source, path.name


def test_papermill_reads_every_parameter(caplog: pytest.LogCaptureFixture) -> None:
    """papermill's own parser (`papermill --help-notebook`) finds every name the parameters
    cell assigns, with its type and help, and warns about no line."""
    papermill = pytest.importorskip("papermill")
    for path in NOTEBOOKS.glob("*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        [cell] = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
        assigned = re.findall(r"^(\w+)\s*[:=]", "".join(cell["source"]), re.MULTILINE)
        caplog.clear()
        found = papermill.inspect_notebook(str(path))
        assert list(found) == assigned, path.name
        assert all(p["inferred_type_name"] != "None" and p["help"] for p in found.values())
        assert "Unable to parse" not in caplog.text, caplog.text


def _with_parameters(name: str, **values: object) -> nbformat.NotebookNode:
    """The notebook as papermill runs it with `-p NAME VALUE`: a cell after the parameters cell
    that sets the values."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    [at] = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    source = "\n".join(f"{k} = {v!r}" for k, v in values.items())
    injected = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(at + 1, injected)
    nb.cells.append(nbformat.v4.new_code_cell("print('budget', api.session().max_cost_usd)"))
    return nb


def test_fan_out(run_notebook: RunNotebook) -> None:
    ran = run_notebook(_with_parameters("01_fan_out.ipynb", max_cost_usd=25.0))
    assert ran.text("print('budget'") == "budget 25.0\n"  # the parameter took effect
    print(f"01_fan_out.ipynb executed in {ran.seconds:.1f} s")
    # the parent ran its inspection through the Python tool, in the kernel
    inspect = ran.text("%%agent\n`df`")
    assert "**Python**" in inspect and "(344, 8)" in inspect
    assert "\\n" not in inspect  # the summary table printed, not a string's repr
    assert "cache write" in inspect
    # four live cards in the fork cell, all finished
    cards = ran.cards("%fork")
    assert len(cards) == 4 and all(">completed<" in c for c in cards), cards
    # no JupyterLab extension here: the notifications and the answer fill the fork cell's area
    assert ran.text("%fork").count("<task-notification>") == 4
    table = ran.text("%tasks --wait")
    assert table.count("<td>completed</td>") == 4
    # the fan-out on a time axis: a PNG, a lane per agent and a request bar per request
    [image] = _images(ran, "%tasks --timeline")
    assert image.startswith(b"\x89PNG") and "5 lanes" in ran.text("%tasks --timeline")
    # every worker's notification reached the parent, which answered them
    notes = ran.text("api.notifications()")
    assert notes.count("<task-notification>") == 4
    assert notes.count("<status>completed</status>") == 4
    assert "reported back" in notes
    # the workers' findings are real: computed from the shipped CSV
    csv = importlib.resources.files("palmerpenguins") / "data" / "penguins.csv"
    df = pd.read_csv(str(csv))
    r = df["flipper_length_mm"].corr(df["body_mass_g"])
    findings = ran.workdir / "findings"
    assert (
        f"flipper_length_mm ~ body_mass_g: r = {r:+.2f}"
        in (findings / "correlations.md").read_text()
    )
    assert (findings / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        f"| sex | {df['sex'].dtype} | {df['sex'].isna().sum()} |"
        in (findings / "profile.md").read_text()
    )
    synthesis = (findings / "synthesis.md").read_text()
    assert all(f"## {n}" in synthesis for n in ("profile", "outliers", "correlations", "plot"))
    # the plot worker's figure is on its card (saved with the notebook's widget state), and
    # the correlations worker's frame came back only when pulled
    state = ran.nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    card_outputs = [
        o
        for model in state.values()
        if "forkagent-worker-output" in model["state"].get("_dom_classes", [])
        for o in model["state"].get("outputs", [])
    ]
    pngs = [o for o in card_outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1, card_outputs
    pulled = ran.text("%tasks --pull correlations corr")
    assert "pulled from correlations: corr (DataFrame 4x4)" in pulled
    assert "flipper_length_mm" in pulled and f"{r:.2f}" in pulled
    # costs: every worker read the shared prefix from the cache, which made the run cheaper
    rows = _cost_rows(ran.text("print(api.costs()"))
    assert set(rows) == {"parent", "profile", "outliers", "correlations", "plot", "total"}
    for name in ("profile", "outliers", "correlations", "plot"):
        prompt, read = (int(x.replace(",", "")) for x in rows[name][2:4])
        assert read > prompt / 2, rows[name]
    cost, uncached = float(rows["total"][-2]), float(rows["total"][-1])
    assert 0 < cost < uncached
    saved = re.search(r"\((\d+)% saved\)", ran.text("print(api.costs()"))
    assert saved and int(saved.group(1)) > 0


def _images(ran: Executed, starts: str) -> list[bytes]:
    """The PNGs a cell showed."""
    outputs = ran.cell(starts).outputs
    return [
        base64.b64decode(o["data"]["image/png"])
        for o in outputs
        if "image/png" in o.get("data", {})
    ]


def test_permissions(run_notebook: RunNotebook) -> None:
    ran = run_notebook("03_permissions.ipynb")
    print(f"03_permissions.ipynb executed in {ran.seconds:.1f} s")
    # the Write waited on the writer's card, shown as a diff; then the Bash call
    first = ran.text('[write] = await api.wait_pending("writer")')
    assert "Write wants approval" in first and "+3 species, 344 rows" in first
    second = ran.text('api.answer("allow", task="writer")')
    assert "Bash wants approval" in second and "wc -c summary.txt" in second
    # allowed once, then for the session: the file is real and the rule was added
    assert (ran.workdir / "summary.txt").read_text() == "3 species, 344 rows\n"
    assert "['Bash(wc -c summary.txt)']" in ran.text('api.answer("always"')
    # the next worker ran the same command by that rule, without asking
    checker = ran.text("%fork --name checker")
    assert "approvals asked: 0" in checker and "Bash allow by rule Bash(wc -c" in checker
    # the denial reached the model with its reason, and the command did not run
    deleter = ran.text("%fork --name deleter")
    assert "summary.txt still there: True" in deleter
    assert "**Bash** failed" in deleter and "keep it, the report needs it" in deleter
    # plan mode: reading allowed, writing denied with the plan-mode message, nobody asked
    planner = ran.text('api.session().gate.mode = "plan"')
    assert "**Read** returned" in planner
    assert "Write is not available in plan mode" in planner
    assert "summary.txt unchanged: True" in planner
    # a deny rule: nobody asked, the model told why, the file kept
    denied = ran.text('api.deny("Bash(rm:*)")')
    assert "approvals asked: 0" in denied and "summary.txt still there: True" in denied
    assert "**Bash** failed" in denied and "Bash(rm:*)" in denied
    log = ran.text("for e in api.session().gate.log")
    assert [line.split()[:4] for line in log.splitlines()] == [
        ["Write", "allow", "by", "policy"],
        ["Bash", "allow", "by", "policy"],
        ["Bash", "allow", "by", "rule"],
        ["Bash", "deny", "by", "policy"],
        ["Read", "allow", "by", "no-approval"],
        ["Write", "deny", "by", "mode"],
        ["Bash", "deny", "by", "rule"],
    ]


def test_how_forking_works(run_notebook: RunNotebook) -> None:
    ran = run_notebook("02_how_forking_works.ipynb")
    print(f"02_how_forking_works.ipynb executed in {ran.seconds:.1f} s")
    assert "requests go to the emulator" in ran.text("import os")
    side = ran.text("def first_request")
    shared = re.search(r"identical for the first ([\d,]+) bytes \(([\d.]+)% of the first\)", side)
    assert shared and float(shared.group(2)) > 90
    assert re.search(r"total: .*\| Compute the total sales", side)
    assert re.search(r"best: .*\| Find the best month", side)
    marks = ran.text("for name, body in")
    assert marks.count("(shared with the sibling)") >= 4 and marks.count("(this fork only)") == 2
    # the server's ledger: the second sibling read more from the cache than the first wrote
    rows = {}
    for line in ran.text("if emulator is None").splitlines()[1:]:
        parts = line.split()
        rows.setdefault(parts[1], []).append([int(x.replace(",", "")) for x in parts[2:5]])
    assert set(rows) == {"parent", "total", "best"}
    first_total, first_best = rows["total"][0], rows["best"][0]
    assert first_best[2] > first_total[2] > 0  # cache reads
    assert first_best[1] < first_total[1]  # cache writes
    assert "saved)" in ran.text("print(api.costs()")
    # the two forks on a time axis; the lead's write and who read it
    [image] = _images(ran, "%tasks --timeline total best")
    assert image.startswith(b"\x89PNG")
    led = re.search(
        r"(total|best) led: its cache write \(([\d,]+) tokens\).*read by (\w+)",
        ran.text("%tasks --timeline total best"),
    )
    assert led and {led[1], led[3]} == {"total", "best"}
    # with and without staggering: one write and three reads against four writes
    compared = ran.text("from IPython.display import Image")
    numbers = {
        line[:26].strip(): line[26:].split()
        for line in compared.splitlines()
        if line.startswith(("cache write", "cache read", "cost"))
    }
    writes = [int(x.replace(",", "")) for x in numbers["cache write (tokens)"]]
    reads = [int(x.replace(",", "")) for x in numbers["cache read (tokens)"]]
    costs = [float(x) for x in numbers["cost ($)"]]
    assert 2 * writes[0] < writes[1] and reads[0] > reads[1] and costs[0] < costs[1]
    assert len(_images(ran, "from IPython.display import Image")) == 2
    states = ran.text("from typing import get_args")
    assert "terminal: ['completed', 'failed', 'killed']" in states
    assert "total: completed, run 1" in states
    note = ran.text("print(t.notification)")
    assert note.startswith("<task-notification>") and "<status>completed</status>" in note
    resumed = ran.text("%send total")
    rng = random.Random(7)  # the notebook's data, made again here
    sales = {i: [rng.randint(50, 500) for _ in range(12)] for i in range(40)}
    assert "total: completed, run 2" in resumed
    assert f"\n{sum(sum(v) for v in sales.values())}\n" in resumed
    # one compaction: the history before and after, the summary request and its cost
    before = ran.text("def show_history")
    assert re.search(r"context: [\d,]+ of [\d,]+ tokens \(compact_at 0.8\)", before)
    compacted = ran.text("%compact --keep 1")
    assert "Compacted the conversation" in compacted and "summary request:" in compacted
    request = ran.text("def is_summary")
    same = re.search(r"for the first ([\d,]+) of its ([\d,]+) bytes", request)
    assert same and int(same[1].replace(",", "")) > 0.9 * int(same[2].replace(",", ""))
    assert "<compaction-request>" in request
    billed = re.search(
        r"billed: ([\d,]+) uncached, ([\d,]+) cache write, ([\d,]+) cache read", request
    )
    assert billed
    uncached, written, read = (int(x.replace(",", "")) for x in billed.groups())
    assert read > 10 * (uncached + written)  # the summary read the conversation from cache
    after = ran.text("show_history(session.messages)")
    rows = [line for line in after.splitlines() if re.match(r"^\s*\d+ (user|assistant) ", line)]
    rows_before = [
        line for line in before.splitlines() if re.match(r"^\s*\d+ (user|assistant)", line)
    ]
    assert 0 < len(rows) < len(rows_before)
    assert "<conversation-summary>" in after
    assert "(total): completed" in after and "(best): completed" in after  # task ids kept
    # forks in a turn with thinking on: the parent's exact parameter, its thinking block cloned
    thought = ran.text("%tasks --wait")
    param = "{'type': 'enabled', 'budget_tokens': 2048}"
    assert f"thinking parameter: parent {param} | forks {param} {param}" in thought
    assert "the cloned message's blocks: thinking, text, tool_use, tool_use" in thought
    assert "unchanged in the second fork: True" in thought
    assert "the thinking block is inside the shared prefix: True" in thought
    # a 200 MB frame in the kernel: a worker that reads it shares it, one that rebinds the name
    # holds its new frame alone, and the kernel's frame is unchanged
    assert "the kernel holds frame: 1,310,720 x 20, 200 MB" in ran.text("import numpy as np")
    view = ran.cell("%fork --name reader").outputs
    table = next(o.data["text/plain"] for o in view if "Worker processes" in str(o.get("data")))
    assert "own = Private_Clean + Private_Dirty" in table
    pids = re.findall(r"^(?:reader|rebinder) +completed +(\d+) ", table, re.MULTILINE)
    assert len(set(pids)) == 2, table
    assert re.search(r"^rebinder .* frame \(DataFrame, 200\.0 MB\)", table, re.MULTILINE), table
    numbers = ran.text("session = api.session()")
    memory = {
        m[0]: (float(m[1].replace(",", "")), float(m[2].replace(",", "")))
        for m in re.findall(r"(reader|rebinder): own +([\d,]+) MB +shared +([\d,]+) MB", numbers)
    }
    assert set(memory) == {"reader", "rebinder"}, numbers
    assert memory["reader"][1] > 190 and memory["reader"][0] < 60, memory  # the frame, shared
    assert memory["rebinder"][0] > 190, memory  # its doubled frame is its own
    first = re.search(r"frame.iloc\[0, 0\]: ([\d.]+) in the kernel, ([\d.]+) in rebinder", numbers)
    assert first and abs(2 * float(first[1]) - float(first[2])) < 1e-5, numbers


def test_your_own_agents(run_notebook: RunNotebook, tmp_path: Path) -> None:
    shutil.copy(NOTEBOOKS / "mcp_sqlite_server.py", tmp_path)  # shipped beside the notebook
    ran = run_notebook("04_your_own_agents.ipynb")
    print(f"04_your_own_agents.ipynb executed in {ran.seconds:.1f} s")
    defn = ran.text("%load_ext forkagent_jupyter")
    assert "\nreviewer - Reviews Python code" in f"\n{defn}"  # after %load_ext's line
    assert "mode: acceptEdits | background: True | isolation: worktree" in defn
    # the parent started the named agent in the background; its card showed in that cell
    started = ran.text("%%agent\nAsk the reviewer")
    assert "**Agent**" in started and "Started background agent" in started
    assert [c for c in ran.cards("%%agent\nAsk the reviewer") if "<b>rev</b>" in c]
    # the parent chose from the agent types it was told, at the head of its turn
    told = ran.text("# what the parent was told")
    assert "- reviewer: Reviews Python code" in told and "- general-purpose: " in told
    assert "runs in the background" in told
    done = ran.text("%tasks --wait")
    assert "reviewer completed" in done
    repo = ran.workdir / "shop"
    worktree = repo / ".forkagent" / "worktrees"
    assert f"worktree: {worktree}/agent-" in done and "branch:   forkagent/agent-" in done
    # the fix is in the kept worktree, on its branch; the user's checkout is untouched
    [kept] = list(worktree.glob("agent-*"))
    assert "return total / len(xs)" in (kept / "calc.py").read_text()
    assert "return total / (len(xs) - 1)" in (repo / "calc.py").read_text()
    # the reviewer's own Stop hook (its file's front matter) saw its end and its result
    logged = ran.text("# the hook's log")
    assert "reviewer completed: " in logged and "hook problems: []" in logged
    assert " 0 characters" not in logged
    shown = ran.text('print(git("diff", cwd=rev.worktree_path))')
    assert "+    return total / len(xs)" in shown and "your status: clean" in shown
    note = ran.text("api.notifications()")
    assert "<status>completed</status>" in note and "<worktreeBranch>forkagent/agent-" in note
    # the analyst's own MCP server (a real MCPServer over SQLite): started with it, its tool
    # called, stopped when it ended
    assert "analyst | tools: ['mcp__sales'] | required: ['sales']" in ran.text("import sqlite3")
    # the analyst's file is the project's: its own server runs because the notebook approved it
    assert "MCP server 'sales' approved in .claude/settings.local.json" in ran.text(
        "# the analyst's own server"
    )
    own = json.loads((ran.workdir / "shop" / ".claude" / "settings.local.json").read_text())
    assert own["enabledMcpjsonServers"] == ["sales"]  # the reviewer's hook approved there too
    [approved] = own["enabledProjectHooks"]
    assert approved.endswith(" .forkagent/hooks/log_review.py"), approved
    asked = ran.text("%%agent\nAsk the analyst")
    assert "Started background agent" in asked
    answered = ran.text("%tasks --wait ana")
    assert "analyst completed" in answered
    assert "called mcp__sales__query {'sql': 'SELECT region, SUM(amount)" in answered
    assert "region | total\nsouth | 355.0\nnorth | 200.5\nwest | 150.0\neast | 95.25" in answered
    assert "its servers now: []" in answered
    # a `context: fork` command the notebook wrote: listed, run in a fork with a card, its
    # report the cell's output and the command's output in the conversation
    listed = ran.text("%commands")
    assert "/review-totals [region]" in listed
    assert "[fork; project command, .claude/commands/review-totals.md]" in listed
    reviewed = ran.text("%%agent /review-totals south")
    assert reviewed.startswith("Scope: Check the sales total of south")
    assert tool_outputs(reviewed) == ["355.0", "0.443"], reviewed
    [card] = ran.cards("%%agent /review-totals")
    assert "fork · /review-totals south" in card and ">completed<" in card, card
    kept = ran.text("# the command's output")
    assert kept.startswith("/review-totals south \n\n<local-command-stdout>\nScope:"), kept


def test_fan_out_on_a_dask_cluster(run_notebook: RunNotebook) -> None:
    """The same notebook with `executor = "dask"` (its papermill parameters): the workers'
    code runs in processes on a real LocalCluster; cards, the figure and the pull as locally."""
    if not os.environ.get("CI"):  # CI installs the [dask] extra: there a missing one fails
        pytest.importorskip("distributed")
    from tests.dask_cluster import cluster

    with cluster() as address:
        nb = _with_parameters("01_fan_out.ipynb", executor="dask", dask_address=address)
        nb.cells.append(
            nbformat.v4.new_code_cell(
                "dask = api.session().compute.dask\n"
                "print('on the cluster:', sorted({r.where.split(':')[0] for r in dask.runners"
                " if r.where}), len([r for r in dask.runners if r.where]))"
            )
        )
        ran = run_notebook(nb, timeout=180)
    cards = ran.cards("%fork")
    assert len(cards) == 4 and all(">completed<" in c for c in cards), cards
    placed = ran.text("dask = api.session().compute.dask")
    assert placed.startswith("on the cluster: ['tcp") and placed.rstrip().endswith(" 4"), placed
    state = ran.nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    pngs = [
        o
        for model in state.values()
        if "forkagent-worker-output" in model["state"].get("_dom_classes", [])
        for o in model["state"].get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    assert len(pngs) == 1  # the plot worker's figure came back from the cluster to its card
    pulled = ran.text("%tasks --pull correlations corr")
    assert "pulled from correlations: corr (DataFrame 4x4)" in pulled
    assert (ran.workdir / "findings" / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_teams(run_notebook: RunNotebook) -> None:
    ran = run_notebook("05_teams.ipynb")
    print(f"05_teams.ipynb executed in {ran.seconds:.1f} s")
    formed = ran.text("%%agent\nForm a team")
    assert "status: teammate_spawned" in formed and "team_name: analysts" in formed
    assert "name: ana\n" in formed and "name: bob\n" in formed
    # both cards in the team's box, under its roster
    cards = ran.cards("%%agent\nForm a team")
    assert [c for c in cards if "<b>ana</b>" in c] and [c for c in cards if "<b>bob</b>" in c]
    waited = ran.text("%tasks --wait")
    assert "team analysts · ana idle, bob idle" in waited
    # bob's message reached ana's mailbox, signed by bob; the person's reached bob as "user"
    told = ran.text('%tasks --wait\nprint(mailbox("ana"))')
    assert "from bob: The south sold 367.5 in all." in told
    reported = ran.text("%tasks --wait\nfor t in")
    assert "ana running idle" in reported and "bob running idle" in reported
    assert 'from user: call: SendMessage {"to": "team-lead"' in reported
    stopped = ran.text("%stop team:analysts")
    assert "stopping team analysts (2 teammate(s))" in stopped
    ended = ran.text("%tasks --wait\nprint({t.name").rsplit("\n{", 1)[1]
    assert ast.literal_eval("{" + ended.strip()) == {"ana": "killed", "bob": "killed"}
