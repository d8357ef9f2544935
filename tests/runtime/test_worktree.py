"""Git worktree isolation against real git repositories under tmp_path."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from forkagent_jupyter.runtime.config.settings import committed
from forkagent_jupyter.runtime.errors import ConfigError
from forkagent_jupyter.runtime.workers.worktree import (
    Worktree,
    WorktreeError,
    create_worktree,
    translate_path,
    worktree_notice,
)

from .helpers import git

pytestmark = pytest.mark.anyio

AGENT = "a0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_outer_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git must not find a repository above tmp_path (the tests make their own)."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.resolve()))


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "tests@example.com")
    git(path, "config", "user.name", "Tests")
    (path / "data.csv").write_text("a,b\n1,2\n")
    (path / ".gitignore").write_text("out/\n")
    (path / "analysis").mkdir()
    (path / "analysis" / "notes.md").write_text("# notes\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "init")
    return path.resolve()


def branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--list", "--format=%(refname:short)").splitlines()


async def test_not_a_git_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorktreeError) as caught:
        await create_worktree(plain, AGENT)
    assert isinstance(caught.value, ConfigError)
    message = str(caught.value)
    assert f"{plain.resolve()} is not inside a git repository" in message
    assert "worktree isolation needs one" in message


async def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(WorktreeError, match="is not a directory"):
        await create_worktree(tmp_path / "nowhere", AGENT)


async def test_repository_without_commits(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(WorktreeError, match="has no commits yet"):
        await create_worktree(empty, AGENT)


async def test_dirty_tree_lists_paths_and_says_what_to_do(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "data.csv").write_text("changed\n")
    (repo / "new.txt").write_text("untracked\n")
    with pytest.raises(WorktreeError) as caught:
        await create_worktree(repo, AGENT)
    message = str(caught.value)
    assert "uncommitted changes (data.csv, new.txt)" in message
    assert "commit or stash" in message
    assert not (repo / ".forkagent").exists() and branches(repo) == ["main"]

    for i in range(6):
        (repo / f"extra{i}.txt").write_text("x")
    with pytest.raises(
        WorktreeError, match=r"\(data\.csv, extra0\.txt, extra1\.txt, extra2\.txt, "
    ):
        await create_worktree(repo, AGENT)
    with pytest.raises(WorktreeError, match=r"extra3\.txt, and 3 more\)"):
        await create_worktree(repo, AGENT)


async def test_clean_tree_gets_a_worktree_on_a_new_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    head = git(repo, "rev-parse", "HEAD")
    wt = await create_worktree(repo / "analysis", AGENT)
    assert wt.repo_root == repo
    assert wt.path == repo / ".forkagent" / "worktrees" / "agent-01234567"
    assert wt.branch == "forkagent/agent-01234567"
    assert wt.base_commit == head
    assert wt.parent_workdir == repo / "analysis"
    assert wt.workdir == wt.path / "analysis"
    assert (wt.workdir / "notes.md").read_text() == "# notes\n"
    assert git(wt.path, "rev-parse", "--abbrev-ref", "HEAD") == wt.branch
    assert sorted(branches(repo)) == ["forkagent/agent-01234567", "main"]
    # the parent's tree stays clean: the worktrees folder ignores itself
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert (repo / ".forkagent" / "worktrees" / ".gitignore").read_text().endswith("*\n")
    assert not await wt.has_changes()
    assert wt.outcome is None


async def test_workdir_without_tracked_files_exists_in_the_worktree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "out").mkdir()  # ignored by the repo's .gitignore: not in a checkout
    wt = await create_worktree(repo / "out", AGENT)
    assert wt.workdir == wt.path / "out" and wt.workdir.is_dir()


async def test_unchanged_worktree_is_removed_with_its_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    wt = await create_worktree(repo, AGENT)
    for cache in (wt.path / "__pycache__", wt.path / "out" / ".ipynb_checkpoints"):
        cache.mkdir(parents=True)  # caches, untracked or ignored, are not work
        (cache / "m.cpython-311.pyc").write_bytes(b"\0")
    outcome = await wt.finish()
    assert not outcome.kept
    assert (outcome.path, outcome.branch) == (wt.path, wt.branch)
    assert not wt.path.exists()
    assert branches(repo) == ["main"]
    assert "agent-" not in git(repo, "worktree", "list")
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


@pytest.mark.parametrize("change", ["modified", "untracked", "deleted", "ignored output"])
async def test_changed_worktree_is_kept(tmp_path: Path, change: str) -> None:
    repo = make_repo(tmp_path / "repo")
    wt = await create_worktree(repo, AGENT)
    if change == "modified":
        (wt.path / "data.csv").write_text("a,b\n3,4\n")
    elif change == "untracked":
        (wt.path / "result.txt").write_text("done")
    elif change == "deleted":
        (wt.path / "data.csv").unlink()
    else:
        (wt.path / "out").mkdir()
        (wt.path / "out" / "table.parquet").write_bytes(b"PAR1")
    assert await wt.has_changes()
    outcome = await wt.finish()
    assert outcome.kept and outcome.path == wt.path and outcome.branch == wt.branch
    assert wt.path.is_dir() and wt.branch in branches(repo)
    assert not (repo / "result.txt").exists()
    assert (repo / "data.csv").read_text() == "a,b\n1,2\n"  # the parent's files are untouched


async def test_committed_change_is_kept(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    wt = await create_worktree(repo, AGENT)
    (wt.path / "data.csv").write_text("a,b\n5,6\n")
    git(wt.path, "commit", "-qam", "agent's work")
    assert git(wt.path, "status", "--porcelain") == ""
    outcome = await wt.finish()
    assert outcome.kept and wt.path.is_dir()
    assert git(repo, "log", "-1", "--format=%s", wt.branch) == "agent's work"


async def test_commit_on_the_branch_counts_even_after_switching_away(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    wt = await create_worktree(repo, AGENT)
    (wt.path / "x.txt").write_text("x")
    git(wt.path, "add", "x.txt")
    git(wt.path, "commit", "-qm", "work")
    git(wt.path, "checkout", "-q", "--detach", wt.base_commit)
    assert await wt.has_changes()


async def test_finish_is_idempotent_and_runs_git_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    wt = await create_worktree(repo, AGENT)
    first, second = await asyncio.gather(wt.finish(), wt.finish())  # concurrent calls agree
    assert first is second and not first.kept
    assert wt.outcome is first
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))  # git can no longer run
    assert await wt.finish() is first  # no git needed: the recorded outcome
    # without the record, a git failure would have counted as a change (kept):
    fresh = Worktree(repo, wt.path, wt.branch, wt.base_commit, repo, repo)
    assert await fresh.has_changes()


async def test_errors_count_as_changes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    wt = await create_worktree(repo, AGENT)
    git(repo, "worktree", "remove", "--force", str(wt.path))  # gone behind its back
    assert await wt.has_changes()
    outcome = await wt.finish()
    assert outcome.kept  # fail closed: nothing is deleted, the branch stays
    assert wt.branch in branches(repo)


async def test_existing_branch_is_a_clear_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "branch", "forkagent/agent-01234567")
    with pytest.raises(WorktreeError, match=r"git could not create the worktree .*already exists"):
        await create_worktree(repo, AGENT)


async def test_worktree_from_inside_a_worktree_is_placed_beside_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    outer = await create_worktree(repo / "analysis", AGENT)
    inner = await create_worktree(outer.workdir, "afedcba9876543210")
    assert inner.path == repo / ".forkagent" / "worktrees" / "agent-fedcba98"
    assert inner.repo_root == outer.path
    assert inner.workdir == inner.path / "analysis"
    assert inner.base_commit == git(outer.path, "rev-parse", "HEAD")
    assert git(outer.path, "status", "--porcelain") == ""
    assert not (await inner.finish()).kept
    assert not (await outer.finish()).kept
    assert branches(repo) == ["main"]


def test_translate_path(tmp_path: Path) -> None:
    parent, inside = Path("/repo/sub"), Path("/repo/.forkagent/worktrees/agent-1/sub")
    assert translate_path("/repo/sub/a/b.csv", parent, inside) == inside / "a" / "b.csv"
    assert translate_path(Path("/repo/sub"), parent, inside) == inside
    assert translate_path("a/../b.csv", parent, inside) == inside / "b.csv"
    assert translate_path("/etc/hosts", parent, inside) == Path("/etc/hosts")
    assert translate_path("/repo/subway/x", parent, inside) == Path("/repo/subway/x")


async def test_worktree_translate_covers_the_whole_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    wt = await create_worktree(repo / "analysis", AGENT)
    assert wt.translate(repo / "data.csv") == wt.path / "data.csv"
    assert wt.translate(repo / "analysis" / "notes.md") == wt.workdir / "notes.md"


def test_worktree_notice_says_where_and_what_to_do() -> None:
    text = worktree_notice(Path("/home/u/proj"), Path("/home/u/proj/.forkagent/worktrees/a-1"))
    assert "is /home/u/proj but" in text and "at /home/u/proj/.forkagent/worktrees/a-1 " in text
    assert "isolated git worktree" in text
    for idea in ("inherited", "path", "read a file again before you edit", "stays in this"):
        assert idea in text


PAYLOAD = """import glob, json, os, sys
marker = sys.argv[1]
found = []
for path in glob.glob(os.path.expanduser("~/.local/share/jupyter/runtime/kernel-*.json")):
    try:
        found.append(json.load(open(path)).get("key", ""))
    except OSError as exc:
        found.append(str(exc))
