"""Settings that hold after the session started, one-cell options, and one-line messages."""

from __future__ import annotations

import json
import queue
import time
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.faults import Fault
from tests.runtime.helpers import trust_folder

from .conftest import Kernel
from .test_no_math import exposed_dollars

pytestmark = pytest.mark.kernel

SESSION = "__forkagent__.session"


def test_permission_mode_changes_apply_to_running_workers(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.execute(f"{SESSION}")  # the session exists from now on
    kernel.execute("%config ForkAgent.permission_mode = 'plan'")
    kernel.execute("%fork --name writer change it `py: changed = True`")
    kernel.execute("%tasks --wait writer", timeout=60)
    result = kernel.value(f"{SESSION}.registry.get('writer').result")
    assert "plan mode" in result.lower()
    assert kernel.value(f"{SESSION}.gate.mode") == "plan"


def test_settings_after_first_use_apply(kernel: Kernel, emulator: Any) -> None:
    kernel.execute(f"{SESSION}")
    for line in (
        "%config ForkAgent.approval_timeout = 42.0",
        "%config ForkAgent.auto_respond = False",
        "%config ForkAgent.cache_ttl = '1h'",
        "%config ForkAgent.model = 'claude-haiku-4-5'",
        "%config ForkAgent.stream_retries = 5",
    ):
        assert kernel.execute(line).status == "ok", line
    # approval_timeout is read by the approval card at each request: see
    # test_magics.test_unanswered_approval_times_out_as_a_denial
    assert kernel.value(f"{SESSION}.auto_respond") is False
    assert kernel.value(f"{SESSION}.stream_retries") == 5
    assert kernel.value(f"{SESSION}.main.config.stream_retry.retries") == 5
    kernel.execute("%%agent\nHello.")
    body = emulator.api_requests()[-1].body
    assert body["model"] == "claude-haiku-4-5"
    ttls = [
        block.get("cache_control", {}).get("ttl")
        for message in body["messages"]
        for block in message["content"]
        if isinstance(block, dict) and "cache_control" in block
    ]
    assert ttls and set(ttls) == {"1h"}
    changed = kernel.execute("%config ForkAgent.backend = 'offline'")
    assert "the backend cannot change once the session has started" in changed.texts()
    assert changed.texts().count("refused") == 1, changed.texts()  # said once, no recursion
    assert "Traceback" not in changed.texts()
    assert kernel.value("__forkagent__.settings.backend") == ""  # refused, not half-applied


def test_max_turns_bounds_the_next_turn(kernel: Kernel, emulator: Any) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.execute(f"{SESSION}")
    assert kernel.execute("%config ForkAgent.max_turns = 1").status == "ok"
    assert kernel.value(f"{SESSION}.options.max_turns") == 1
    before = len(emulator.api_requests())
    shown = kernel.execute("%%agent\nAdd them. `py: 1 + 1`")
    assert len(emulator.api_requests()) == before + 1  # the tool's result is not sent back
    assert "max_turns" in shown.texts(), shown.texts()
    refused = kernel.execute("%config ForkAgent.max_turns = 0")
    assert "ForkAgent.max_turns = 0 refused: it takes a whole number >= 1" in refused.texts()
    assert kernel.value(f"{SESSION}.options.max_turns") == 1


def test_model_option_is_for_that_cell_only(kernel: Kernel, emulator: Any) -> None:
    kernel.execute("%%agent --model claude-haiku-4-5\nFirst.")
    assert emulator.api_requests()[-1].body["model"] == "claude-haiku-4-5"
    kernel.execute("%%agent --new\nSecond.")
    assert emulator.api_requests()[-1].body["model"] != "claude-haiku-4-5"


def test_help_and_one_line_messages(kernel: Kernel) -> None:
    for asked in ("%%agent?", "%%agent??"):
        shown = kernel.execute(asked)
        assert shown.status == "ok", shown.texts()
        assert "Talk to the agent" in str(shown.reply) + shown.texts(), asked
    cases = {
        "%tasks nosuch": "%tasks: No task 'nosuch'",
        "%stop nosuch": "%stop: No task 'nosuch'",
    }
    for code, expected in cases.items():
        result = kernel.execute(code)
        assert result.reply["content"]["ename"] == "UsageError", code
        assert expected in result.reply["content"]["evalue"], result.reply["content"]
    nothing = kernel.execute("%stop --all")
    assert nothing.status == "ok" and "no task is running" in nothing.texts()
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.execute("%fork --name quick done `py: 1`")
    kernel.execute("%tasks --wait quick", timeout=60)
    freed = kernel.execute("%stop quick")  # its process, kept for pulls, is freed
    assert freed.status == "ok" and "quick had finished; its process" in freed.texts()
    finished = kernel.execute("%stop quick")
    assert finished.reply["content"]["ename"] == "UsageError"
    assert "quick is not running (completed)" in finished.reply["content"]["evalue"]


def test_a_cost_budget_stops_workers_and_refuses_new_turns(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    assert kernel.execute("%%agent\nHello.").status == "ok"
    spent = kernel.value(f"{SESSION}.cost_usd")
    bad = kernel.execute("%config ForkAgent.max_cost_usd = -1.0")
    assert "ForkAgent.max_cost_usd = -1.0 refused: it takes a positive number" in bad.texts()
    assert kernel.value(f"{SESSION}.max_cost_usd") is None
    assert kernel.execute(f"%config ForkAgent.max_cost_usd = {spent * 1.01!r}").status == "ok"
    welcome = kernel.open_comm("budget-panel")  # the Tasks panel is told the budget
    assert welcome["budget"] == {"spent_usd": spent, "limit_usd": spent * 1.01, "reached": False}
    sleep = "`py: __import__('time').sleep(30)`"
    forks = "\n".join(f"%fork --name {name} wait {sleep}" for name in ("slow1", "slow2"))
    assert kernel.execute(forks).status == "ok"  # one cell: both start before either replies
    waited = kernel.execute("%tasks --wait", timeout=60)
    assert "budget reached" in waited.texts()
    statuses = kernel.value(f"[t.status for t in {SESSION}.tasks]")
    assert statuses == ["killed", "killed"]
    notes = kernel.value(f"[t.notification for t in {SESSION}.tasks]")
    assert all("cost budget reached" in n for n in notes)
    kernel.drain()
    texts = [
        m["content"]["data"].get("text/plain", "")
        for m in kernel.iopub
        if m["msg_type"] == "update_display_data"
    ]
    assert any("slow1 (fork) killed" in t and "cost budget reached" in t for t in texts)
    # the cards' HTML says why, its two amounts kept out of math typesetting
    cards = kernel.value("[c.html_text() for c in __forkagent__.ui.hub.cards.values()]")
    assert len(cards) == 2 and all("spent of max_cost_usd=$" in c for c in cards), cards
    assert all(exposed_dollars(c) == [] for c in cards), cards
    panel = kernel.wait_comm(
        "budget-panel",
        "tasks",
        lambda found: any((f.get("budget") or {}).get("reached") for f in found),
    )
    assert panel[-1]["budget"]["limit_usd"] == spent * 1.01
    refused = kernel.execute("%%agent\nGo on.")
    assert refused.status == "error"
    assert "%%agent: The turn was refused, cost budget reached" in refused.texts()
    assert "Traceback" not in refused.texts()
    forked = kernel.execute(f"%fork --name late more {sleep}")
    assert forked.status == "error" and "%fork: The fork was refused" in forked.texts()
    kernel.execute("%config ForkAgent.max_cost_usd = None")
    assert kernel.execute("%%agent\nGo on.").status == "ok"


def test_stream_retries_setting_retries_a_dropped_stream(kernel: Kernel, emulator: Any) -> None:
    kernel.execute("%config ForkAgent.stream_retries = 0")
    kernel.execute(f"{SESSION}")  # made with the setting
    assert kernel.value(f"{SESSION}.stream_retries") == 0
    emulator.faults.next(Fault.dropped(after=2))
    failed = kernel.execute("%%agent\nHello.")
    assert "broke off" in failed.texts()
    assert len(emulator.api_requests()) == 1  # not retried
    kernel.execute("%config ForkAgent.stream_retries = 2")
    kernel.execute(f"{SESSION}.stream_retry.base_delay = 0.01")
    emulator.faults.next(Fault.dropped(after=2))
    shown = kernel.execute("%%agent\nHello again.")
    assert "stream dropped, retrying (1/2)" in shown.texts()
    assert "broke off" not in shown.texts()
    first, second = emulator.api_requests()[1:]
    assert first.raw == second.raw
    assert kernel.value(f"{SESSION}.messages[-1]['role']") == "assistant"


def test_interrupting_tasks_wait_says_one_line(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    kernel.execute("%fork --name sleeper nap `py: __import__('time').sleep(30)`")
    msg_id = kernel.start("%tasks --wait sleeper")
    # the interrupt must reach the wait, not the cell before it runs: on a loaded machine the
    # kernel can take seconds to start it, so count the second from its execute_input
    deadline = time.monotonic() + 60
    while not any(
        m["msg_type"] == "execute_input" and m["parent_header"].get("msg_id") == msg_id
        for m in kernel.iopub
    ):
        assert time.monotonic() < deadline, "the cell did not start"
        try:
            kernel.iopub.append(kernel.client.get_iopub_msg(timeout=0.2))
        except queue.Empty:
            pass
    time.sleep(1.0)
    kernel.km.interrupt_kernel()
    kernel.drain(until_idle_of=msg_id, timeout=20)
    shown = "".join(
        str(m["content"].get("text", "")) + str(m["content"].get("evalue", ""))
        for m in kernel.iopub
        if m["parent_header"].get("msg_id") == msg_id
    )
    assert "%tasks --wait: interrupted; the tasks keep running." in shown
    assert "CancelledError" not in shown and "Traceback" not in shown
    assert kernel.value(f"{SESSION}.registry.get('sleeper').status") == "running"
    kernel.execute("%stop sleeper")


BAD_SETTINGS = {
    "compact_at": ("1.5", "2", "True", "float('nan')"),
    "max_cost_usd": ("-1", "float('nan')", "float('inf')", "True"),
    "approval_timeout": ("-1", "float('nan')", "float('inf')", "None"),
    "headless_approval_timeout": ("0",),
    "max_workers": ("-1", "0", "True", "2.5"),
    "worker_memory_mb": ("0", "-5"),
    "worker_nice": ("10**30", "-1"),
    "stream_retries": ("-1",),
    "max_turns": ("0", "True"),
    "backend": ("'nope'",),
    "permission_mode": ("'yolo'",),
    "auto_respond": ("1", "'no'"),
    "executor": ("'ray'",),
    "auto_background_after": ("float('inf')", "-1"),
    "thinking": ("True", "10", "2048.0"),
    "large_prompt_tokens": ("0", "-1", "True", "2.5", "float('inf')"),
}


def _refusals_one_line(kernel: Kernel) -> None:
    for name, values in BAD_SETTINGS.items():
        before = kernel.value(f"__forkagent__.settings.{name}")
        for value in values:
            shown = kernel.execute(f"%config ForkAgent.{name} = {value}")
            text = shown.texts()
            lines = [line for line in text.splitlines() if line.strip()]
            assert len(lines) == 1, (name, value, text)
            assert f"ForkAgent.{name} = " in text and "refused: it takes" in text, text
            assert "Traceback" not in text
            assert kernel.value(f"__forkagent__.settings.{name}") == before, (name, value)


def test_invalid_settings_are_refused_in_one_line_before_and_after_the_first_turn(
    kernel: Kernel,
) -> None:
    _refusals_one_line(kernel)  # before the session exists: nothing half-applied
    assert kernel.value("__forkagent__._session") is None
    first = kernel.execute("%%agent\nHello.")
    assert first.status == "ok", first.texts()  # every magic still works
    _refusals_one_line(kernel)
    assert kernel.execute("%config ForkAgent.compact_at = 0.5").status == "ok"
    assert kernel.value(f"{SESSION}.compact_at") == 0.5
    assert kernel.execute("%tasks").status == "ok"


def test_every_setting_is_a_session_option_or_tagged_the_kernels() -> None:
    """A `ForkAgent` trait reaches the session by its name alone (settings.py): one whose
    name is no `SessionOptions` field would be silently ignored, so it must say it is the
    kernel's (`session=False`); and the defaults are values the session takes."""
    from forkagent_jupyter.kernel.settings import ForkAgent, session_settings
    from forkagent_jupyter.runtime.session.options import SessionOptions

    settings = ForkAgent()
    for name, trait in settings.traits(config=True).items():
        if trait.metadata.get("session", True):
            assert name in SessionOptions.model_fields, name
    given = session_settings(settings)
    assert "approval_timeout" not in given and "headless_approval_timeout" not in given
    options = SessionOptions(**given)
    assert options.max_turns == settings.max_turns and options.worker_nice == 5


def test_an_executor_that_cannot_be_used_at_the_start_is_one_line_then_local(
    kernel: Kernel,
) -> None:
    kernel.execute("%config ForkAgent.executor = 'dask'")  # no scheduler given or running
    shown = kernel.execute(f"{SESSION}.options.executor")
    text = shown.texts()
    assert shown.status == "ok" and "ForkAgent.executor: " in text and "Dask" in text, text
    assert "Traceback" not in text
    assert kernel.value("__forkagent__.settings.executor") == "local"
    assert kernel.value(f"{SESSION}.options.executor") == "local"
    assert kernel.execute("%%agent\nHello.").status == "ok"


def test_backend_choices_match_the_runtime() -> None:
    from forkagent_jupyter.kernel.extension import BACKEND_CHOICES
    from forkagent_jupyter.runtime.model.backends import BACKENDS

    assert ("", *BACKENDS) == BACKEND_CHOICES


def test_a_backend_whose_extra_is_missing_is_one_line(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.backend = 'vertex'")
    kernel.execute("import os; os.environ.pop('ANTHROPIC_API_KEY', None)")
    for code in ("%tasks", "%%agent\nHello.", "%fork --name w look"):
        failed = kernel.execute(code)
        assert failed.reply["content"]["ename"] == "UsageError", failed.texts()
        evalue = failed.reply["content"]["evalue"]
        assert evalue.startswith("forkagent: backend 'vertex'"), evalue
        assert "\n" not in evalue and "Traceback" not in failed.texts()


def test_magic_help_and_bad_names(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    for code in (
        "%fork -h",
        "%fork ?",
        "%fork --help",
        "%send -h",
        "%stop -h",
        "%%agent -h\nHello.",
        "%compact -h",
        "%compact ?",
        "%compact --help",
        "%tasks -h",
        "%bg -h",
        "%notifications -h",
        "%permissions -h",
        "%mcp -h",
    ):
        shown = kernel.execute(code)
        assert shown.status == "ok", (code, shown.texts())
        assert shown.texts().split()[0] == code.split()[0], (code, shown.texts())  # its usage
        results = [m for m in shown.messages if m["msg_type"] == "execute_result"]
        assert not results, (code, results)  # nothing started: no task handle shown
    assert kernel.value(f"len({SESSION}.tasks)") == 0  # no worker was started by asking
    assert kernel.value(f"len({SESSION}.messages)") == 0  # nor a compaction
    for code, said in (
        ("%fork --poll 5 look at it", "%fork: --poll goes with --batch --over NAME"),
        ("%fork --batch --over xs --poll nan A {item}", "%fork: --poll needs a positive number"),
        ("%fork --batch --over xs --poll inf A {item}", "%fork: --poll needs a positive number"),
    ):
        kernel.execute("xs = [1, 2]")
        refused = kernel.execute(code)
        assert refused.reply["content"]["ename"] == "UsageError", (code, refused.texts())
        assert refused.reply["content"]["evalue"].startswith(said), refused.reply["content"]
    assert kernel.value(f"len({SESSION}.tasks)") == 0
    empty = kernel.execute("%fork --name= look at it")
    assert empty.reply["content"]["evalue"] == "%fork: option --name needs a value"
    started = kernel.execute("%fork --name w wait `py: __import__('time').sleep(20)`")
    assert started.status == "ok", started.texts()
    again = kernel.execute("%fork --name w another `py: 1`")
    assert again.reply["content"]["ename"] == "UsageError"
    assert "%fork: the name 'w' is in use by the running task" in again.reply["content"]["evalue"]
    assert kernel.value(f"len({SESSION}.tasks)") == 1
    stopped = kernel.execute("%stop w")
    assert stopped.status == "ok" and "stopping w" in stopped.texts()


def test_load_ext_says_which_model(kernel: Kernel) -> None:
    kernel.execute("%unload_ext forkagent_jupyter")
    claude = kernel.execute("%load_ext forkagent_jupyter")
    assert "forkagent: loaded; model claude-" in claude.texts()
    assert "on the anthropic backend" in claude.texts()
    kernel.execute("import os; os.environ['FORKAGENT_BACKEND'] = 'offline'")
    kernel.execute("%unload_ext forkagent_jupyter")
    offline = kernel.execute("%load_ext forkagent_jupyter")
    assert "forkagent: loaded; the offline model (deterministic, no network)" in offline.texts()
    assert offline.texts().count("\n") <= 1  # one line
    assert kernel.execute("%%agent\nHi.").status == "ok"


def _default_mode(folder: Path, mode: str) -> None:
    (folder / ".claude").mkdir(exist_ok=True)
    settings = {"permissions": {"defaultMode": mode}}
    (folder / ".claude" / "settings.json").write_text(json.dumps(settings))


def test_config_permission_mode_wins_over_a_settings_files_mode_and_shows_it(
    kernel: Kernel, tmp_path: Path, user_home: Path
) -> None:
    trust_folder(tmp_path, user_home)  # the folder's mode applies once trusted
    _default_mode(tmp_path, "acceptEdits")
    assert kernel.execute("%%agent\nHello.").status == "ok"
    assert kernel.value(f"{SESSION}.gate.mode") == "acceptEdits"
    shown = kernel.execute("%config ForkAgent.permission_mode")  # the mode in force
    assert shown.texts().strip() == "'acceptEdits'", shown.texts()
    assert kernel.execute("%config ForkAgent.permission_mode = 'default'").status == "ok"
    assert kernel.value(f"{SESSION}.gate.mode") == "default"
    assert kernel.execute("%%agent\nAgain.").status == "ok"  # the files are read again
    assert kernel.value(f"{SESSION}.gate.mode") == "default"
    assert kernel.execute("%config ForkAgent.permission_mode").texts().strip() == "'default'"


def test_config_of_the_mode_a_file_already_set_still_wins_over_the_files(
    kernel: Kernel, tmp_path: Path, user_home: Path
) -> None:
    trust_folder(tmp_path, user_home)  # the folder's mode applies once trusted
    _default_mode(tmp_path, "acceptEdits")
    assert kernel.execute("%%agent\nHello.").status == "ok"
    # the same value as the one in force: the person's choice all the same
    assert kernel.execute("%config ForkAgent.permission_mode = 'acceptEdits'").status == "ok"
    _default_mode(tmp_path, "plan")
    assert kernel.execute("%%agent\nAgain.").status == "ok"
    assert kernel.value(f"{SESSION}.gate.mode") == "acceptEdits"


def test_config_permission_mode_before_the_session_wins_over_the_files(
    kernel: Kernel, tmp_path: Path, user_home: Path
) -> None:
    trust_folder(tmp_path, user_home)  # the folder's mode applies once trusted
    _default_mode(tmp_path, "acceptEdits")
    # the trait's value already: no change for traitlets, the person's choice all the same
    assert kernel.execute("%config ForkAgent.permission_mode = 'default'").status == "ok"
    assert kernel.execute("%%agent\nHello.").status == "ok"
    assert kernel.value(f"{SESSION}.gate.mode") == "default"
    assert kernel.execute("%config ForkAgent.permission_mode").texts().strip() == "'default'"


def test_a_projects_hook_not_approved_is_one_line_in_the_cell_once(
    kernel: Kernel, emulator: Any, tmp_path: Path, user_home: Path
) -> None:
    """The committed `.claude/settings.json`'s command hook does not run in a folder the
    person trusts either; the person reads in the cell, once, that it was not approved and how
    to approve it."""
    trust_folder(tmp_path, user_home)
    folder = tmp_path / ".claude"
    folder.mkdir()
    hook = {"type": "command", "command": "touch pwned"}
    (folder / "settings.json").write_text(
        json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}})
    )
    first = kernel.execute("%%agent\nHello.", timeout=120)
    assert first.status == "ok", first.texts()
    said = [line for line in first.texts().splitlines() if "not approved" in line]
    assert said == [
        "hook of .claude/settings.json not run: UserPromptSubmit command 'touch pwned' is not "
        "approved (a project's file); to run it, run %hooks approve, or add its command to "
        "enabledProjectHooks (or set enableAllProjectHooks: true) in .claude/settings.local.json "
        "or ~/.claude/settings.json; it runs from the next turn"
    ], first.texts()
    again = kernel.execute("%%agent\nAgain.", timeout=120)
    assert "not approved" not in again.texts()
    assert not (tmp_path / "pwned").exists()


def test_the_model_setting_takes_aliases_and_refuses_what_is_no_model(kernel: Kernel) -> None:
    """`%config ForkAgent.model = 'nope please'` (or 20,000 characters) had been taken, and
    every later turn failed at the API; `%%agent --model ''` the same for its cell, after
    `--new` had already emptied the conversation."""
    refused = kernel.execute("%config ForkAgent.model = 'nope please'")
    said = refused.texts()
    assert "ForkAgent.model = 'nope please' refused: 'nope please' is no model id" in said
    assert said.count("\n") <= 1 and "Traceback" not in said, said
    long = kernel.execute("%config ForkAgent.model = 'x' * 20000")
    assert "refused" in long.texts() and len(long.texts()) < 500, len(long.texts())
    assert kernel.value("__forkagent__.settings.model") == ""
    kernel.execute("%config ForkAgent.model = 'haiku'")
    assert kernel.execute("%%agent\nRemember the number 7.").status == "ok"
    assert kernel.value(f"{SESSION}.model") == "claude-haiku-5-5"
    before = kernel.value(f"len({SESSION}.messages)"), kernel.value(f"{SESSION}.thinking")
    bad = kernel.execute("%%agent --new --think 2048 --model ''\nHello.")
    content = bad.reply["content"]
    assert content.get("ename") == "UsageError", bad.texts()
    assert content["evalue"].startswith(
        "%%agent --model: model = \"''\" refused: \"''\" is no model id"
    )
    assert "\n" not in content["evalue"]
    # nothing lost: the conversation was not reset, and --think did not outlive the cell
    after = kernel.value(f"len({SESSION}.messages)"), kernel.value(f"{SESSION}.thinking")
    assert after == before
    assert kernel.value(f"{SESSION}.model") == "claude-haiku-5-5"
    ok = kernel.execute("%%agent --model opus\nHello.")
    assert ok.status == "ok", ok.texts()
    assert kernel.value(f"{SESSION}.model") == "claude-haiku-5-5"  # for that cell only


def test_a_setting_that_does_not_exist_is_one_line_every_time(kernel: Kernel) -> None:
    """A typo in `%config ForkAgent.NAME` had been a UserWarning with a file path and a line
    of IPython's source, once per kernel: the second typo said nothing at all."""
    for _ in range(2):
        typo = kernel.execute("%config ForkAgent.max_worker = 4")
        said = typo.texts().strip()
        assert said.endswith(
            "ForkAgent.max_worker: no such setting (did you mean max_workers?); "
            "%config ForkAgent lists them."
        ), said
        assert "\n" not in said and "UserWarning" not in said
    assert kernel.value("__forkagent__.settings.max_workers") == 16
    other = kernel.execute("%config ForkAgent.zzz = 1").texts().strip()
    assert other.endswith("ForkAgent.zzz: no such setting; %config ForkAgent lists them."), other
    assert kernel.execute("%config ForkAgent.max_workers = 4").texts() == ""
    assert kernel.value("__forkagent__.settings.max_workers") == 4


def test_hooks_lists_the_projects_hooks_and_approve_runs_them_from_the_next_turn(
    kernel: Kernel, tmp_path: Path, user_home: Path
) -> None:
    """`%hooks` lists the hooks in force and the project's not approved (its settings file's
    and its agent files'); `%hooks approve` writes their commands to the person's
    .claude/settings.local.json, and they run from the next turn (in a folder the person
    trusts)."""
    trust_folder(tmp_path, user_home)
    folder = tmp_path / ".claude"
    (folder / "agents").mkdir(parents=True)
    prompt_hook = {"type": "command", "command": "touch prompted"}
    (folder / "settings.json").write_text(
        json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [prompt_hook]}]}})
    )
    (folder / "settings.local.json").write_text(json.dumps({"keep": 1}))
    (folder / "agents" / "checker.md").write_text(
        "---\nname: checker\ndescription: Checks\nhooks:\n  Stop:\n    - hooks:\n"
        "        - {type: command, command: 'touch checked'}\n---\nYou check.\n"
    )
    listed = kernel.execute("%hooks")
    assert listed.status == "ok", listed.texts()
    text = listed.texts()
    assert "settings files' hooks in force (0):" in text
    assert "not approved (2; %hooks approve runs them from the next turn):" in text
    assert "UserPromptSubmit *: 'touch prompted'  .claude/settings.json" in text
    assert "Stop *: 'touch checked'" in text and "checker.md" in text
    approved = kernel.execute("%hooks approve")
    assert approved.status == "ok", approved.texts()
    assert "approved in .claude/settings.local.json (enabledProjectHooks): " in approved.texts()
    assert json.loads((folder / "settings.local.json").read_text()) == {
        "keep": 1,
        "enabledProjectHooks": ["touch prompted", "touch checked"],
    }
    after = kernel.execute("%hooks").texts()
    assert "settings files' hooks in force (1):" in after
    assert "no project hook waits for approval" in after
    assert kernel.execute("%%agent\nHello.", timeout=120).status == "ok"
    assert (tmp_path / "prompted").exists()
    # a file that cannot take the approval is one line, and is not changed
    (folder / "settings.json").write_text(
        json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}})
    )
    (folder / "settings.local.json").write_text("{not json")
    refused = kernel.execute("%hooks approve")
    assert refused.reply["content"]["ename"] == "UsageError"
    assert refused.reply["content"]["evalue"] == (
        "%hooks: .claude/settings.local.json: is not JSON; not changed"
    )
    assert (folder / "settings.local.json").read_text() == "{not json"


