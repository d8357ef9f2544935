"""Which programs a command line runs: through paths, wrappers, shells and runners.

Deny rules must hold against every spelling that still runs the command: `/bin/rm`,
`env -i rm`, `nice -n 5 rm`, `time -p rm`, `timeout 5 rm`, `command rm`, `sudo -u x rm`,
`bash -c 'rm ...'`, `... | xargs rm`, `find ... -exec rm {} ;`, `eval 'rm ...'`. `programs`
parses the line (`shell_syntax`) and follows each simple command through the programs that
run their arguments as a command (each with its own options), through the code strings of
`sh -c` / `bash -c` / `eval` / `su -c` / `env -S` / `watch` (parsed again, recursively), and
into substitutions. What it cannot follow is reported as `unseen`: code handed to an
interpreter (`python -c`, `node -e`, `awk`, a script file, a shell reading stdin) and a program
whose name is computed (`$CMD`, `$(...)`, a glob). A deny rule then holds against the call if
its words appear anywhere in the line.

git is read as git reads itself (`shell_git`): its global options before the subcommand
(`git -C . push` runs `git push`), the aliases `-c` sets, and what makes it run code the
rules cannot check (`opaque`: never allowed by a rule with a spec, asked while a Bash deny or
ask rule with a spec is in force) or a subcommand that may be an alias (`unknown_git`).

Every command found also says what it writes (`shell_writes`), and so does every
redirection (`writes`); `changes_dir` says the line moves to another folder first (`cd`,
`pushd`, `env -C`), so a relative path in it may not be where the line starts.

`runs_code` names the programs (runners, shells, interpreters) a rule never widens from.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .shell_git import git_runs
from .shell_syntax import ACTIVE, RESERVED, Script, Word, parse_script
from .shell_writes import WRITERS, Written, writes

__all__ = [
    "OPTION_RUNNERS",
    "RUNNERS",
    "Programs",
    "is_interpreter",
    "program_name",
    "programs",
    "runs_code",
]

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_MAX_DEPTH = 10

SHELLS = frozenset(
    {"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "fish", "csh", "tcsh", "rbash"}
)
_INTERPRETER = re.compile(
    r"^(python[0-9.]*|pypy[0-9.]*|ipython[0-9]*|node|nodejs|deno|bun|perl[0-9.]*|ruby|irb|"
    r"php[0-9.]*|lua[0-9.]*|luajit|R|Rscript|julia|osascript|pwsh|powershell|tclsh|wish|expect|"
    r"awk|gawk|mawk|nawk|busybox|sed|gsed|jshell|scala|groovy|guile|racket|sbcl|ghci|runghc|"
    r"erl|elixir|iex|swift|kotlinc?|java|jexec)$"
)


OPTION_RUNNERS = frozenset(
    {
        "ssh", "scp", "sftp", "rsync", "tar", "gtar", "bsdtar", "sort", "gdb", "lldb", "vim",
        "vi", "nvim", "ex", "view", "vimdiff", "emacs", "less", "more", "man", "make", "gmake",
        "zip", "at", "batch", "crontab", "split",
    }
)  # fmt: skip
"""Programs that run a command given in an option, a file or their input (`ssh -o
ProxyCommand=...`, `rsync -e`, `tar -I` / `--checkpoint-action=exec=`, `sort
--compress-program`, `gdb -ex 'shell ...'`, `vim -c '!...'`, `make --eval`, `at`,
`split --filter`): not followed; a deny rule holds if its words appear in the line."""


def is_interpreter(name: str) -> bool:
    """Programs that run code given to them (inline or in a file): never followed."""
    return name in SHELLS or _INTERPRETER.match(name) is not None


def program_name(word: str) -> str:
    """The program a command word names: `/usr/bin/rm` -> `rm`."""
    return word.rstrip("/").rsplit("/", 1)[-1] if "/" in word.rstrip("/") else word


@dataclass
class Programs:
    """Every command the line would run (as word lists, the program as written), the
    reasons some of it could not be followed, and what it writes (module doc)."""

    commands: list[list[Word]] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)
    computed: bool = False  # a program's name is computed when the line runs
    opaque: list[str] = field(default_factory=list)
    unknown_git: list[str] = field(default_factory=list)
    writes: list[Written] = field(default_factory=list)
    unread_writes: list[str] = field(default_factory=list)
    changes_dir: bool = False


# -- option skipping ----------------------------------------------------------------------


def _skip(
    args: list[Word], with_value: frozenset[str], positional: int = 0, *, plus: bool = False
) -> list[Word]:
    """The arguments after a program's options (`with_value`: the options that take the next
    word as their value, short `-u` or long `--user`) and `positional` operands; `plus`: the
    program also takes `+o`-style options (shells)."""
    i = 0
    while i < len(args):
        a = args[i].text
        if a == "--":
            i += 1
            break
        if a.startswith("--"):
            i += 2 if ("=" not in a and a in with_value) else 1
            continue
        if (a.startswith("-") or (plus and a.startswith("+"))) and len(a) > 1:
            body = a[1:]
            for k, ch in enumerate(body):
                if a[0] + ch in with_value or "-" + ch in with_value:
                    if k == len(body) - 1:
                        i += 1  # the value is the next word
                    break
            i += 1
            continue
        break
    return args[i + positional :]


def _flags(args: list[Word], with_value: frozenset[str] = frozenset()) -> set[str]:
    """The flags set in a program's leading options: single letters (`-lc` -> l, c) and long
    options (`--login`); values of `with_value` options skipped."""
    flags: set[str] = set()
    i = 0
    while i < len(args):
        t = args[i].text
        if t == "--" or not (t.startswith(("-", "+")) and len(t) > 1):
            break
        if t.startswith("--"):
            flags.add(t.split("=", 1)[0])
            i += 2 if ("=" not in t and t in with_value) else 1
            continue
        flags.update(t[1:])
        i += 2 if t in with_value else 1
    return flags


def _opts(*names: str) -> frozenset[str]:
    return frozenset(names)


# What follows each runner: ("cmd", words) a command, ("fed", words) one given more words
# when it runs (`xargs`, `parallel`, `find -exec ... {}`: the files it writes are not all in
# its words), ("as", words) the same command read another way (git without its global
# options: matched, its writes already counted),
# ("code", text) shell code, ("value", text) an assignment's value (code that may run later),
# ("unseen", reason), ("opaque", reason), ("unknown_git", reason), or ("none", None) when it
# runs nothing.
_Step = tuple[str, "list[Word] | str | None"]

_SIMPLE_RUNNERS: dict[str, tuple[frozenset[str], int]] = {
    "nohup": (_opts(), 0),
    "builtin": (_opts(), 0),
    "exec": (_opts("-a"), 0),
    "nice": (_opts("-n", "--adjustment"), 0),
    "time": (_opts("-f", "-o", "--format", "--output"), 0),
    "timeout": (_opts("-s", "-k", "--signal", "--kill-after"), 1),
    "stdbuf": (_opts("-i", "-o", "-e", "--input", "--output", "--error"), 0),
    "ionice": (_opts("-c", "-n", "-p", "-P", "-u", "--class", "--classdata"), 0),
    "chrt": (_opts("-T", "-P", "-D"), 1),
    "setsid": (_opts(), 0),
    "doas": (_opts("-u", "-C"), 0),
    "unbuffer": (_opts(), 0),
    "catchsegv": (_opts(), 0),
    "fakeroot": (_opts("-l", "-s", "-i", "--lib", "--faked"), 0),
    "chroot": (_opts("--userspec", "--groups"), 1),
    "unshare": (_opts("--map-user", "--map-group", "-S", "-G", "--setuid", "--setgid"), 0),
    "nsenter": (_opts("-t", "--target", "-S", "-G", "--setuid", "--setgid"), 0),
    "strace": (_opts("-e", "-o", "-p", "-s", "-u", "-E", "-a", "-I", "-O", "-S", "-P", "-b"), 0),
    "ltrace": (_opts("-e", "-o", "-p", "-s", "-u", "-a", "-n", "-A", "-D", "-F", "-l"), 0),
    "valgrind": (_opts(), 0),
    "firejail": (_opts(), 0),
    "torsocks": (_opts("-u", "-p", "-a", "-P"), 0),
    "proxychains": (_opts("-f"), 0),
    "proxychains4": (_opts("-f"), 0),
    "faketime": (_opts("-f"), 1),
    "xvfb-run": (_opts("-n", "-s", "-e", "-f", "-p", "--server-num", "--server-args"), 0),
    "dbus-run-session": (_opts("--config-file", "--dbus-daemon"), 0),
    "systemd-run": (_opts("-p", "-u", "-E", "--unit", "--property", "--setenv"), 0),
    "npx": (_opts("-p", "--package", "-c", "--call"), 0),
    "pnpx": (_opts(), 0),
    "bunx": (_opts(), 0),
    "srun": (_opts("-n", "-N", "-c", "-p", "-t", "-J", "-o", "-e", "-A", "-q"), 0),
    "mpirun": (_opts("-n", "-np", "-H", "--host", "--hostfile"), 0),
    "mpiexec": (_opts("-n", "-np", "-H", "--host", "--hostfile"), 0),
    "pkexec": (_opts("--user"), 0),
    "runuser": (_opts("-u", "-g", "-G", "--user", "--group"), 0),
}
_SUBCOMMAND_RUNNERS: dict[str, tuple[str, frozenset[str]]] = {
    "uv": ("run", _opts("--with", "--python", "-p", "--project", "--directory", "--env-file")),
    "poetry": ("run", _opts("-C", "--directory", "-P", "--project")),
    "pipenv": ("run", _opts()),
    "pdm": ("run", _opts("-p", "--project")),
    "hatch": ("run", _opts("-e", "--env")),
    "rye": ("run", _opts()),
    "pixi": ("run", _opts("-e", "--environment", "--manifest-path")),
    "conda": ("run", _opts("-n", "--name", "-p", "--prefix")),
    "mamba": ("run", _opts("-n", "--name", "-p", "--prefix")),
    "micromamba": ("run", _opts("-n", "--name", "-p", "--prefix")),
    "pnpm": ("exec", _opts()),
    "npm": ("exec", _opts("-c", "--call", "-p", "--package")),
    "docker": ("exec", _opts("-e", "-u", "-w", "--env", "--user", "--workdir")),
    "podman": ("exec", _opts("-e", "-u", "-w", "--env", "--user", "--workdir")),
    "kubectl": ("exec", _opts("-c", "-n", "--container", "--namespace")),
}


def _join(words: list[Word]) -> str:
    return " ".join(w.text for w in words)


def _code_value(args: list[Word], names: tuple[str, ...]) -> str | None:
    """The value of the first option in `names` (`-c STR`, `-cSTR`, `-qc STR`, `--command STR`,
    `--command=STR`). Deny side only: a short option grouped after other letters is read as
    this one (`-vS`), whatever those letters take."""
    for k, a in enumerate(args):
        text = a.text
        for name in names:
            if name.startswith("--"):
                if text == name and k + 1 < len(args):
                    return args[k + 1].text
                if text.startswith(name + "="):
                    return text[len(name) + 1 :]
                continue
            if not text.startswith("-") or text.startswith("--") or name[1] not in text[1:]:
                continue
            rest = text[text.index(name[1], 1) + 1 :]
            if rest:
                return rest
            if k + 1 < len(args):
                return args[k + 1].text
    return None


_FILE_VARIABLES = frozenset({"BASH_ENV", "ENV"})
"""Variables naming a file a starting shell runs."""
_DECLARERS = frozenset({"export", "declare", "typeset", "local", "readonly"})


def _assignment_steps(words: list[Word], *, any_name: bool = False) -> list[_Step]:
    """What assignments (`NAME=value`; with `any_name`, env's `ANY=value`) can make run: a
    value is read as code, as data (it may be run later: `PS4='$(...)'` under `set -x`,
    `PROMPT_COMMAND`, a program's `GIT_EXTERNAL_DIFF`, an exported function
    `BASH_FUNC_f%%=() {...}`), so a denied command in it is denied, and a computed name in
    it is no reason to ask; a start-up file (`BASH_ENV`, `ENV`) cannot be followed."""
    steps: list[_Step] = []
    for w in words:
        if not (_ASSIGNMENT.match(w.text) or (any_name and "=" in w.text[1:])):
            continue
        name, value = w.text.split("=", 1)
        name = name.rstrip("+")
        if name in _FILE_VARIABLES:
            steps.append(("unseen", f"{name} names a file a shell runs"))
        if value.strip():
            steps.append(("value", value.removeprefix("()")))
    return steps


def _follow(name: str, args: list[Word]) -> list[_Step]:
    """What the runner `name` runs, given its arguments (none: it runs nothing)."""
    for family in (
        _git_runner,
        _prefix_runner,
        _code_in_builtin,
        _changed_context,
        _code_runner,
        _script_runner,
    ):
        steps = family(name, args)
        if steps is not None:
            return steps
    return []


def _git_runner(name: str, args: list[Word]) -> list[_Step] | None:
    """git: itself without its global options, its aliases, the code it runs (`shell_git`)."""
    if name != "git":
        return None
    runs = git_runs(Word.plain("git"), args)
    steps: list[_Step] = [("as", words) for words in runs.also]
    steps += [("cmd", words) for words in runs.commands]
    steps += [("code", code) for code in runs.code]
    steps += [("opaque", reason) for reason in runs.opaque]
    steps += [("unseen", reason) for reason in runs.unseen]
    if runs.unknown is not None:
        steps.append(("unknown_git", runs.unknown))
    return steps


def _prefix_runner(name: str, args: list[Word]) -> list[_Step] | None:
    """A runner of the command its arguments name (`nice`, `timeout`, `docker exec`, `taskset`)."""
    if name in _SIMPLE_RUNNERS:
        with_value, positional = _SIMPLE_RUNNERS[name]
        return [("cmd", _skip(args, with_value, positional))]
    if name in _SUBCOMMAND_RUNNERS:
        sub, with_value = _SUBCOMMAND_RUNNERS[name]
        rest = _skip(args, with_value)
        if not rest or rest[0].text != sub:
            return [("none", None)]
        rest = _skip(rest[1:], with_value)
        if name in ("docker", "podman", "kubectl"):
            rest = rest[1:]  # the container
        return [("cmd", rest)]
    if name == "taskset":
        flags = _flags(args, _opts("-c", "--cpu-list"))
        if {"p", "--pid"} & flags:
            return [("none", None)]
        positional = 0 if {"c", "--cpu-list"} & flags else 1  # `taskset MASK cmd`
        return [("cmd", _skip(args, _opts("-c", "--cpu-list"), positional))]
    return None


def _code_in_builtin(name: str, args: list[Word]) -> list[_Step] | None:
    """A shell builtin that holds code in a value (`trap`, `mapfile -C`, `alias`, a
    declaration's assignments) or runs the history (`fc`)."""
    if name == "trap":
        rest = _skip(args, _opts())
        return [("code", rest[0].text)] if rest else [("none", None)]
    if name in ("mapfile", "readarray"):
        code = _code_value(args, ("-C",))
        return [("code", code)] if code is not None else [("none", None)]
    if name == "alias":
        return [("code", a.text.split("=", 1)[1]) for a in args if "=" in a.text[1:]]
    if name in _DECLARERS:
        return _assignment_steps(args)
    if name == "fc":
        return [("unseen", "fc runs commands from the history")]
    return None


def _changed_context(name: str, args: list[Word]) -> list[_Step] | None:
    """A runner of a command in another environment or as another user (`command`, `env`,
    `sudo`, `su`)."""
    if name == "command":
        flags = _flags(args)
        if {"v", "V"} & flags:
            return [("none", None)]  # `command -v rm` only looks it up
        return [("cmd", _skip(args, _opts()))]
    if name == "env":
        split = _code_value(args, ("-S", "--split-string"))
        rest = _skip(args, _opts("-u", "-C", "-S", "--unset", "--chdir", "--split-string"))
        if split is not None:
            return [("code", split + " " + _join(rest))]
        k = 0
        while k < len(rest) and "=" in rest[k].text[1:]:
            k += 1  # env takes any `NAME=value` before the command, `BASH_FUNC_f%%=` too
        return [*_assignment_steps(rest[:k], any_name=True), ("cmd", rest[k:])]
    if name in ("sudo",):
        with_value = _opts(
            "-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-T", "-U", "-R",
            "--user", "--group", "--host", "--prompt", "--close-from", "--chdir",
            "--role", "--type", "--command-timeout", "--other-user", "--chroot",
        )  # fmt: skip
        rest = _skip(args, with_value)
        flags = _flags(args, with_value)
        steps: list[_Step] = [("cmd", rest)]
        if {"s", "i", "--shell", "--login"} & flags and rest:
            steps.append(("code", _join(rest)))
        return steps
    if name in ("su",):
        code = _code_value(args, ("-c", "--command", "--session-command"))
        return [("code", code)] if code is not None else [("unseen", "su starts a shell")]
    return None


def _code_runner(name: str, args: list[Word]) -> list[_Step] | None:
    """A runner of code or of commands it builds (`eval`, `watch`, `flock`, `script`, `xargs`,
    `parallel`, `find -exec`)."""
    if name == "eval":
        if args and args[0].text == "--":
            args = args[1:]
        steps: list[_Step] = [("code", _join(args))]
        if any(a.dynamic for a in args):
            steps.append(("unseen", "eval of text computed at run time"))
        return steps
    if name == "watch":
        rest = _skip(args, _opts("-n", "--interval", "-q", "--equexit", "--chgexit"))
        return [("code", _join(rest))]
    if name == "flock":
        code = _code_value(args, ("-c", "--command"))
        if code is not None:
            return [("code", code)]
        return [("cmd", _skip(args, _opts("-w", "-E", "--timeout", "--conflict-exit-code"), 1))]
    if name == "script":
        code = _code_value(args, ("-c", "--command"))
        return [("code", code)] if code is not None else [("none", None)]
    if name == "xargs":
        with_value = _opts(
            "-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter",
            "--eof", "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars",
            "--process-slot-var",
        )  # fmt: skip
        rest = _skip(args, with_value)
        return [("fed", rest)] if rest else [("none", None)]
    if name == "parallel":
        cut = next((k for k, a in enumerate(args) if a.text in (":::", "::::", ":::+")), len(args))
        rest = _skip(args[:cut], _opts("-j", "-S", "--jobs", "-a", "--arg-file", "-d"))
        return [("fed", rest), ("code", _join(rest))]
    if name == "find":
        steps = []
        k = 0
        while k < len(args):
            if args[k].text in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next(
                    (j for j in range(k + 1, len(args)) if args[j].text in (";", "+")), len(args)
                )
                steps.append(("fed", args[k + 1 : end]))
                k = end
            k += 1
        return steps or [("none", None)]
    return None


def _script_runner(name: str, args: list[Word]) -> list[_Step] | None:
    """`git -c`, `source` and the shells: a script or a command string."""
    if name in ("source", "."):
        return [("unseen", f"{name} runs a script file")]
    if name in OPTION_RUNNERS:
        return [("unseen", f"{name} can run a command given in its options or input")]
    if name in SHELLS:
        flags = _flags(args, _opts("-o", "+o", "-O", "+O", "--rcfile", "--init-file"))
        if "c" in flags:
            rest = _skip(args, _opts("-o", "+o", "-O", "+O", "--rcfile", "--init-file"), plus=True)
            if rest:
                return [("code", rest[0].text)]
            return [("unseen", f"{name} -c without a command")]
        return [("unseen", f"{name} runs a script or what it reads")]
    return None


def _strip(words: list[Word]) -> list[Word]:
    """Leading assignments (`FOO=1`) and reserved words (`if`, `then`, `!`, `{`, `coproc`,
    `function NAME`) removed."""
    k = 0
    while k < len(words):
        word = words[k]
        if _ASSIGNMENT.match(word.text):
            k += 1
        elif word.dynamic:
            break
        elif word.text in RESERVED:
            k += 1
        elif word.text in ("function", "coproc") and k + 1 < len(words):
            # `function f { ...`; `coproc NAME { ...` (a bare `coproc cmd` runs cmd)
            named = word.text == "function" or (k + 2 < len(words) and words[k + 2].text == "{")
            k += 2 if named else 1
        else:
            break
    return words[k:]


_CHANGES_DIR = frozenset({"cd", "pushd", "popd"})


def _chdir(args: list[Word]) -> bool:
    """`env -C DIR` / `sudo -D DIR` (or `--chdir`): the command runs in another folder (read
    loosely: a `-C` of the command it runs counts too)."""
    return any(
        a.text.startswith("--chdir")
        or (
            a.text.startswith("-")
            and not a.text.startswith("--")
            and ("C" in a.text or "D" in a.text)
        )
        for a in args
    )


class _Walker:
    def __init__(self) -> None:
        self.out = Programs()

    def script(self, script: Script, depth: int) -> None:
        if script.broken:
            self.out.unseen.append("the command line does not parse")
        self.out.writes += [Written(target, redirect=True) for target in script.writes]
        for simple in script.commands:
            self.command(simple.words, depth)
        for sub in script.substitutions:
            self.script(sub, depth + 1)

    def code(self, text: str, depth: int) -> None:
        if depth >= _MAX_DEPTH:
            self.out.unseen.append("commands nested too deep to follow")
            return
        self.script(parse_script(text), depth + 1)

    def value(self, text: str, depth: int) -> None:
        """An assignment's value, read as code that may run later: what it would run is
        matched, but nothing in it makes the line computed or unseen."""
        saved = (self.out.computed, len(self.out.unseen))
        self.code(text, depth)
        self.out.computed = saved[0]
        del self.out.unseen[saved[1] :]

    def command(
        self, words: list[Word], depth: int, *, counted: bool = False, fed: bool = False
    ) -> None:
        """One command found; `counted`: its writes are counted already (git read again);
        `fed`: it gets more words when it runs (from `xargs` and the like)."""
        k = 0
        while k < len(words) and _ASSIGNMENT.match(words[k].text):
            k += 1
        self.steps(_assignment_steps(words[:k]), depth)
        words = _strip(words)
        if not words:
            return
        if depth >= _MAX_DEPTH:
            self.out.unseen.append("commands nested too deep to follow")
            return
        self.out.commands.append(words)
        head = words[0]
        if head.dynamic or any(ACTIVE + c in head.key for c in "*?[{"):
            self.out.computed = True
            self.out.unseen.append(f"the program name {head.text!r} is computed when it runs")
            return
        name = program_name(head.text)
        if not counted:
            found = writes(name, words[1:])
            self.out.writes += found.found
            self.out.unread_writes += found.unread
            if fed and name in WRITERS:
                self.out.unread_writes.append(
                    f"{name} is given file names when it runs (xargs, find -exec)"
                )
        if name in _CHANGES_DIR or (name in ("env", "sudo") and _chdir(words[1:])):
            self.out.changes_dir = True
        self.steps(_follow(name, words[1:]), depth, fed=fed)
        if is_interpreter(name) and name not in SHELLS and len(words) > 1:
            self.out.unseen.append(f"{name} runs code the rules cannot read")

    def steps(self, steps: list[_Step], depth: int, *, fed: bool = False) -> None:
        """Follow what a command runs (`fed`: it was given more words, and so is what it
        runs in turn: `xargs nice tee`)."""
        for kind, value in steps:
            if kind in ("cmd", "as", "fed") and isinstance(value, list):
                self.command(
                    value,
                    depth + 1,
                    counted=kind == "as",
                    fed=kind == "fed" or (fed and kind == "cmd"),
                )
            elif kind == "code" and isinstance(value, str):
                self.code(value, depth)
            elif kind == "value" and isinstance(value, str):
                self.value(value, depth)
            elif kind == "unseen" and isinstance(value, str):
                self.out.unseen.append(value)
            elif kind == "opaque" and isinstance(value, str):
                self.out.opaque.append(value)
            elif kind == "unknown_git" and isinstance(value, str):
                self.out.unknown_git.append(value)


@functools.lru_cache(maxsize=256)
def programs(command: str) -> Programs:
    """Every command `command` would run, followed through wrappers and shells (module doc).
    The result is shared: do not change it."""
    walker = _Walker()
    walker.script(parse_script(command), 0)
    return walker.out


RUNNERS: frozenset[str] = frozenset(
    {
        *_SIMPLE_RUNNERS,
        *_SUBCOMMAND_RUNNERS,
        "command", "env", "sudo", "su", "eval", "watch", "flock", "script", "xargs",
        "parallel", "find", "exec", "source", ".", "taskset", "trap", "mapfile", "readarray",
        "alias", "fc", *_DECLARERS,
    }
)  # fmt: skip
"""Programs that run their arguments (or a part of them) as a command."""


def runs_code(name: str) -> bool:
    """Whether the program `name` runs other commands or code given to it (a wrapper, a
    runner, a shell, an interpreter): a rule on it never widens from one call."""
    return name in RUNNERS or is_interpreter(name)
