"""Git worktree isolation: an agent works in its own checkout of the repository.

`create_worktree(workdir, agent_id)` checks out HEAD of the repository holding `workdir` into
`<repo>/.forkagent/worktrees/agent-<id8>` on a new branch `forkagent/agent-<id8>` (`id8`: the
first 8 characters of the id after its leading `a`). The agent's working directory is the
same relative path inside the worktree as `workdir` inside the repository.

Refused, with a `WorktreeError` saying what to do: a directory outside any git repository, a
repository without commits, and a tree with uncommitted changes (untracked files included:
the agent would not see them in its checkout, while the person does).

Keeping the parent tree clean: the worktrees folder holds a `.gitignore` of `*`, which
ignores the folder's whole content, itself included. Unlike `.git/info/exclude` it touches
nothing in the user's git metadata, works the same in every clone and worktree, and goes
away with the folder.

When the agent ends, `Worktree.finish()` keeps the worktree if anything happened in it -
uncommitted changes, new files (untracked or ignored: outputs often go to ignored folders;
caches such as `__pycache__` aside), or commits beyond the base - and otherwise removes the
worktree and deletes its branch. A git
failure counts as a change (fail closed: an agent's work is never deleted by mistake).
`finish` is idempotent and safe to call concurrently: every call gets the first outcome.

Git runs in subprocesses through asyncio (the event loop is never blocked), as the runtime's
own git always runs (`executors.confinement.own_git`): confined like Bash, without
credentials, with the commands a repository's configuration names (fsmonitor, hooks,
filters...) turned off.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from ..errors import ConfigError
from ..executors.confinement.own_git import run_git

__all__ = [
    "WORKTREES_DIR",
    "Worktree",
    "WorktreeError",
    "WorktreeOutcome",
    "create_worktree",
    "translate_path",
    "worktree_notice",
]

WORKTREES_DIR = PurePath(".forkagent", "worktrees")
_CACHE_DIRS = frozenset(
    {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
)


class WorktreeError(ConfigError):
    """Worktree isolation is not possible here (the message says why and what to do)."""


async def _git(*args: str, cwd: Path) -> tuple[int, str]:
    """(exit code, output) of one git command (`own_git`: confined, nothing the repository's
    files name runs): its stdout when it succeeded, else what it said; 127 if git cannot be
    started."""
    done = await run_git(*args, cwd=cwd)
    text = done.out if done.code == 0 else (done.err.strip() or done.out)
    return done.code, text.rstrip()


def _porcelain_paths(status: str) -> list[str]:
    return [line[3:] for line in status.splitlines() if len(line) > 3]


@dataclass(frozen=True)
class WorktreeOutcome:
    """How a worktree ended: kept (with its path and branch to report) or removed."""

    kept: bool
    path: Path
    branch: str


@dataclass(eq=False)
class Worktree:
    """One agent's checkout. `workdir` is where the agent works (inside `path`)."""

    repo_root: Path
    path: Path
    branch: str
    base_commit: str
    parent_workdir: Path
    workdir: Path
    _finishing: asyncio.Task[WorktreeOutcome] | None = field(default=None, init=False, repr=False)

    @property
    def outcome(self) -> WorktreeOutcome | None:
        """The outcome once `finish` has completed, else None."""
        task = self._finishing
        return task.result() if task is not None and task.done() else None

    def fields(self) -> dict[str, str]:
        """What a transcript records to work in this worktree again (`from_fields`)."""
        return {
            "repo_root": str(self.repo_root),
            "path": str(self.path),
            "branch": self.branch,
            "base_commit": self.base_commit,
            "parent_workdir": str(self.parent_workdir),
            "workdir": str(self.workdir),
        }

    @classmethod
    def from_fields(cls, data: dict[str, str]) -> Worktree:
        """A handle on a recorded worktree (a fresh one: its `finish` has not run)."""
        return cls(
            Path(data["repo_root"]),
            Path(data["path"]),
            data["branch"],
            data["base_commit"],
            Path(data["parent_workdir"]),
            Path(data["workdir"]),
        )

    def translate(self, path: str | os.PathLike[str]) -> Path:
        """`path` (absolute, in the parent's repository) as the same file in this worktree."""
        return translate_path(path, self.repo_root, self.path)

    async def has_changes(self) -> bool:
        """True if the worktree differs from its base in any way, or if git cannot tell."""
        code, status = await _git(
            "status", "--porcelain", "--ignored", "--untracked-files=all", cwd=self.path
        )
        if code != 0:
            return True
        for line in status.splitlines():  # any change counts, new ignored files included
            new = line.startswith(("?? ", "!! "))
            if not (new and _CACHE_DIRS.intersection(PurePath(line[3:]).parts)):
                return True
        code, count = await _git(
            "rev-list", "--count", "HEAD", self.branch, f"^{self.base_commit}", cwd=self.path
        )
        return code != 0 or count.strip() != "0"

    async def finish(self) -> WorktreeOutcome:
        """Keep the worktree if it changed, else remove it and its branch. Idempotent."""
        if self._finishing is None:
            self._finishing = asyncio.ensure_future(self._finish())
        # shielded: a caller cancelled mid-way does not leave a half-removed worktree
        return await asyncio.shield(self._finishing)

    async def _finish(self) -> WorktreeOutcome:
        kept = WorktreeOutcome(True, self.path, self.branch)
        if await self.has_changes():
            return kept
        code, _ = await _git("worktree", "remove", "--force", str(self.path), cwd=self.repo_root)
        if code != 0:
            return kept
        await _git("branch", "-D", self.branch, cwd=self.repo_root)
        return WorktreeOutcome(False, self.path, self.branch)