CANDIDATES: tuple[Any, ...] = (
    True,
    False,
    0,
    1,
    -1,
    0.5,
    1.0,
    2.5,
    1024,
    19,
    20,
    10**30,
    1e300,
    float("inf"),
    float("-inf"),
    float("nan"),
    "",
    "no",
    "1",
    "2048",
    "acceptedits",
    "1H",
    "LOCAL",
    "shared",
    "offline",
    "nope",
    "adaptive",
    "claude-haiku-4-5",
    None,
)


def test_settings_refuse_exactly_what_the_session_options_refuse() -> None:
    """One place decides: `%config ForkAgent.X = v` is refused when `Session(X=v)` is, with
    the same line (and the value kept), and taken when it is (None aside where a setting of
    the kernel cannot be unset)."""
    from forkagent_jupyter.kernel.settings import ForkAgent, SettingError, allowed_values
    from forkagent_jupyter.runtime.errors import UsageError
    from forkagent_jupyter.runtime.session.options import OptionRefusedError, SessionOptions

    traits = ForkAgent().traits(config=True)
    checked = [name for name in traits if name in SessionOptions.model_fields]
    assert len(checked) == len(traits) - 1  # all but headless_approval_timeout
    for name in checked:
        for value in CANDIDATES:
            settings = ForkAgent()
            before = getattr(settings, name)
            reason = None  # the check's own words, where it has them (the model's)
            try:
                SessionOptions.of(None, {name: value})
                refused = None
            except UsageError as exc:
                refused = str(exc)
                reason = exc.reason if isinstance(exc, OptionRefusedError) else None
            if value is None and not traits[name].allow_none:
                with pytest.raises(SettingError, match=r"refused: it takes .*\(it stays "):
                    setattr(settings, name, value)
                continue
            if refused is None:
                setattr(settings, name, value)  # taken
                continue
            with pytest.raises(SettingError) as caught:
                setattr(settings, name, value)
            if reason is not None:
                assert str(caught.value) == (
                    f"ForkAgent.{name} = {value!r} refused: {reason} (it stays {before!r})."
                ), (name, value)
                continue
            takes = allowed_values(traits[name])  # the options' words (None if it takes it)
            assert refused.startswith(f"{name} = {value!r} refused: it takes {takes}")
            assert str(caught.value) == (
                f"ForkAgent.{name} = {value!r} refused: it takes {takes} (it stays {before!r})."
            ), (name, value)
            assert getattr(settings, name) == before or before != before


