"""Soak: random sequences of forks, named agents (synchronous and in the background, some in
git worktrees), messages, stops, bulk stops, model failures and restarts against the
emulator, with the lifecycle invariants checked after every step:

* every run ends in exactly one terminal state;
* every notification reaches exactly one live reader exactly once (the parent model or the
  running agent that launched the task; for a stop the user asked for, the notebook only; a
  synchronous agent's result is its Agent call's result), and none waits for an owner that
  has ended;
* no message is accepted and then dropped (it is in the agent's conversation, or held for
  its next run when the run failed or was stopped before reading it);
* no worktree is left behind or bypassed (`git worktree list` holds exactly the kept ones,
  the user's checkout stays clean).

Seeded (FORKAGENT_SOAK_SEED, default 19) and sized for CI (FORKAGENT_SOAK_SEQUENCES, default
8); the counts go to benchmarks/out/soak.json and are printed. A violation fails at once with
the seed, the sequence's operations and the history of each task it names; seeds that once
found one are replayed in `test_soak_regressions`.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, last_user_text
from forkagent_jupyter.emulator.faults import Fault
from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import STOPPED_BY_USER, Session
from forkagent_jupyter.runtime.tasks.notifications import Command
from forkagent_jupyter.runtime.tasks.registry import Task

from .helpers import git, make_repo

pytestmark = [pytest.mark.anyio, pytest.mark.soak]

SEED = int(os.environ.get("FORKAGENT_SOAK_SEED", "19"))
SEQUENCES = int(os.environ.get("FORKAGENT_SOAK_SEQUENCES", "8"))
STEPS = 14
OUT = Path(__file__).resolve().parents[2] / "benchmarks" / "out" / "soak.json"

_SYNC = re.compile(r"SYNC-AGENT (\S+)")
_BG = re.compile(r"BG-AGENT (\S+)( ISO)?( W:(\S+))?")
_WRITE = re.compile(r"WRITE (\S+)")


class SoakBrain:
    """The parent starts named agents on cue; agents write files on cue; else the offline
    model (which runs `py:` spans as Python calls and reports)."""

    def __init__(self) -> None:
        self.offline = OfflineBrain()

    def reply(self, request: Mapping[str, Any]) -> Reply:
        text = last_user_text(request)
        sync = _SYNC.search(text)
        if sync:
            return _agent(f"sub {sync.group(1)} `py: 1 + 1`", background=False)
        bg = _BG.search(text)
        if bg:
            prompt = f"WRITE {bg.group(4)}" if bg.group(4) else f"bg {bg.group(1)} `py: 2 + 2`"
            return _agent(prompt, background=True, isolated=bool(bg.group(2)))
        write = _WRITE.search(text)
        if write:
            return Reply.tool_use("Write", {"file_path": write.group(1), "content": "x\n"})
        return self.offline.reply(request)


def _agent(prompt: str, *, background: bool, isolated: bool = False) -> Reply:
    call: dict[str, Any] = {
        "description": "soak agent",
        "prompt": prompt,
        "subagent_type": "general-purpose",
        "run_in_background": background,
    }
    if isolated:
        call["isolation"] = "worktree"
    return Reply(({"type": "tool_use", "name": "Agent", "input": call},))


@dataclass
class Ledger:
    """What happened, as the invariants need it; violations are collected, not raised."""

    gen: int = 0  # which session (a restart opens the next)
    ended: dict[tuple[int, str, int], str] = field(default_factory=dict)
    settled: dict[tuple[int, str, int], bool] = field(default_factory=dict)  # -> quiet
    delivered: Counter[tuple[int, str]] = field(default_factory=Counter)
    shown: Counter[tuple[int, str]] = field(default_factory=Counter)
    latest: dict[str, Task] = field(default_factory=dict)
    accepted: list[tuple[str, str]] = field(default_factory=list)  # (task id, token)
    written: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    ops: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    seen_turns: int = 0
    messages: int = 0
    trail: list[str] = field(default_factory=list)  # this sequence's operations, in order
    events: dict[str, list[str]] = field(default_factory=dict)  # task id -> what it went through
    t0: float = field(default_factory=time.monotonic)

    def note(self, task_id: str, what: str) -> None:
        """One line of a task's history, timed (for the report of a violation)."""
        lines = self.events.setdefault(task_id, [])
        line = f"{time.monotonic() - self.t0:8.3f} gen {self.gen}: {what}"
        if not lines or lines[-1].split(": ", 1)[1] != what:
            lines.append(line)

    def op(self, what: str) -> None:
        self.trail.append(f"{time.monotonic() - self.t0:8.3f} {what}")

    def watch(self, task: Task) -> None:
        self.latest[task.id] = task
        self.note(
            task.id,
            f"{task.status} run {task.run} owner {task.owner} settled={task.settled} "
            f"quiet={task.quiet} foreground={task.foreground}"
            + (f" error={task.error!r}" if task.error else ""),
        )
        if not task.done:
            return
        key = (self.gen, task.id, task.run)
        first = self.ended.setdefault(key, task.status)
        if first != task.status:
            self.violations.append(f"{key}: ended {first}, then {task.status}")
        if task.settled and key not in self.settled:
            self.settled[key] = task.quiet

    def runs(self, task_id: str, quiet: bool) -> int:
        return sum(
            1
            for (g, t, _), q in self.settled.items()
            if g == self.gen and t == task_id and q == quiet
        )


