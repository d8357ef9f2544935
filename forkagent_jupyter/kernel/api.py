"""Notebook code's handle on the extension: the session, rules, pending approvals, costs.

For cells that run without a person to click (a notebook executed headless) and for cells
that want the runtime's own data::

    from forkagent_jupyter.kernel import api
    api.allow("Python")             # an allow rule for this session and all its workers
    await api.permissions()         # the rules in force, where each came from, and refused ones
    await api.trust()               # trust this folder: what its own files grant applies
    api.pending()                   # approvals waiting for an answer
    await api.wait_pending("writer")  # ... or wait for one to appear
    api.answer("allow")             # answer them as the card's buttons would
    print(api.costs().text())       # per-agent and total cost, with and without the cache
    api.notifications()             # the workers' notifications and the parent's answers
    values = await api.pull("w1", "model", "scores")  # copies of a worker's values
    api.use_dask(client)            # workers' code on this distributed.Client's cluster
    fan = await api.fan_out(directives, batch=True)  # one Message Batch, one card
    api.batch_results(fan.id).to_dataframe()         # one row per fork
    figure, rows = (await api.timeline("w1", "w2"))[:2]  # a fan-out on a time axis
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from IPython.core.error import UsageError
from IPython.core.getipython import get_ipython

from ..runtime import CostReport, cost_report
from .comm.protocol import ANSWERS
from .said import said_as

if TYPE_CHECKING:
    from ..runtime import DaskClient, Session
    from .cards.approval_prompt import ApprovalPrompt
    from .extension import KernelAgent
    from .views.timeline_view import TimelineView

__all__ = [
    "Answered",
    "Notifications",
    "agent",
    "allow",
    "answer",
    "batch_results",
    "costs",
    "deny",
    "fan_out",
    "notifications",
    "pending",
    "pull",
    "session",
    "timeline",
    "trust",
    "use_dask",
    "wait_pending",
]


def agent() -> KernelAgent:
    """The `KernelAgent` of this kernel (`%load_ext forkagent_jupyter` first)."""
    shell = get_ipython()
    found = shell.user_ns.get("__forkagent__") if shell is not None else None
    if found is None:
        raise UsageError("forkagent is not loaded: run %load_ext forkagent_jupyter first")
    agent: KernelAgent = found
    return agent


def session() -> Session:
    """This kernel's `Session` (created on first use, like the magics do)."""
    return agent().session


def allow(*rules: str) -> None:
    """Add allow rules (`"Python"`, `"Bash(git status:*)"`, `"Edit(/out/**)"`) to the session
    and its workers; a rule that is not one is refused in one line, the others are added."""
    _add(rules, "allow")


def ask(*rules: str) -> None:
    """Add ask rules: a matching call is put to you even where a mode or an allow rule would
    let it run."""
    _add(rules, "ask")


def deny(*rules: str) -> None:
    """Add deny rules; a deny rule wins over every allow rule and mode."""
    _add(rules, "deny")


def _add(rules: tuple[str, ...], kind: Literal["allow", "ask", "deny"]) -> None:
    refused = session().gate.rules.add_all(list(rules), kind, f"api.{kind}")
    if refused:
        raise UsageError("; ".join(r.reason for r in refused))


async def permissions() -> dict[str, object]:
    """The rules in force (`allow`, `ask`, `deny`: each rule with the file or call it came
    from), the mode and where it came from, the additional directories, and the rules refused
    with why; the settings files are read again first (as `%permissions` does)."""
    return await session().parent.load_settings()


async def trust() -> str:
    """Trust the session's folder, as `%trust yes` does: recorded in `~/.claude.json`, what
    its own files grant (allow rules, mode, directories, hooks, MCP servers) applies from the
    next turn. Returns the line that says so."""
    with said_as("api.trust"):
        return await session().trust()


def pending(task: str | None = None) -> list[ApprovalPrompt]:
    """The approval prompts waiting for an answer (of one task id or name, if given)."""
    ui = agent().ui
    prompts = [p for p in ui.pending.values() if not p.future.done()]
    if task is not None:
        task_id = session().task(task).id
        prompts = [p for p in prompts if p.request.task_id == task_id]
    return prompts