def test_config_of_a_truthy_string_or_an_infinity_is_refused_in_one_line(kernel: Kernel) -> None:
    for line, said in (
        (
            "%config ForkAgent.auto_respond = 'no'",
            "ForkAgent.auto_respond = 'no' refused: it takes True or False (it stays True).",
        ),
        (
            "%config ForkAgent.approval_timeout = float('inf')",
            "ForkAgent.approval_timeout = inf refused: it takes a number of seconds above 0 and "
            "at most 604800 (it stays 600.0).",
        ),
        (
            "%config ForkAgent.max_workers = True",
            "ForkAgent.max_workers = True refused: it takes a whole number >= 1 (it stays 16).",
        ),
    ):
        shown = kernel.execute(line)
        assert shown.texts().strip().endswith(said), shown.texts()
        assert shown.texts().strip().count("\n") == 0
    assert kernel.value("__forkagent__.settings.auto_respond") is True
    assert kernel.execute("%config ForkAgent.thinking = 'adaptive'").status == "ok"
    assert kernel.value(f"{SESSION}.options.thinking") == {"type": "adaptive"}


def test_a_refused_setting_leaves_logging_as_it_was(kernel: Kernel) -> None:
    """A refusal had reached the cell as `ERROR:root:...` through IPython's `logging.error`,
    which also installed a handler on the root logger (`logging.basicConfig`)."""
    refused = kernel.execute("%config ForkAgent.approval_timeout = -1")
    said = refused.texts().strip()
    assert said.startswith("UsageError: ForkAgent.approval_timeout = -1 refused: it takes a")
    assert said.endswith("(it stays 600.0).") and "\n" not in said, said
    assert "ERROR:root" not in refused.texts()
    assert kernel.value("__import__('logging').getLogger().handlers") == []