class Soak:
    def __init__(self, emulator: Any, root: Path, rng: random.Random, ledger: Ledger) -> None:
        self.emulator = emulator
        self.root = root
        self.repo = make_repo(root / "repo")
        self.rng = rng
        self.ledger = ledger
        self.turns: list[asyncio.Task[Any]] = []
        self.known: list[str] = []  # task ids and names, this and earlier sessions
        self.counter = 0
        self.session = self._open()

    def _open(self) -> Session:
        session = Session(
            backend="anthropic",
            api_key="test-key",
            base_url=self.emulator.base_url,
            workdir=self.repo,
            home=self.root / "home",
            transcripts=self.root / "transcripts",
            permission_policy=AllowAll(),
            permission_mode="bypassPermissions",
        )
        self.ledger.gen += 1
        session.registry.subscribe(self.ledger.watch)
        self.ledger.seen_turns = 0
        drain = session.queue.drain

        def observed(owner: str, **kw: Any) -> list[Command]:
            """Who read which notification: the delivery ledger (an observer only)."""
            taken = drain(owner, **kw)
            live = owner == "main" or session.registry.recipient(owner) == owner
            for command in taken:
                self.ledger.note(command.task_id or "", f"notification read by {owner}")
                if not live:
                    self.ledger.violations.append(f"{command.task_id} read by ended {owner}")
                self.ledger.delivered[self.ledger.gen, command.task_id or ""] += 1
            return taken

        session.queue.drain = observed  # type: ignore[method-assign]
        return session

    def token(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}{self.counter}"

    # -- operations -------------------------------------------------------------------------

    async def fork(self) -> None:
        seconds = self.rng.choice([0, 0.2, 0.6])
        code = f"__import__('time').sleep({seconds}) or {self.counter}"
        name = self.token("f")
        task = await self.session.fork(f"work `py: {code}`", name=name)
        self.ledger.op(f"fork {name} = {task.id} sleeping {seconds}s")
        self.known += [task.id, name]

    def _turn(self, prompt: str) -> None:
        self.ledger.op(f"parent turn {prompt!r}")
        self.turns.append(asyncio.ensure_future(self.session.ask(prompt)))

    async def sync_agent(self) -> None:
        self._turn(f"SYNC-AGENT {self.token('s')}")

    async def background_agent(self) -> None:
        token = self.token("b")
        isolated = self.rng.random() < 0.6
        write = isolated and self.rng.random() < 0.5
        prompt = f"BG-AGENT {token}" + (" ISO" if isolated else "")
        if write:
            prompt += f" W:{token}.txt"
            self.ledger.written.append(f"{token}.txt")
        self._turn(prompt)

    async def send(self) -> None:
        self.known += [t.id for t in self.session.tasks if t.id not in self.known]
        if self.rng.random() < 0.1:
            to = "main"
        elif self.known:
            to = self.rng.choice(self.known)
        else:
            return
        token = self.token("m")
        target = self.session.registry.find(to)
        before = f"{target.id} {target.status} run {target.run}" if target else "not held here"
        try:
            reply = await self.session.send(to, f"note {token}, then `py: 3 * 3`")
        except UsageError as exc:
            self.ledger.op(f"send {token} to {to} ({before}): refused: {exc}")
            self.ledger.refused["send"] += 1
            if to == "main":
                return
            # refused only for a kept worktree that is gone; never here
            self.ledger.violations.append(f"send to {to} refused")
            return
        if to == "main":
            self.ledger.violations.append(f"send to main accepted: {reply}")
            return
        task = self.session.registry.get(to)
        self.ledger.op(f"send {token} to {to} ({before}): {reply}")
        self.ledger.note(task.id, f"message {token} accepted: {reply}")
        self.ledger.accepted.append((task.id, token))
        self.ledger.messages += 1

    async def stop(self) -> None:
        running = self.session.registry.running()
        if not running:
            return
        chosen = self.rng.choice(running).id
        self.ledger.op(f"stop {chosen}")
        self.ledger.note(chosen, "stop asked")
        try:
            await self.session.stop(chosen)
        except UsageError:
            self.ledger.refused["stop"] += 1  # it ended by itself meanwhile

    async def stop_all(self) -> None:
        self.ledger.op(f"stop_all (running: {[t.id for t in self.session.registry.running()]})")
        await self.session.stop_all()

    async def failure(self) -> None:
        fault = self.rng.choice(
            [Fault.error(500, "soak", retry_after_ms=0), Fault.error(400, "soak")]
        )
        times = 3 if fault.status == 500 else 1
        self.ledger.op(f"failure: the next {times} request(s) get {fault.status}")
        self.emulator.faults.next(fault, times=times)

    async def restart(self) -> None:
        self.ledger.op("restart")
        await self.quiesce()
        await self.session.aclose()
        self.session = self._open()

    # -- checks -----------------------------------------------------------------------------

    def read_turns(self) -> None:
        turns = self.session.responder.auto_turns
        for auto in turns[self.ledger.seen_turns :]:
            for task_id in auto.task_ids:
                if auto.turn.text == STOPPED_BY_USER:
                    self.ledger.note(task_id, "shown to the user only (stopped by the user)")
                    self.ledger.shown[self.ledger.gen, task_id] += 1
        self.ledger.seen_turns = len(turns)

    def check(self, step: str) -> None:
        """What holds at every moment."""
        led = self.ledger
        self.read_turns()
        for gen, task_id in set(led.delivered) | set(led.shown):
            if gen != led.gen:
                continue
            if led.delivered[gen, task_id] > led.runs(task_id, quiet=False):
                led.violations.append(f"{step}: {task_id} delivered more than once per run")
            if led.shown[gen, task_id] > led.runs(task_id, quiet=True):
                led.violations.append(f"{step}: {task_id} shown more than once per run")
        for command in self.session.queue.pending():
            owner = command.owner
            if owner != "main" and self.session.registry.recipient(owner) != owner:
                led.violations.append(f"{step}: notification stranded for ended {owner}")

    async def quiesce(self) -> None:
        """Wait until nothing runs, then check what must hold once all is done."""
        for turn in self.turns:
            with_error = await asyncio.gather(turn, return_exceptions=True)
            del with_error
        self.turns.clear()
        await asyncio.wait_for(self.session.idle(), 60)
        self.check("quiet")
        led = self.ledger
        for task in self.session.tasks:
            if not task.settled:
                led.violations.append(f"{task.id} not ended at rest")
            delivered = led.delivered[led.gen, task.id]
            expected = led.runs(task.id, quiet=False)
            if delivered != expected:
                led.violations.append(
                    f"{task.id} ({task.kind}, {task.status}, run {task.run}, "
                    f"{task.error}): {expected} notification(s) for the model, {delivered} read"
                )
        if len(self.session.queue):
            led.violations.append(f"{len(self.session.queue)} notification(s) never read")
        for task_id, token in led.accepted:
            run = self.session.workers.runs.get(task_id)
            if run is None:  # an earlier session's agent: checked before its restart
                continue
            if token not in str(run.history) and not any(token in m for m in run.inbox):
                led.violations.append(f"message {token} to {task_id} accepted and dropped")
        led.accepted = [
            (t, m) for t, m in led.accepted if t not in self.session.workers.runs
        ]  # checked
        self.check_worktrees()

    def report(self, where: str) -> str:
        """What a violation needs to be understood from CI output alone: the violations, this
        sequence's operations, and the history and conversation of each task they name."""
        led = self.ledger
        lines = [f"{where}:", *led.violations, "", "operations of this sequence:", *led.trail]
        for task_id in [t for t in led.latest if any(t in v for v in led.violations)]:
            task = led.latest[task_id]
            lines += [
                "",
                f"task {task_id} ({task.kind}, {task.name}, {task.description!r}): "
                f"{task.status}, run {task.run}, owner {task.owner}, settled {task.settled}, "
                f"quiet {task.quiet}, error {task.error!r}",
                *led.events.get(task_id, []),
            ]
            history = self.session.history(task_id)
            lines.append(f"  its conversation ({len(history)} messages):")
            lines += [f"    {_brief(m)}" for m in history]
        lines.append(f"the parent's conversation ({len(self.session.messages)} messages, last 12):")
        lines += [f"    {_brief(m)}" for m in self.session.messages[-12:]]
        queued = [(c.owner, c.task_id) for c in self.session.queue.pending()]
        lines.append(f"queued notifications (owner, task): {queued}")
        return "\n".join(lines)

    def check_worktrees(self) -> None:
        led = self.ledger
        listed = {
            line.split()[0]
            for line in git(self.repo, "worktree", "list").splitlines()
            if "/.forkagent/worktrees/agent-" in line
        }
        mine = str(self.repo) + os.sep
        kept = {p for t in led.latest.values() if (p := t.worktree_path) and p.startswith(mine)}
        if listed != kept:
            led.violations.append(f"worktrees listed {sorted(listed)} but kept {sorted(kept)}")
        folder = self.repo / ".forkagent" / "worktrees"
        if folder.is_dir():
            leftovers = {str(p) for p in folder.iterdir() if p.is_dir()} - listed
            if leftovers:
                led.violations.append(f"leftover worktree folders {sorted(leftovers)}")
        if git(self.repo, "status", "--porcelain"):
            led.violations.append("the user's checkout changed")
        for name in led.written:
            if (self.repo / name).exists():
                led.violations.append(f"{name} written in the checkout")


