"""What a git command line runs: git's global options read off before the subcommand, the
aliases `-c` sets expanded, and what makes it run code the rules cannot check.

`Bash(git push:*)` must hold against `git -C . push`, `git --no-pager push`, `git -c
alias.p=push p` and the like: `read_git` reads git's global options (with and without values,
attached and separate: `-C path`, `-c name=value`, `--git-dir=x`, `--work-tree x`,
`--exec-path=x`, `--no-pager`, `-P`, `--literal-pathspecs`, ...) off the words after `git`,
then the subcommand. Deny side, so it reads loosely: an option git would refuse (`-C.`) is
still read as one. `git_runs` says what the call runs besides itself:

- `also`: git calls to match as well: the call without its global options (`git push`),
  and with a `-c alias.NAME=VALUE` alias expanded (`git push` for `-c alias.p=push p`);
- `commands`: other commands it runs (`bisect run CMD`);
- `code`: shell code git runs: a `!` alias, the value of a `-c` key that names a command
  (`core.pager`, `core.sshCommand`, `diff.external`, ...), `submodule foreach`,
  `rebase --exec`, the commands of `--upload-pack` and the like (those subcommands are
  runners, as `xargs` is: a rule that allows them allows what they run);
- `opaque`: why the call runs code the rules cannot see, or changes what a later git word
  means (a `-c` key that names a command, a `!` alias, `git config` setting an alias or such
  a key): no allow rule with a spec allows it, and it is asked while a Bash deny or ask rule
  with a spec is in force; `unseen`: the code it runs that cannot be followed (a deny rule
  then holds if its words appear in the line);
- `unknown`: the subcommand is not one of git's own (`GIT_COMMANDS`): it may be an alias set
  earlier (`git config alias.pp push && git pp`), so it is asked while a git deny or ask rule
  with a spec is in force.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from .shell_syntax import Word, parse_script

__all__ = [
    "GIT_COMMANDS",
    "GitCall",
    "GitRuns",
    "expand_aliases",
    "git_runs",
    "read_git",
    "runs_a_command",
]

GIT_COMMANDS = frozenset(
    {
        "add", "am", "annotate", "apply", "archimport", "archive", "backfill", "bisect", "blame",
        "branch", "bugreport", "bundle", "cat-file", "check-attr", "check-ignore",
        "check-mailmap", "check-ref-format", "checkout", "checkout-index", "cherry",
        "cherry-pick", "citool", "clean", "clone", "column", "commit", "commit-graph",
        "commit-tree", "config", "count-objects", "credential", "credential-cache",
        "credential-store", "cvsexportcommit", "cvsimport", "cvsserver", "daemon", "describe",
        "diagnose", "diff", "diff-files", "diff-index", "diff-tree", "difftool", "fast-export",
        "fast-import", "fetch", "fetch-pack", "filter-branch", "fmt-merge-msg", "for-each-ref",
        "for-each-repo", "format-patch", "fsck", "fsck-objects", "gc", "get-tar-commit-id",
        "grep", "gui", "hash-object", "help", "hook", "http-backend", "http-fetch", "http-push",
        "imap-send", "index-pack", "init", "init-db", "instaweb", "interpret-trailers", "log",
        "ls-files", "ls-remote", "ls-tree", "mailinfo", "mailsplit", "maintenance", "merge",
        "merge-base", "merge-file", "merge-index", "merge-octopus", "merge-one-file",
        "merge-ours", "merge-recursive", "merge-recursive-ours", "merge-recursive-theirs",
        "merge-resolve", "merge-subtree", "merge-tree", "mergetool", "mktag", "mktree",
        "multi-pack-index", "mv", "name-rev", "notes", "p4", "pack-objects", "pack-redundant",
        "pack-refs", "patch-id", "pickaxe", "prune", "prune-packed", "pull", "push",
        "quiltimport", "range-diff", "read-tree", "rebase", "receive-pack", "reflog", "refs",
        "remote", "remote-ext", "remote-fd", "remote-ftp", "remote-ftps", "remote-http",
        "remote-https", "repack", "replace", "replay", "request-pull", "rerere", "reset",
        "restore", "rev-list", "rev-parse", "revert", "rm", "send-email", "send-pack", "shell",
        "shortlog", "show", "show-branch", "show-index", "show-ref", "sparse-checkout", "stage",
        "stash", "status", "stripspace", "submodule", "subtree", "svn", "switch", "symbolic-ref",
        "tag", "unpack-file", "unpack-objects", "update-index", "update-ref",
        "update-server-info", "upload-archive", "upload-pack", "var", "verify-commit",
        "verify-pack", "verify-tag", "version", "whatchanged", "worktree", "write-tree",
    }
)  # fmt: skip
"""git's own commands (`git --list-cmds=main` and the usual add-ons): an alias never
shadows one of them, and any other subcommand may be an alias."""

_GLOBAL_VALUES = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env",
     "--attr-source"}
)  # fmt: skip
"""Global options that take the next word as their value (or `--opt=value`, `-Cvalue`)."""

_COMMAND_KEY = re.compile(
    r"""^(?:alias\..+
    |core\.(?:pager|editor|sshcommand|fsmonitor|hookspath|askpass|gitproxy|alternaterefscommand)
    |sequence\.editor|diff\.external|interactive\.difffilter|web\.browser
    |(?:diff|merge)\..+\.(?:command|textconv|driver|cmd)
    |filter\..+\.(?:clean|smudge|process)
    |credential(?:\..+)?\.helper|gpg(?:\..+)?\.program
    |pager\..+|(?:difftool|mergetool|browser|man)\..+\.(?:cmd|path)
    |hook\..+\.command|uploadpack\.packobjectshook
    |remote\..+\.(?:uploadpack|receivepack)|protocol\..*allow
    |sendemail\.(?:.+\.)?(?:tocmd|cccmd|sendmailcmd|smtpserver)
    |include\.path|includeif\..+\.path)$""",
    re.IGNORECASE | re.VERBOSE,
)
"""Config keys whose value is a command git runs (or a file of more config, or what lets a
URL run one): set for one call with `-c`, or for later ones with `git config`."""

_CODE_OPTIONS: dict[str, tuple[str, ...]] = {
    "rebase": ("-x", "--exec"),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "clone": ("-u", "--upload-pack"),
    "ls-remote": ("--upload-pack",),
    "archive": ("--exec",),
    "push": ("--receive-pack", "--exec"),
    "send-pack": ("--receive-pack", "--exec"),
    "fetch-pack": ("--upload-pack", "--exec"),
    "difftool": ("-x", "--extcmd"),
    "grep": ("-O", "--open-files-in-pager"),
    "send-email": ("--to-cmd", "--cc-cmd", "--sendmail-cmd", "--smtp-server"),
    "filter-branch": (
        "--env-filter", "--tree-filter", "--index-filter", "--parent-filter", "--msg-filter",
        "--commit-filter", "--tag-name-filter",
    ),
}  # fmt: skip
"""Subcommand options whose value is a command git runs."""

_CONFIG_VALUES = frozenset(
    {"-f", "--file", "--blob", "--type", "--default", "--comment", "--value"}
)
_CONFIG_READS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool",
     "--list", "-l", "get", "list"}
)  # fmt: skip
_CONFIG_ACTIONS = frozenset(
    {"set", "unset", "get", "list", "edit", "rename-section", "remove-section"}
)


@dataclass
class GitCall:
    """A git call's words read: the subcommand (None: only options), its arguments, the
    folders `-C` moves to (in order), the `-c` settings (`name=value`), the `--config-env`
    names, and whether any global option came before the subcommand."""

    sub: Word | None
    args: list[Word]
    dirs: list[Word] = field(default_factory=list)
    config: list[str] = field(default_factory=list)
    config_env: list[str] = field(default_factory=list)
    had_globals: bool = False


@dataclass
class GitRuns:
    """What a git call runs besides itself (see the module doc)."""

    also: list[list[Word]] = field(default_factory=list)
    commands: list[list[Word]] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)
    unknown: str | None = None

    def runs_unknown(self, reason: str) -> None:
        self.opaque.append(reason)
        self.unseen.append(reason)


def runs_a_command(key: str) -> bool:
    """Whether the config key `key` names a command git runs (or config read from a file)."""
    return _COMMAND_KEY.match(key.strip()) is not None


def read_git(args: list[Word]) -> GitCall:
    """The words after `git`, with its global options read off (module doc)."""
    call = GitCall(None, [])
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "--":
            i += 1
            break
        if not text.startswith("-") or text == "-":
            break
        call.had_globals = True
        name, eq, attached = text.partition("=") if text.startswith("--") else (text, "", "")
        value: Word | None = None
        if text.startswith("--") and eq:
            value = Word(attached, attached, args[i].dynamic)
        elif text[:2] in ("-C", "-c") and len(text) > 2:
            name, value = text[:2], Word(text[2:], text[2:], args[i].dynamic)
        elif name in _GLOBAL_VALUES and i + 1 < len(args):
            i += 1
            value = args[i]
        if value is not None:
            if name == "-C":
                call.dirs.append(value)
            elif name == "-c":
                call.config.append(value.text)
            elif name == "--config-env":
                call.config_env.append(value.text.split("=", 1)[0])
        i += 1
    if i < len(args):
        call.sub, call.args = args[i], args[i + 1 :]
    return call


def _aliases(call: GitCall) -> dict[str, str]:
    out: dict[str, str] = {}
    for setting in call.config:
        key, _, value = setting.partition("=")
        if key.lower().startswith("alias."):
            out[key[len("alias.") :].lower()] = value
    return out


def _words(text: str) -> list[Word]:
    return [w for c in parse_script(text).commands for w in c.words]


def expand_aliases(call: GitCall) -> tuple[Word | None, list[Word], str | None]:
    """The subcommand and arguments once the aliases `-c` sets are expanded (a chain of
    them too), and the shell code a `!` alias runs instead (None: none)."""
    sub, rest = call.sub, call.args
    aliases = _aliases(call)
    seen: set[str] = set()
    while sub is not None and sub.text.lower() in aliases and sub.text.lower() not in seen:
        seen.add(sub.text.lower())
        value = aliases[sub.text.lower()]
        if value.startswith("!"):  # git runs it with sh, the arguments after it
            return None, [], value[1:] + "".join(" " + w.text for w in rest)
        words = _words(value)
        if not words:
            break
        sub, rest = words[0], words[1:] + rest
    return sub, rest, None


def git_runs(git: Word, args: list[Word]) -> GitRuns:
    """What `git ARGS` runs besides itself (module doc)."""
    call = read_git(args)
    runs = GitRuns()
    for setting in call.config:
        key, _, value = setting.partition("=")
        if key.lower().startswith("alias.") and not value.startswith("!"):
            continue  # expanded below
        if runs_a_command(key):
            runs.runs_unknown(f"git -c {key} names a command git runs")
            runs.code.append(value.removeprefix("!"))
    for name in call.config_env:
        if runs_a_command(name):
            runs.runs_unknown(f"git --config-env sets {name}, which names a command")
    if call.sub is None:
        return runs
    sub, rest, code = expand_aliases(call)
    if code is not None:
        runs.code.append(code)
        return runs
    assert sub is not None
    if call.had_globals or sub is not call.sub:
        runs.also.append([git, sub, *rest])
    if sub.dynamic or sub.text not in GIT_COMMANDS:
        runs.unknown = f"git {sub.text} is not a git command (it may be an alias)"
        return runs
    _subcommand(sub.text, rest, runs)
    return runs


def _subcommand(sub: str, rest: list[Word], runs: GitRuns) -> None:
    """What a git subcommand itself runs or changes for later calls."""
    texts = [w.text for w in rest]
    if sub == "config":
        _config(rest, runs)
    elif sub == "submodule" and "foreach" in texts:
        tail = texts[texts.index("foreach") + 1 :]
        while tail and tail[0] in ("--recursive", "--quiet", "-q"):
            tail = tail[1:]
        runs.code.append(" ".join(tail))
    elif sub == "bisect" and texts[:1] == ["run"]:
        runs.commands.append(rest[1:])
    elif sub == "clone":  # settings the new repository keeps, for every later git call
        for k, text in enumerate(texts):
            key = texts[k + 1] if text in ("-c", "--config") and k + 1 < len(texts) else ""
            key = text.split("=", 1)[1] if text.startswith("--config=") else key
            if runs_a_command(key.split("=", 1)[0]):
                runs.runs_unknown(f"git clone -c {key.split('=', 1)[0]} names a command")
    for k, text in enumerate(texts):
        for option in _CODE_OPTIONS.get(sub, ()):
            if text == option and k + 1 < len(texts):
                runs.code.append(texts[k + 1])
            elif text.startswith(option + "=") or (
                not option.startswith("--") and text.startswith(option) and text != option
            ):
                runs.code.append(text[len(option) :].removeprefix("="))
            else:
                continue
            runs.unseen.append(f"git {sub} {option} runs a command")


def _config(words: list[Word], runs: GitRuns) -> None:
    """`git config` setting an alias or a key that names a command (or opening an editor):
    what later git calls run changes. An alias's value is matched as the git call (or the
    shell code) it will stand for."""
    texts = [w.text for w in words]
    positional: list[str] = []
    flags: set[str] = set()
    k = 0
    while k < len(texts):
        text = texts[k]
        if text.startswith("-") and len(text) > 1:
            name = text.split("=", 1)[0]
            flags.add(name)
            if name in _CONFIG_VALUES and "=" not in text:
                k += 1
        else:
            positional.append(text)
        k += 1
    if {"-e", "--edit"} & flags or positional[:1] == ["edit"]:
        runs.opaque.append("git config --edit can set any key, commands included")
        return
    action = positional[0] if positional and positional[0] in _CONFIG_ACTIONS else None
    keys = positional[1:] if action else positional
    reads = (_CONFIG_READS & flags) or action in ("get", "list") or (not action and len(keys) < 2)
    unsets = {"--unset", "--unset-all"} & flags or action == "unset"
    if reads or unsets or not keys:
        return
    named = [key for key in keys if runs_a_command(key) or key.lower().startswith("alias")]
    for key, value in itertools.pairwise(keys):
        if key.lower().startswith("alias.") and value.startswith("!"):
            runs.code.append(value[1:])
        elif key.lower().startswith("alias."):
            runs.also.append([Word.plain("git"), *_words(value)])
    if named:
        runs.opaque.append(
            f"git config sets {named[0]}: later git calls run what it names, which the rules "
            "cannot check"
        )
