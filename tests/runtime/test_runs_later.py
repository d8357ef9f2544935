"""Files that run later without anyone choosing to run them (`.git/`, `ipykernel_launcher.py`,
IPython's startup folder, shell start-up files, ...) are always asked, in every mode, through
the real gate and tools: the attacks of the issue (a file the model writes unasked in
`acceptEdits` that git, a restarted kernel or IPython later runs with the API key) are refused
where nobody answers and put to the person where someone does."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.runtime.permissions.gate import Allow, Deny, ScriptedPolicy
from forkagent_jupyter.runtime.tools.base import Tool, ToolContext
from forkagent_jupyter.runtime.tools.files import (
    EditTool,
    MultiEditTool,
    NotebookEditTool,
    WriteTool,
)

from .helpers import git, make_repo

pytestmark = pytest.mark.anyio

WRITE, EDIT, MULTI, NOTEBOOK = WriteTool(), EditTool(), MultiEditTool(), NotebookEditTool()
SAID = "runs later without being asked"


@pytest.fixture
def home(user_home: Path) -> Path:
    """The person works in their home folder (the work directory is `~`), as Jupyter started
    from a terminal does: IPython's and Jupyter's folders and the shell's files are inside."""
    return user_home.resolve()


Setup = Callable[[Path, pytest.MonkeyPatch], str]


def _plain(rel: str) -> Setup:
    return lambda _home, _monkeypatch: rel


def _in_repo(rel: str) -> Setup:
    def make(home: Path, _monkeypatch: pytest.MonkeyPatch) -> str:
        git(home, "init", "-q")
        return rel

    return make


def _bare(home: Path, _monkeypatch: pytest.MonkeyPatch) -> str:
    git(home, "init", "-q", "--bare", "store")
    return "store/config"


