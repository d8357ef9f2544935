"""Git worktree isolation: an agent works in its own checkout of the repository.

`create_worktree` makes `<repo>/.forkagent/worktrees/agent-<id8>` on a new branch
`forkagent/agent-<id8>` from HEAD. The parent tree must be clean (else the agent would start
from a state that differs from what the person sees) and be in a git repository; both are
clear errors. The worktrees folder ignores itself (a `.gitignore` of `*`), so creating it
never makes the parent tree dirty. When the agent ends, `Worktree.finish` keeps the worktree
(and reports path and branch) if anything changed - uncommitted files or new commits; errors
count as changes, so nothing is ever deleted by mistake - and removes it and its branch
otherwise. `finish` is idempotent.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError

__all__ = ["Worktree", "WorktreeError", "WorktreeOutcome", "create_worktree", "worktree_notice"]


class WorktreeError(ConfigError):
    """Worktree isolation is not possible here (the message says why)."""


async def _git(*args: str, cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=str(cwd),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode("utf-8", errors="replace").rstrip()


@dataclass(frozen=True)
class WorktreeOutcome:
    kept: bool
    path: Path
    branch: str


@dataclass
class Worktree:
    repo_root: Path
    path: Path
    branch: str
    base_commit: str
    parent_workdir: Path
    workdir: Path
    outcome: WorktreeOutcome | None = field(default=None)

    async def has_changes(self) -> bool:
        code, status = await _git("status", "--porcelain", cwd=self.path)
        if code != 0 or status:
            return True
        code, count = await _git("rev-list", "--count", f"{self.base_commit}..HEAD", cwd=self.path)
        return code != 0 or count != "0"

    async def finish(self) -> WorktreeOutcome:
        if self.outcome is not None:
            return self.outcome
        self.outcome = WorktreeOutcome(True, self.path, self.branch)  # fail closed meanwhile
        if await self.has_changes():
            return self.outcome
        code, _ = await _git("worktree", "remove", "--force", str(self.path), cwd=self.repo_root)
        if code == 0:
            await _git("branch", "-D", self.branch, cwd=self.repo_root)
            self.outcome = WorktreeOutcome(False, self.path, self.branch)
        return self.outcome


def _real(path: Path | str) -> Path:
    return Path(path).resolve()


def _prepare(root: Path) -> Path:
    folder = root / ".forkagent" / "worktrees"
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return folder


async def create_worktree(workdir: Path, agent_id: str) -> Worktree:
    """A fresh worktree for `agent_id`, from HEAD of the repository holding `workdir`."""
    workdir = _real(workdir)
    code, top = await _git("rev-parse", "--show-toplevel", cwd=workdir)
    if code != 0:
        raise WorktreeError(
            f"{workdir} is not inside a git repository; worktree isolation needs one "
            "(run `git init` and commit, or start the agent without isolation)."
        )
    root = _real(top)
    code, dirty = await _git("status", "--porcelain", "--", ".", ":(exclude).forkagent", cwd=root)
    if code != 0 or dirty:
        paths = [line[3:] for line in dirty.splitlines()[:5]]
        raise WorktreeError(
            f"The repository at {root} has uncommitted changes ({', '.join(paths)}); commit or "
            "stash them first, so the isolated agent starts from what you see."
        )
    code, base = await _git("rev-parse", "HEAD", cwd=root)
    if code != 0:
        raise WorktreeError(f"The repository at {root} has no commit yet; commit something first.")
    folder = await asyncio.to_thread(_prepare, root)
    short = agent_id.removeprefix("a")[:8]
    path = folder / f"agent-{short}"
    branch = f"forkagent/agent-{short}"
    code, out = await _git("worktree", "add", "-b", branch, str(path), base, cwd=root)
    if code != 0:
        raise WorktreeError(f"git could not create the worktree: {out.splitlines()[-1:]}")
    inner = path / workdir.relative_to(root)
    return Worktree(root, path, branch, base, workdir, inner)


def worktree_notice(parent_workdir: Path, worktree_workdir: Path) -> str:
    return (
        f"You work in an isolated git worktree at {worktree_workdir}: a separate checkout of "
        f"the same repository. The conversation you inherited refers to {parent_workdir}; "
        "translate those paths to your worktree, re-read a file before you edit it (it may "
        "differ from what the conversation shows), and know that your changes stay in the "
        "worktree: the parent's files are not touched."
    )