async def wait_pending(task: str | None = None, timeout: float = 30.0) -> list[ApprovalPrompt]:
    """Wait (without blocking the kernel) until an approval is pending, then return them."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (found := pending(task)):
        if loop.time() > deadline:
            raise TimeoutError(f"no approval was requested within {timeout:.0f} s")
        await asyncio.sleep(0.05)
    return found


def answer(choice: str, task: str | None = None, reason: str | None = None) -> int:
    """Answer the pending approvals (of `task`, if given) as the buttons would:
    "allow" (once), "always" (allow for the session) or "deny" (`reason` goes to the model).
    Returns how many were answered."""
    if choice not in ANSWERS:
        raise UsageError(f"answer: choice must be one of {', '.join(ANSWERS)}, not {choice!r}")
    prompts = pending(task)
    for prompt in prompts:
        prompt.answer(choice, reason)
    return len(prompts)


async def pull(task: str, *names: str, trust: bool = False) -> dict[str, object]:
    """Copies of the values worker `task` holds under `names` (its own process's namespace),
    as a dict; nothing is bound in yours. Plain data, arrays and frames come back as data;
    other objects only with `trust=True` (unpickling runs code the worker chose). A value
    that cannot come back, an unknown name or a worker whose process has ended is a
    UsageError naming it."""
    with said_as("pull"):
        found = session().task(task)
        return dict(await session().pull(found.id, *names, trust=trust))


def background(task: str) -> None:
    """Move a synchronous named agent (one the parent's Agent call waits for) to the
    background: the parent's turn goes on, and the agent's result comes later as a
    notification. What the card's "Run in background" button and `%bg` do."""
    agent().background(task)


def costs() -> CostReport:
    """Tokens and cost of the parent and each task, with what they would cost uncached."""
    s = session()
    return cost_report(s.tasks, s.usage, s.cost_usd, s.model)


async def timeline(*ids: str) -> TimelineView:
    """The fan-out of these tasks (ids or names; default: every agent of the session, or
    after a restart the last session's) drawn on a time axis from the transcripts: a lane per
    agent, each model request from send to last token with its first token and cache tokens,
    when the lead's cache write became readable and which siblings read it, tool calls,
    approvals, rate-limit waits, retries, and each report's arrival in the parent.

    Returns a `TimelineView`: `figure, rows, ... = await api.timeline()` (a matplotlib Figure
    and a pandas DataFrame with one row per bar); shown by itself, it is the PNG."""
    return await agent().timeline(list(ids))


@dataclass(frozen=True)
class Answered:
    """One automatic turn of the parent: the `<task-notification>`s it read (their XML) and
    its answer."""

    notifications: tuple[str, ...]
    answer: str


class Notifications(list[Answered]):
    """What `api.notifications()` returns: a list, newest last; shown as a cell's value, the
    notifications as XML blocks, each followed by the parent's answer."""

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        from .render.markdown import SafeMarkdown, fenced

        parts = []
        for answered in self:
            xml = "\n\n".join(fenced(note, "xml") for note in answered.notifications)
            parts.append(f"{xml}\n\n**parent:** {answered.answer}")
        shown = SafeMarkdown("\n\n---\n\n".join(parts) or "*No notifications yet.*")
        return shown._repr_mimebundle_(include, exclude)


def notifications() -> Notifications:
    """Every `<task-notification>` the parent received so far, with the parent's answer to
    each (`.notifications`, `.answer`); a cell that ends with it shows them as the JupyterLab
    extension's inserted cells do."""
    return Notifications(
        Answered(tuple(auto.notifications), auto.turn.text)
        for auto in session().responder.auto_turns
    )


def use_dask(client: DaskClient) -> None:
    """Run isolated workers' code on the cluster of this `distributed.Client` from the next
    worker on (`%config ForkAgent.executor = "local"` goes back to local processes)."""
    found = agent()
    with said_as("use_dask"):
        session().use_dask(client)
    found.set_quietly("executor", "dask")


async def fan_out(
    directives: list[str],
    *,
    batch: bool = False,
    names: list[str | None] | None = None,
    items: list[object] | None = None,
    poll_interval: float = 30.0,
    notify: Literal["digest", "each"] = "digest",
) -> Any:
    """One fork per directive (`Session.fan_out`); `batch=True` sends their first requests as
    one Message Batch and shows one card for it. Returns the `FanOut` (`.tasks`, `.id`)."""
    from .views.batch_view import BatchCard

    with said_as("fan_out"):
        fan = await session().fan_out(
            directives,
            batch=batch,
            names=names,
            items=items,
            poll_interval=poll_interval,
            notify=notify,
        )
    if fan.batch is not None:
        BatchCard(len(fan.tasks), f"{len(fan.tasks)} directives").attach(fan.batch)
    return fan  # real-time forks: each card is shown by its task event


def batch_results(batch_id: str) -> Any:
    """One row per fork of a batched fan-out (`BatchResults`: a list of dicts;
    `.to_dataframe()` for pandas)."""
    with said_as("batch_results"):
        return session().batch_results(batch_id)