def _env(name: str, rel: str) -> Setup:
    def make(home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
        monkeypatch.setenv(name, str(home / rel.split("/")[0]))
        return rel

    return make


def _on_path(home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PATH", f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return "bin/git"


def _hard_link(home: Path, _monkeypatch: pytest.MonkeyPatch) -> str:
    (home / "original.txt").write_text("x\n")
    os.link(home / "original.txt", home / "linked.txt")
    return "linked.txt"


KINDS: dict[str, Setup] = {
    "git config": _in_repo(".git/config"),
    "git hook": _in_repo(".git/hooks/post-checkout"),
    "a worktree's .git file": _plain("sub/.git"),
    "a bare repository": _bare,
    "ipykernel_launcher.py": _plain("ipykernel_launcher.py"),
    "sitecustomize.py": _plain("sitecustomize.py"),
    "usercustomize.py": _plain("lib/usercustomize.py"),
    "a .pth file": _plain("lib/evil.pth"),
    "a module the kernel imported": _plain("json.py"),
    "a package the kernel imported": _plain("json/__init__.py"),
    "this package": _plain("forkagent_jupyter.py"),
    "this package's folder": _plain("forkagent_jupyter/__init__.py"),
    "IPython startup": _plain(".ipython/profile_default/startup/00-x.py"),
    "IPYTHONDIR": _env("IPYTHONDIR", "ipy/extensions/x.py"),
    "a profile's startup anywhere": _plain("conf/profile_work/startup/x.ipy"),
    "IPython config by name": _plain("ipython_kernel_config.py"),
    "Jupyter config": _plain(".jupyter/jupyter_server_config.py"),
    "JUPYTER_CONFIG_DIR": _env("JUPYTER_CONFIG_DIR", "jcfg/x.json"),
    "a kernel spec": _plain(".local/share/jupyter/kernels/python3/kernel.json"),
    "JUPYTER_DATA_DIR": _env("JUPYTER_DATA_DIR", "jdata/kernels/k/kernel.json"),
    ".bashrc": _plain(".bashrc"),
    ".bash_profile": _plain(".bash_profile"),
    ".profile": _plain(".profile"),
    ".zshrc": _plain(".zshrc"),
    ".zshenv": _plain(".zshenv"),
    ".inputrc": _plain(".inputrc"),
    "PYTHONSTARTUP": _env("PYTHONSTARTUP", "startup.py"),
    "git's own config in home": _plain(".gitconfig"),
    "a program on PATH": _on_path,
    "a hard link": _hard_link,
}


async def _check(session: Any, tool: Tool[Any], raw: dict[str, Any]) -> Allow | Deny:
    ctx = ToolContext(workdir=session.workdir)
    decision: Allow | Deny = await session.gate.check(tool, tool.parse(raw), ctx, raw)
    return decision


@pytest.mark.parametrize("mode", ["acceptEdits", "bypassPermissions"])
@pytest.mark.parametrize("kind", list(KINDS))
async def test_each_kind_of_file_that_runs_later_is_asked_in_every_mode(
    make_session: Any, home: Path, monkeypatch: pytest.MonkeyPatch, kind: str, mode: str
) -> None:
    rel = KINDS[kind](home, monkeypatch)
    policy = ScriptedPolicy(default=Deny("not that"))
    asking = make_session(workdir=home, home=home, permission_mode=mode, permission_policy=policy)
    raw = {"file_path": rel, "content": "import os\n"}
    assert await _check(asking, WRITE, raw) == Deny("not that")
    [request] = policy.requests
    assert request.reason is not None and SAID in request.reason, request.reason
    assert request.suggested_rule is None  # no rule could ever let it through
    # where nobody can answer, asked means refused, with one line saying why
    nobody = make_session(workdir=home, home=home, permission_mode=mode, permission_policy=None)
    refused = await _check(nobody, WRITE, raw)
    assert isinstance(refused, Deny) and SAID in refused.message, refused
    assert "\n" not in refused.message and "no one can answer" in refused.message
    # an allow rule does not let it through either
    nobody.gate.add_rule("Write")
    assert isinstance(await _check(nobody, WRITE, raw), Deny)


async def test_every_tool_that_writes_files_is_asked(make_session: Any, home: Path) -> None:
    git(home, "init", "-q")
    (home / ".git" / "info" / "x.ipynb").write_text(
        json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    session = make_session(
        workdir=home, home=home, permission_mode="bypassPermissions", permission_policy=None
    )
    calls: list[tuple[Tool[Any], dict[str, Any]]] = [
        (WRITE, {"file_path": ".git/config", "content": "[core]\n"}),
        (WRITE, {"file_path": ".git/hooks/pre-\ncommit", "content": "#!/bin/sh\n"}),
        (EDIT, {"file_path": ".git/config", "old_string": "[core]", "new_string": "[core]\n"}),
        (MULTI, {"file_path": ".git/config", "edits": [{"old_string": "a", "new_string": "b"}]}),
        (
            NOTEBOOK,
            {
                "notebook_path": ".git/info/x.ipynb",
                "new_source": "x",
                "edit_mode": "insert",
                "cell_type": "code",
            },
        ),
    ]
    for tool, raw in calls:
        decision = await _check(session, tool, raw)
        assert isinstance(decision, Deny) and SAID in decision.message, (tool.name, decision)
        assert "\n" not in decision.message  # one line, whatever the file's name


@pytest.fixture
def own_module(tmp_path: Path) -> Iterator[Path]:
    """A module of the notebook's own folder that the kernel has imported."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "fa_own_analysis.py").write_text("X = 1\n")
    sys.path.insert(0, str(folder))
    importlib.import_module("fa_own_analysis")
    yield folder
    sys.path.remove(str(folder))
    sys.modules.pop("fa_own_analysis", None)


async def test_ordinary_files_are_still_written_unasked_in_accept_edits(
    emulator: Any, make_session: Any, own_module: Path
) -> None:
    """Data, notes, new modules and the notebook's own imported module (its own file: editing
    it replaces nothing) are written unasked in acceptEdits; a same-named package next to it,
    which would be imported instead, is asked."""
    policy = ScriptedPolicy()
    session = make_session(
        workdir=own_module, permission_mode="acceptEdits", permission_policy=policy
    )
    writes = [
        ("data.csv", "a,b\n"),
        ("notes/report.md", "# report\n"),
        ("helpers.py", "def f(): ...\n"),
        ("fa_own_analysis.py", "X = 2\n"),
        ("fa_own_analysis/__init__.py", "X = 3\n"),
    ]
    emulator.script(
        Reply(
            tuple(
                {"type": "tool_use", "name": "Write", "input": {"file_path": p, "content": c}}
                for p, c in writes
            )
        ),
        Reply.text("ok"),
    )
    turn = await session.ask("write them")
    results = [c.is_error for c in turn.tool_calls]
    assert results == [False, False, False, False, True], [c.result for c in turn.tool_calls]
    assert (own_module / "fa_own_analysis.py").read_text() == "X = 2\n"
    assert not (own_module / "fa_own_analysis").exists()
    assert [r.input["file_path"] for r in policy.requests] == ["fa_own_analysis/__init__.py"]


def _agent_writes(emulator: Any, agent: str, *files: str) -> None:
    """The parent starts `agent` in the background; the agent writes `files` (one reply)."""
    brain = ScriptedBrain(when_empty=OfflineBrain())
    start = {
        "description": "tidy up",
        "prompt": "RUN_IT now",
        "subagent_type": agent,
        "run_in_background": True,
    }
    brain.when_last_user_contains(
        "START", Reply(({"type": "tool_use", "name": "Agent", "input": start},)), times=1
    )
    writes = tuple(
        {"type": "tool_use", "name": "Write", "input": {"file_path": f, "content": "import os\n"}}
        for f in files
    )
    brain.when_last_user_contains("RUN_IT", Reply(writes), times=1)
    emulator.brain = brain


def _agent_results(session: Any) -> dict[str, str]:
    """The helper's Write decisions: path -> "allow" or the denial's message."""
    return {
        e["summary"].split(" ")[1]: e.get("message", e["decision"])
        for e in session.gate.log
        if e["tool"] == "Write" and e["task_id"] is not None
    }


@pytest.mark.parametrize("someone_answers", [True, False])
async def test_the_general_purpose_agent_cannot_plant_code_that_runs_later(
    emulator: Any, make_session: Any, tmp_path: Path, someone_answers: bool
) -> None:
    """The issue's attack: the built-in general-purpose agent (acceptEdits: it writes in the
    work directory unasked) writes `.git/config`, `ipykernel_launcher.py` and
    `forkagent_jupyter.py` into the notebook's folder. Each is put to the person (who says
    no) or, with nobody to answer, refused; the agent's ordinary file is written."""
    repo = make_repo(tmp_path / "repo")
    config = (repo / ".git" / "config").read_text()
    _agent_writes(
        emulator,
        "general-purpose",
        ".git/config",
        "ipykernel_launcher.py",
        "forkagent_jupyter.py",
        "notes.txt",
    )
    policy = ScriptedPolicy(default=Deny("no")) if someone_answers else None
    session = make_session(workdir=repo, permission_policy=policy, auto_respond=False)
    await session.ask("START the helper")
    await session.wait(timeout=60)
    results = _agent_results(session)
    assert results["notes.txt"] == "allow"  # the agent does edit unasked
    for planted in (".git/config", "ipykernel_launcher.py", "forkagent_jupyter.py"):
        said = results[planted]
        assert said == "no" if someone_answers else SAID in said, (planted, said)
    assert (repo / ".git" / "config").read_text() == config
    assert not (repo / "ipykernel_launcher.py").exists()
    assert not (repo / "forkagent_jupyter.py").exists()
    if policy is not None:
        asked = [r.input["file_path"] for r in policy.requests]
        assert asked == [".git/config", "ipykernel_launcher.py", "forkagent_jupyter.py"]
        assert all(r.task_id is not None for r in policy.requests)  # shown on its card