def _brief(message: Mapping[str, Any]) -> str:
    """A message in one line: its role and each block shortened."""
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    parts = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(repr(block["text"][:160]))
        elif kind == "tool_use":
            parts.append(f"tool_use {block['name']} {json.dumps(block['input'])[:120]}")
        elif kind == "tool_result":
            parts.append(f"tool_result {str(block.get('content'))[:160]!r}")
        else:
            parts.append(str(kind))
    return f"{message.get('role')}: " + " | ".join(parts)


OPERATIONS = {
    "fork": 5,
    "sync_agent": 2,
    "background_agent": 4,
    "send": 5,
    "stop": 2,
    "stop_all": 1,
    "failure": 2,
    "restart": 2,
}


# Seeds that once found a violation, replayed up to the sequence that showed it:
# 201 (sequence 4): a message sent to a fork whose stop had settled was accepted and dropped.
# 201 (sequence 4, under load): a bulk stop of a resumed fork dropped its first run's
# unread report.
REGRESSIONS = [pytest.param(201, 5, id="seed201")]


# ~25 s alone; a machine busy with other suites made it several times slower (the default
# 120 s limit then failed runs that held every invariant)
SOAK_TIMEOUT = 600


@pytest.mark.timeout(SOAK_TIMEOUT)
async def test_soak(emulator: Any, tmp_path: Path) -> None:
    await _soak(emulator, tmp_path, SEED, SEQUENCES, out=OUT)