def _failed_in_one_line(result: Any, said: str) -> None:
    """The cell ended in error (papermill and "Run all" stop there) with one line, `said` in
    it, and no traceback."""
    content = result.reply["content"]
    text = result.texts()
    assert result.status == "error", (said, text)
    assert content["ename"] == "UsageError", content
    assert said in content["evalue"] and "\n" not in content["evalue"], content
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and said in lines[0], text
    assert "Traceback" not in text and "ERROR:root" not in text


def test_a_refused_config_fails_its_cell_in_one_line(kernel: Kernel) -> None:
    """A refused `%config` printed its line and the cell went on, status ok: "Run all" and
    papermill ran on past it."""
    for code, said in (
        ("%config ForkAgent.max_workers = -1", "ForkAgent.max_workers = -1 refused"),
        ("%config ForkAgent.max_worker = 4", "ForkAgent.max_worker: no such setting"),
    ):
        refused = kernel.execute(f"{code}\nprint('went on')")
        _failed_in_one_line(refused, said)
    assert kernel.value("__forkagent__.settings.max_workers") == 16
    assert kernel.execute("%config ForkAgent.max_workers = 4").status == "ok"
    assert kernel.execute("%config ForkAgent").status == "ok"  # the listing
    assert kernel.execute("%%agent\nHello.").status == "ok"
    # refused by the running session (no Dask scheduler to join): the same
    joined = kernel.execute("%config ForkAgent.executor = 'dask'")
    _failed_in_one_line(joined, "ForkAgent.executor: ")
    assert kernel.value(f"{SESSION}.options.executor") == "local"
    assert kernel.value(f"{SESSION}.options.max_workers") == 4


def test_every_magics_refusal_fails_its_cell_in_one_line(kernel: Kernel) -> None:
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    for code, said in (
        ("%fork", "%fork: say what the worker should do"),
        ("%send nosuch hello", "%send: No task 'nosuch'"),
        ("%stop nosuch", "%stop: No task 'nosuch'"),
        ("%bg nosuch", "%bg: No task 'nosuch'"),
        ("%tasks nosuch", "%tasks: No task 'nosuch'"),
        ("%tasks --wait nosuch", "%tasks: No task 'nosuch'"),
        ("%tasks --pull", "%tasks --pull: usage"),
        ("%compact --keep x", "%compact: argument --keep"),
        ("%notifications nosuch", "nosuch"),
        ("%mcp approve", "%mcp: approve takes one server name"),
        ("%%agent --bogus\nHello.", "%%agent: unknown option --bogus"),
    ):
        _failed_in_one_line(kernel.execute(f"{code}\nprint('went on')"), said)
