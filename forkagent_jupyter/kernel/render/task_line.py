"""One formatter of a task's status and figures: tokens, cache, context, cost, memory.

The card (text and HTML), the `%tasks` table and a notification's plain text build their
lines from these. The status says how many tool calls failed ("completed, 2 of 5 tool calls
failed", in the words of `Task.failed_calls`, which the notification's summary uses too).
The Tasks panel of the JupyterLab extension formats the same figures in
`labextension/src/format.ts`; the context percent follows one rule on both sides, checked
against one table of cases (`labextension/test/context-percent.json`).

Figures reach HTML only through `no_math`: JupyterLab typesets `$...$` in HTML outputs and in
ipywidgets' HTML with MathJax, so two amounts on a line ("$0.0165 of ... $100.0000") would
show as italic math. MathJax 3.2+ (JupyterLab 4, Notebook 7, ipywidgets 8 through the page's
typesetter) skips elements of class `mathjax_ignore`; MathJax 2 (classic Notebook, HTML
exports) skips `tex2jax_ignore`. Model text (rendered Markdown) keeps being typeset.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...messages_api.usage import Usage
from ...runtime import Task

__all__ = [
    "NO_MATH",
    "context_percent",
    "context_text",
    "cost_text",
    "earlier_results",
    "member_state",
    "memory_text",
    "no_math",
    "process_text",
    "roster_text",
    "status_text",
    "task_figures",
    "tokens_detail",
    "tokens_text",
]


def status_text(task: Task) -> str:
    """The task's status at a glance: "completed", or "completed, 2 of 5 tool calls failed"
    when some of its calls failed (a run that ends by itself completes even when the code it
    ran raised, or its call was denied)."""
    failed = task.failed_calls
    return f"{task.status}, {failed}" if failed else task.status


def earlier_results(task: Task) -> list[str]:
    """The results of its runs before the latest, newest first: a `%send` follow-up's result
    does not hide the one before (the latest is `task.result`, shown first)."""
    if task.done and task.result and task.results[:1] == [task.result]:
        return task.results[1:]
    return list(task.results)


def context_percent(tokens: int, window: int) -> str:
    """`tokens` as a share of `window` (> 0): a whole percent rounded half up ("23%"); below
    1% to a tenth rounded half up ("0.4%", never "0%")."""
    tokens = max(int(tokens), 0)
    if tokens * 100 < window:
        tenths = (tokens * 2000 + window) // (2 * window)
        return f"{tenths // 10}.{tenths % 10}%"
    return f"{(tokens * 200 + window) // (2 * window)}%"


def context_text(tokens: int, window: int, compactions: int = 0) -> str:
    """An agent's context size against its window: "context 12,345 / 200,000 (6%)"."""
    if window <= 0:
        return f"context {tokens:,}"
    text = f"context {tokens:,} / {window:,} ({context_percent(tokens, window)})"
    if compactions:
        text += f", compacted {compactions}x"
    return text


def cost_text(usd: float) -> str:
    return f"${usd:.4f}"


NO_MATH = "tex2jax_ignore mathjax_ignore"


def no_math(html_text: str, tag: str = "span") -> str:
    """`html_text` (our HTML, already escaped) in a `tag` that math typesetting skips, so the
    dollar amounts in it show as written."""
    return f"<{tag} class='{NO_MATH}'>{html_text}</{tag}>"


def memory_text(task: Task) -> str:
    """ " · memory 1,024 MB" for a finished worker whose process is measured, else ""."""
    return f" · memory {task.memory_mb:,.0f} MB" if task.memory_mb is not None else ""


def process_text(task: Task) -> str:
    """ "process 4242: own 18 MB, shared 123 MB" for a running worker whose process was
    read (memory.py says what own and shared count), else ""."""
    p = task.process
    if p is None or task.done:
        return ""
    return f"process {p.pid}: own {p.own_mb:,.0f} MB, shared {p.shared_mb:,.0f} MB"


def tokens_text(u: Usage, *, writes: bool = False) -> str:
    """ "in 14,484 / out 150 tok · cache read 14,200" (and " / write 200" with `writes`)."""
    text = f"in {u.total_input_tokens:,} / out {u.output_tokens:,} tok · "
    text += f"cache read {u.cache_read_input_tokens:,}"
    return text + (f" / write {u.cache_creation_input_tokens:,}" if writes else "")


def tokens_detail(total_in: int, read: int, written: int, out: int) -> str:
    """ "tokens in 14,484 (cache read 14,200, write 200) / out 150"."""
    return f"tokens in {total_in:,} (cache read {read:,}, write {written:,}) / out {out:,}"


def task_figures(task: Task, *, writes: bool = False) -> str:
    """A task's figures in one line: tokens · context · cost (· memory)."""
    context = context_text(task.context_tokens, task.context_window, task.compactions)
    return (
        f"{tokens_text(task.usage, writes=writes)} · {context} · "
        f"{cost_text(task.cost_usd)}{memory_text(task)}"
    )


def member_state(task: Task) -> str:
    """A teammate's state in a roster: working, idle, or how it ended."""
    if task.done:
        return task.status
    return "idle" if task.idle else "working"


def roster_text(team: str, members: list[Task], interrupted: Sequence[str] = ()) -> str:
    """A team's line: "team analysts · ana working, bob idle, cyd killed"; `interrupted`: the
    names of members a kernel restart cut off, not resumed yet ("dan interrupted")."""
    said = [f"{t.name or t.id} {member_state(t)}" for t in members]
    said += [f"{name} interrupted" for name in interrupted]
    return f"team {team} · {', '.join(said) or 'no members'}"