@pytest.mark.timeout(SOAK_TIMEOUT)
@pytest.mark.parametrize(("seed", "sequences"), REGRESSIONS)
async def test_soak_regressions(emulator: Any, tmp_path: Path, seed: int, sequences: int) -> None:
    await _soak(emulator, tmp_path, seed, sequences, out=None)


async def _soak(emulator: Any, tmp_path: Path, seed: int, sequences: int, out: Path | None) -> None:
    emulator.brain = SoakBrain()
    rng = random.Random(seed)
    ledger = Ledger()
    names, weights = zip(*OPERATIONS.items(), strict=True)
    for n in range(sequences):
        soak = Soak(emulator, tmp_path / f"seq{n}", rng, ledger)
        ledger.trail = []
        try:
            for step in range(STEPS):
                op = rng.choices(names, weights)[0]
                ledger.ops[op] += 1
                ledger.op(f"step {step}: {op}")
                await getattr(soak, op)()
                await asyncio.sleep(rng.choice([0, 0.05, 0.2]))
                soak.check(f"seq {n} step {step} {op}")
                if ledger.violations:
                    raise AssertionError(soak.report(f"seed {seed}, sequence {n}, step {step}"))
            await soak.quiesce()
            if ledger.violations:
                raise AssertionError(soak.report(f"seed {seed}, sequence {n}, at rest"))
        finally:
            soak.emulator.faults.clear()
            await soak.session.aclose()
    counts = {
        "seed": seed,
        "sequences": sequences,
        "operations": sum(ledger.ops.values()),
        "by_operation": dict(sorted(ledger.ops.items())),
        "runs_ended": len(ledger.ended),
        "by_status": dict(Counter(ledger.ended.values())),
        "notifications_read": sum(ledger.delivered.values()),
        "notifications_shown_only": sum(ledger.shown.values()),
        "messages_accepted": ledger.messages,
        "refused": dict(ledger.refused),
        "violations": len(ledger.violations),
    }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(counts, indent=1) + "\n")
    print("soak:", json.dumps(counts))
    assert ledger.violations == [], "\n".join(ledger.violations[:20])