def _existing_dir(path: Path) -> Path:
    resolved = Path(path).resolve()
    if not resolved.is_dir():
        raise WorktreeError(f"{resolved} is not a directory; cannot create a worktree for it.")
    return resolved


def _prepare_folder(home: Path) -> Path:
    folder = home / WORKTREES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# worktrees of forkagent agents: never part of the repository\n*\n")
    return folder


async def create_worktree(workdir: Path, agent_id: str) -> Worktree:
    """A fresh worktree for `agent_id`, from HEAD of the repository holding `workdir`."""
    workdir = await asyncio.to_thread(_existing_dir, workdir)
    code, top = await _git("rev-parse", "--show-toplevel", cwd=workdir)
    if code == 127:
        raise WorktreeError(f"Worktree isolation needs git, which is not available ({top}).")
    if code != 0 or not top:
        raise WorktreeError(
            f"{workdir} is not inside a git repository; worktree isolation needs one "
            "(run `git init` and commit your files, or start the agent without isolation)."
        )
    root = Path(top)  # git prints it with symlinks resolved, like `workdir`
    code, status = await _git("status", "--porcelain", "--untracked-files=all", cwd=root)
    if code != 0:
        raise WorktreeError(f"git status failed in {root}: {status}")
    if status:
        paths = _porcelain_paths(status)
        listed = ", ".join(paths[:5]) + (f", and {len(paths) - 5} more" if len(paths) > 5 else "")
        raise WorktreeError(
            f"The repository at {root} has uncommitted changes ({listed}); commit or "
            "stash them first, so that the isolated agent starts from the files you see."
        )
    code, base = await _git("rev-parse", "--verify", "--quiet", "HEAD", cwd=root)
    if code != 0:
        raise WorktreeError(
            f"The repository at {root} has no commits yet; commit your files first "
            "(the agent's worktree starts from the last commit)."
        )
    # An agent that already works in a worktree gets its own next to it, not nested inside.
    code, common = await _git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=root)
    home = root
    if code == 0 and Path(common).name == ".git":
        home = Path(common).parent
    folder = await asyncio.to_thread(_prepare_folder, home)
    short = agent_id.removeprefix("a")[:8]
    path = folder / f"agent-{short}"
    branch = f"forkagent/agent-{short}"
    code, out = await _git("worktree", "add", "-b", branch, str(path), base, cwd=root)
    if code != 0:
        last = out.splitlines()[-1] if out else f"exit code {code}"
        raise WorktreeError(f"git could not create the worktree {path}: {last}")
    inner = path / workdir.relative_to(root)
    await asyncio.to_thread(inner.mkdir, parents=True, exist_ok=True)  # may hold no tracked file
    return Worktree(root, path, branch, base, workdir, inner)


def translate_path(
    path: str | os.PathLike[str], parent_workdir: Path, worktree_workdir: Path
) -> Path:
    """The worktree's counterpart of `path`.

    A relative path is taken relative to the working directory; an absolute path under
    `parent_workdir` moves to the same place under `worktree_workdir`; any other path is
    returned unchanged (it is outside what the worktree mirrors)."""
    candidate = Path(path)
    if not candidate.is_absolute():
        return Path(os.path.normpath(worktree_workdir / candidate))
    candidate = Path(os.path.normpath(candidate))
    for parent in {Path(parent_workdir), Path(parent_workdir).resolve()}:
        if candidate.is_relative_to(parent):
            return Path(worktree_workdir) / candidate.relative_to(parent)
    return candidate


def worktree_notice(parent_workdir: Path, worktree_workdir: Path, *, inherited: bool = True) -> str:
    """What an agent started in a worktree is told about it (its own user message). A fork
    (`inherited`) is told that paths in the conversation it inherited are the parent's; a
    named agent, which inherited nothing, only where it works."""
    if not inherited:
        return (
            f"About your working directory: you run in an isolated git worktree at "
            f"{worktree_workdir}, a separate checkout of the repository at {parent_workdir} "
            "with the same layout. Work on the files under your worktree: everything you "
            "change stays there, and the files at the repository's own location are left "
            "untouched."
        )
    return (
        "About your working directory: you inherited the conversation above from a parent "
        f"agent whose working directory is {parent_workdir} but you do not work there. You "
        f"run in an isolated git worktree at {worktree_workdir} which is a separate checkout "
        "of the same repository with the same layout. When an inherited message mentions a "
        f"path under {parent_workdir} use the matching path under {worktree_workdir} instead. "
        "Files may have changed since the parent looked at them, so read a file again before "
        "you edit it. Everything you change stays in this worktree; the parent's files are "
        "left untouched."
    )