with open(marker, "a") as out:
    out.write(f"{sys.argv[2]} ran, read {found}\\n")
"""


def poison(repo: Path, marker: Path) -> None:
    """What a model that may edit files unasked writes into a repository (the issue's attack,
    and its kin): commands in `.git/config`, in a file it includes, in hooks, and a filter
    driver that a committed `.gitattributes` names."""
    (repo / "payload.py").write_text(PAYLOAD)
    (repo / ".gitattributes").write_text("*.csv filter=evil\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "attributes")
    run = f"{sys.executable} {repo / 'payload.py'} {marker}"
    gitdir = repo / ".git"
    (gitdir / "fsm.sh").write_text(f"{run} fsmonitor\n")
    (gitdir / "extra.cfg").write_text(f"[core]\n\tpager = {run} pager\n")
    for hook in ("post-checkout", "reference-transaction", "pre-auto-gc"):
        (gitdir / "hooks" / hook).write_text(f"#!/bin/sh\n{run} {hook}\n")
        (gitdir / "hooks" / hook).chmod(0o755)
    with (gitdir / "config").open("a") as config:
        config.write(
            "[core]\n\tfsmonitor = sh .git/fsm.sh\n"
            f"[include]\n\tpath = {gitdir / 'extra.cfg'}\n"
            f'[filter "evil"]\n\tsmudge = {run} smudge\n\tclean = {run} clean\n'
            f"\tprocess = {run} process\n\trequired = true\n"
        )
    (repo / "data.csv").touch()  # status looks at its content again (through the clean filter)


async def test_a_repositorys_own_files_run_nothing_when_the_runtime_calls_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's attack: `.git/config` with `core.fsmonitor = sh .git/fsm.sh` (and hooks, a
    filter driver, an included file) written by the model; the runtime's own git (a worktree
    made, checked and removed; the check whether a settings file is committed) runs none of
    it, and a `GIT_DIR` in the kernel's environment does not point it elsewhere."""
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "ran.txt"
    poison(repo, marker)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    wt = await create_worktree(repo, AGENT)
    assert (wt.path / "data.csv").read_text() == "a,b\n1,2\n"
    assert not await wt.has_changes()
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.local.json").write_text("{}")
    assert not await asyncio.to_thread(committed, repo / ".claude" / "settings.local.json")
    assert not (await wt.finish()).kept
    assert not marker.exists(), marker.read_text()
    monkeypatch.delenv("GIT_DIR")
    assert branches(repo) == ["main"]


async def test_the_persons_own_filter_drivers_still_run(tmp_path: Path, user_home: Path) -> None:
    """A filter driver from the person's own (global) configuration is theirs (Git LFS is
    one): a worktree's checkout still runs it; the same name defined by the repository's
    configuration is turned off."""
    (user_home / ".gitconfig").write_text('[filter "upper"]\n\tsmudge = tr a-z A-Z\n')
    repo = make_repo(tmp_path / "repo")
    (repo / ".gitattributes").write_text("*.csv filter=upper\n*.md filter=local\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "attributes")
    git(repo, "config", "filter.local.smudge", "tr a-z A-Z")
    wt = await create_worktree(repo, AGENT)
    assert (wt.path / "data.csv").read_text() == "A,B\n1,2\n"
    assert (wt.path / "analysis" / "notes.md").read_text() == "# notes\n"
