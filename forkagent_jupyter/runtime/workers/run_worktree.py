"""Where an agent run works when it has a git worktree of its own: moved in at launch, the
worktree cleaned up at its end (kept when it holds changes), checked or created again when
the agent resumes. A run that had a worktree never falls back to the parent's checkout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from pathlib import Path

from ..errors import RunEndedError, UsageError
from ..history import append_message
from ..transcripts.store import WorktreeRecord
from .agent_run import AgentRun
from .worktree import Worktree, WorktreeError, create_worktree, worktree_notice

__all__ = ["clean_worktree", "isolate", "place", "recreate_worktree", "renew_worktree"]

log = logging.getLogger(__name__)


def place(run: AgentRun, worktree: Worktree) -> None:
    """Make `worktree` the run's working place."""
    run.worktree = worktree
    run.config = replace(run.config, ctx=replace(run.config.ctx, workdir=worktree.workdir))


def isolate(run: AgentRun, worktree: Worktree | None) -> None:
    """Move the run into its worktree and tell it so (its own last message)."""
    if worktree is None:
        return
    place(run, worktree)
    notice = worktree_notice(worktree.parent_workdir, worktree.workdir, inherited=run.is_fork)
    append_message(run.history, {"role": "user", "content": [{"type": "text", "text": notice}]})


def require_dir(path: Path, name: str) -> None:
    """Refuse a resume whose kept worktree is gone (it would run in the checkout instead)."""
    if path.is_dir():
        return
    raise UsageError(
        f"Agent {name} worked in the git worktree {path}, which no longer exists; it is not "
        "resumed (it would run in your checkout instead). Start a new agent."
    )


def renew_worktree(run: AgentRun) -> None:
    """Before a resume: the worktree it kept must still be there (else refuse); one that
    was removed unchanged is created again when the run starts."""
    worktree = run.worktree
    if worktree is None:
        return
    fresh = Worktree.from_fields(worktree.fields())  # its clean-up runs again at the end
    removed = False
    with contextlib.suppress(Exception):
        outcome = worktree.outcome
        removed = outcome is not None and not outcome.kept
    if not removed and not run.reisolate:
        require_dir(fresh.path, (run.task.name if run.task else None) or run.id)
    run.reisolate = run.reisolate or removed
    run.worktree = fresh


async def recreate_worktree(run: AgentRun) -> None:
    """Create the worktree of a resumed agent again (its earlier one, unchanged, was
    removed), at the same place; refuse to run anywhere else."""
    old = run.worktree
    assert old is not None
    # shielded and kept on the run: a stop meanwhile does not leave a worktree that
    # nobody cleans up (`clean_worktree` waits for it)
    run.creating = asyncio.ensure_future(create_worktree(old.parent_workdir, run.id))
    try:
        fresh = await asyncio.shield(run.creating)
    except WorktreeError as exc:
        raise RunEndedError(
            f"cannot resume in a git worktree again ({exc}); not run in your checkout"
        ) from None
    run.creating = None
    run.reisolate = False
    place(run, fresh)
    if run.transcript is not None:
        run.transcript.update_meta(
            worktree_path=str(fresh.path), worktree=WorktreeRecord(**fresh.fields())
        )


async def clean_worktree(run: AgentRun) -> None:
    """Remove the run's worktree unless it holds changes (git failing: kept)."""
    task = run.task
    if run.creating is not None:  # stopped while its worktree was being created
        creating, run.creating = run.creating, None
        with contextlib.suppress(Exception):
            place(run, await creating)
            run.reisolate = False
    worktree = run.worktree
    if task is None or worktree is None:
        return
    if run.reisolate:  # it was never created again: nothing to clean
        task.worktree_path = task.worktree_branch = None
    else:
        try:
            outcome = await worktree.finish()
        except Exception as exc:  # fail closed: keep it, say so
            log.warning("worktree %s kept: clean-up failed: %s", worktree.path, exc)
            task.worktree_path, task.worktree_branch = str(worktree.path), worktree.branch
        else:
            task.worktree_path = str(outcome.path) if outcome.kept else None
            task.worktree_branch = outcome.branch if outcome.kept else None
    if run.transcript is not None:
        run.transcript.update_meta(worktree_path=task.worktree_path)
