"""The runtime's own git: every git command the runtime runs for itself (worktrees, the check
whether a settings file is committed) goes through here, so that a repository's files run
nothing on the way.

A repository's configuration (`.git/config`, what it includes, `.gitattributes` naming a
filter) may have been written by the model or by whoever committed the project, and git runs
the commands it names: `core.fsmonitor` on every `git status`, hooks on `worktree add` and
`branch -D`, filter drivers on checkout and status. So each call:

* runs confined like Bash (`sandbox.confined`: the kernel's connection file and Jupyter's
  runtime folder covered, when the runtime is in a kernel on Linux);
* turns off, with `-c` (command-line settings beat every configuration file and what it
  includes), what git reads from configuration and runs: the fsmonitor, hooks, the pager,
  editors, ssh, credential helpers, external diff, signing programs, the alternate-refs
  command, automatic gc and maintenance, submodule recursion, every transport (`ext::` among
  them), and a bare repository found by looking upwards (`safe.bareRepository=explicit`);
* turns off every filter driver that a file other than the person's own (global or system)
  configuration defines: their names are arbitrary, so they are read first, with a
  `git config` that runs nothing (`_untrusted_filters`);
* gets an environment without credentials and without any `GIT_*` variable (which could point
  git at another repository, configuration, exec path or ssh), except the two that only limit
  where git looks for a repository. `GIT_CONFIG_NOSYSTEM` is not set: the system's
  configuration is the administrator's (it may hold the `safe.directory` entries a shared
  install needs), and nothing it says that runs a program survives the `-c` settings.

git's own ownership check (`safe.directory`) is left as it is: nothing here widens it.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...secrets import scrubbed_env
from .sandbox import confined

__all__ = ["OFF", "GitResult", "git_command", "git_env", "run_git", "run_git_sync"]

OFF: tuple[str, ...] = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.sshCommand=false",
    "core.pager=cat",
    "core.editor=false",
    "core.askPass=false",
    "core.alternateRefsCommand=",
    "sequence.editor=false",
    "diff.external=",
    "credential.helper=",
    "gpg.program=false",
    "gpg.openpgp.program=false",
    "gpg.ssh.program=false",
    "gpg.x509.program=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
    "protocol.allow=never",
    "protocol.ext.allow=never",
    "submodule.recurse=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "safe.bareRepository=explicit",
)
"""Settings that keep git from running what a configuration file names (see the module doc)."""

_KEPT_ENV = frozenset({"GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM"})
_NO_FILTERS = frozenset({"rev-parse", "rev-list", "ls-files", "branch", "config"})
"""Commands that never pass a file's content through a filter (every other one may)."""
_TRUSTED_SCOPES = frozenset({"system", "global"})
TIMEOUT = 20.0


@dataclass(frozen=True)
class GitResult:
    """One git command's exit code (127: git could not be started) and its output."""

    code: int
    out: str
    err: str


def git_env() -> dict[str, str]:
    """The environment of the runtime's git: no credential, no `GIT_*` variable but the two
    that only narrow the search for a repository, no prompts, stable messages."""
    env = {k: v for k, v in scrubbed_env().items() if not k.startswith("GIT_") or k in _KEPT_ENV}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_OPTIONAL_LOCKS="0")
    return env


def git_command(args: Sequence[str], filters: Sequence[str] = ()) -> list[str]:
    """The command line that runs `git ARGS` confined, with `OFF` and the filter drivers
    `filters` turned off."""
    settings = [*OFF]
    for name in filters:
        settings += [f"filter.{name}.{key}=" for key in ("clean", "smudge", "process")]
        settings.append(f"filter.{name}.required=false")
    options = [part for setting in settings for part in ("-c", setting)]
    return confined(["git", "--no-pager", *options, *args])


def _untrusted_filters(listing: str) -> list[str]:
    """The filter drivers a `git config --show-scope --name-only -z --get-regexp ^filter\\.`
    listing names from anywhere but the global and system configuration."""
    parts = listing.split("\0")
    names: dict[str, None] = {}
    for scope, key in zip(parts[::2], parts[1::2], strict=False):
        driver = key[len("filter.") :].rpartition(".")[0]
        if driver and scope not in _TRUSTED_SCOPES:
            names[driver] = None
    return list(names)


_LIST_FILTERS = ("config", "--show-scope", "--name-only", "-z", "--get-regexp", r"^filter\.")


def _needs_filters(args: Sequence[str]) -> bool:
    return not args or args[0] not in _NO_FILTERS


def _decoded(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


async def run_git(*args: str, cwd: Path) -> GitResult:
    """Run one git command of the runtime's (see the module doc) without blocking the loop."""
    filters: list[str] = []
    if _needs_filters(args):
        listed = await _run_async(git_command(_LIST_FILTERS), cwd)
        if listed.code == 127:
            return listed
        filters = _untrusted_filters(listed.out)
    return await _run_async(git_command(args, filters), cwd)


async def _run_async(command: list[str], cwd: Path) -> GitResult:
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            cwd=str(cwd),
            env=git_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:  # git (or the confining python) missing, or cwd gone
        return GitResult(127, "", f"cannot run git: {exc.strerror or exc}")
    out, err = await proc.communicate()
    code = proc.returncode if proc.returncode is not None else 1
    return GitResult(code, _decoded(out), _decoded(err))


def run_git_sync(*args: str, cwd: Path, timeout: float = TIMEOUT) -> GitResult:
    """`run_git` for a thread (blocking); raises subprocess.TimeoutExpired past `timeout`."""
    filters: list[str] = []
    if _needs_filters(args):
        listed = _run_blocking(git_command(_LIST_FILTERS), cwd, timeout)
        if listed.code == 127:
            return listed
        filters = _untrusted_filters(listed.out)
    return _run_blocking(git_command(args, filters), cwd, timeout)


def _run_blocking(command: list[str], cwd: Path, timeout: float) -> GitResult:
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=git_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
        )
    except OSError as exc:
        return GitResult(127, "", f"cannot run git: {exc.strerror or exc}")
    return GitResult(done.returncode, _decoded(done.stdout), _decoded(done.stderr))