async def test_a_named_agent_with_the_home_folder_cannot_write_ipythons_startup(
    emulator: Any, make_session: Any, tmp_path: Path, user_home: Path
) -> None:
    """The issue's third road: the person's settings give the session `~` as an additional
    directory; a named agent (acceptEdits) writes IPython's startup folder there. Refused; an
    ordinary file in `~` is written unasked."""
    home = user_home.resolve()
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"additionalDirectories": ["~"]}})
    )
    project = tmp_path / "project"
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "helper.md").write_text(
        "---\nname: helper\ndescription: Helps with files\n---\nYou help.\n"
    )
    startup = home / ".ipython" / "profile_default" / "startup" / "00-x.py"
    _agent_writes(emulator, "helper", str(startup), str(home / "notes.txt"))
    session = make_session(workdir=project, home=home, permission_policy=None, auto_respond=False)
    await session.ask("START the helper")
    await session.wait(timeout=60)
    results = _agent_results(session)
    assert [k for k, v in results.items() if v == "allow"] == [str(home / "notes.txt")], results
    assert SAID in results[str(startup)] and not startup.exists()


@pytest.mark.parametrize(
    "line",
    [
        "echo '[core] fsmonitor = sh x' >> .git/config",
        "cp payload.py ipykernel_launcher.py",
        "printf 'import os' | tee .ipython/profile_default/startup/00.py",
        "git log --output=.bashrc",
        "tar -xf payload.tar -C .git/hooks",
    ],
)
async def test_a_bash_line_that_writes_a_file_that_runs_later_is_asked(
    make_session: Any, home: Path, line: str
) -> None:
    """What a Write of the file would be asked for, a Bash line's writes are too, in every
    mode: `bypassPermissions` and a Bash allow rule do not let them through."""
    from forkagent_jupyter.runtime.tools.shell import BashTool

    git(home, "init", "-q")
    (home / ".ipython" / "profile_default" / "startup").mkdir(parents=True)
    session = make_session(
        workdir=home, home=home, permission_mode="bypassPermissions", permission_policy=None
    )
    session.gate.add_rule("Bash")
    refused = await _check(session, BashTool(), {"command": line})
    assert isinstance(refused, Deny) and "runs later" in refused.message, refused
