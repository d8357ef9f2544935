"""Permission rules: `Tool` or `Tool(spec)`, and how a rule matches a tool call.

A bare rule (`Bash`, `Write`) matches every call of that tool. With a spec:

File tools (any call that reports paths: Read, Write, Edit, Glob, Grep): the spec is a
gitignore-like glob matched against the *real* paths the call touches (symlinks followed):
relative specs (`src/**`, `*.ipynb`) against the path relative to the work directory, for
paths inside it; absolute specs (`/data/**`) and `~` specs (`~/data/**`) against the absolute
path, inside or outside. `**` crosses folders, `*` does not; a spec without `/` matches a name
at any depth; a spec that matches a folder covers everything in it (see `tools.paths`).
Rules cover tool families: a `Read(...)` rule also applies to Glob and Grep, and `Edit(...)`
and `Write(...)` apply to both Edit and Write.

Bash: the spec is compared by shell words (`shlex`), so spacing and quoting do not matter.
`Bash(npm test)` matches exactly that command; `Bash(git status:*)` matches any command whose
words start with `git status`: `git status`, `git status -s`, not `git statusx`, and not
`npm run test:unit` for `Bash(npm run test:*)` (words, not characters). `Bash(*)` is `Bash`.
A command made of several commands (`;`, `&&`, `||`, `|`, `&`, newlines) is allowed only if
*every* part is allowed (by the same or different rules), unless an exact rule names the whole
command line. Parts that use command substitution (`$(...)`, backticks, `<(...)`) or write
to a file with `>` (other than `/dev/null` or another descriptor) are never allowed by a rule
with a spec - only a bare `Bash` rule, a mode or the policy can allow them. Deny rules look
harder: a deny rule matches if it matches any part, including text inside substitutions and
after leading `VAR=value`, `sudo`, `env`, `time`, `nohup`, `nice`, `command`, `exec`.

Other tools: the spec is compared with the tool's permission subject as text: exactly, or as
a prefix when it ends in `:*`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .tools.paths import rule_match

__all__ = ["Rule", "command_parts", "rule_families"]

_FAMILIES = {
    "Read": frozenset({"Read", "Glob", "Grep"}),
    "Edit": frozenset({"Edit", "Write"}),
    "Write": frozenset({"Edit", "Write"}),
}
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "nice", "command", "exec", "builtin"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def rule_families(rule_tool: str) -> frozenset[str]:
    """The tools a rule naming `rule_tool` applies to."""
    return _FAMILIES.get(rule_tool, frozenset({rule_tool}))


def _words(text: str) -> list[str] | None:
    try:
        return shlex.split(text, comments=False, posix=True)
    except ValueError:
        return None


@dataclass(frozen=True)
class CommandParts:
    """A shell command split for rule matching. `parts` is None when the command cannot be
    approved by a specific rule (substitution, file redirection, unbalanced quotes)."""

    whole: list[str] | None
    parts: list[list[str]] | None
    loose: list[list[str]] = field(default_factory=list)


def _split_strict(command: str) -> list[str] | None:
    """Split at control operators outside quotes; None if something in it cannot be judged
    by its words (substitution, output redirected to a file, unbalanced quotes)."""
    parts: list[str] = []
    cur: list[str] = []
    quote: str | None = None
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if quote == "'":
            cur.append(c)
            if c == "'":
                quote = None
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            cur.append(command[i : i + 2])
            i += 2
            continue
        if c == "`" or command.startswith("$(", i):
            return None
        if quote == '"':
            cur.append(c)
            if c == '"':
                quote = None
            i += 1
            continue
        if c in "'\"":
            quote = c
            cur.append(c)
            i += 1
            continue
        if c in "<>" and command.startswith("(", i + 1):
            return None  # process substitution
        if c == ">":
            j = i + 1
            while j < n and command[j] in ">|":
                j += 1
            if j < n and command[j] == "&":
                cur.append(command[i : j + 1])  # >&2, 2>&1: a descriptor, not a file
                i = j + 1
                continue
            target = command[j:].lstrip().split(maxsplit=1)
            if not target or not target[0].startswith("/dev/null"):
                return None
            cur.append(command[i:j])
            i = j
            continue
        if c == "&" and i + 1 < n and command[i + 1] == ">":
            return None  # &> file
        if c in ";\n|&":
            step = 2 if command.startswith(("&&", "||", "|&", ";;"), i) else 1
            parts.append("".join(cur))
            cur = []
            i += step
            continue
        cur.append(c)
        i += 1
    if quote is not None:
        return None
    parts.append("".join(cur))
    return [p for p in (q.strip() for q in parts) if p]


def _loose_parts(command: str) -> list[list[str]]:
    """Every plausible simple command in `command`, for deny rules: split at operators and
    brackets regardless of quotes, leading assignments and wrappers removed."""
    out: list[list[str]] = []
    for piece in re.split(r"\$\(|[;&|\n()`{}]", command):
        words = _words(piece) or piece.split()
        while words and (_ASSIGNMENT.match(words[0]) or words[0] in _WRAPPERS):
            words = words[1:]
        if words:
            out.append(words)
    return out


def command_parts(command: str) -> CommandParts:
    """The ways rules look at a command line (see the module doc)."""
    strict = _split_strict(command)
    parts: list[list[str]] | None = None
    if strict is not None:
        split = [_words(p) for p in strict]
        if all(w is not None for w in split):
            parts = [w for w in split if w]
    return CommandParts(_words(command), parts, _loose_parts(command))


@dataclass(frozen=True)
class Rule:
    """`Tool` or `Tool(spec)`; `str(rule)` gives the text back."""

    tool: str
    spec: str | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*(?:\((.*)\))?\s*", text, re.DOTALL)
        if m is None:
            raise ValueError(
                f"Bad permission rule {text!r}: write Tool or Tool(spec), e.g. 'Bash(git "
                "status:*)' or 'Write(src/**)'."
            )
        spec = (m.group(2) or "").strip()
        if spec in ("", "*", ":*"):
            return cls(m.group(1))
        return cls(m.group(1), spec)

    def __str__(self) -> str:
        return self.tool if self.spec is None else f"{self.tool}({self.spec})"

    def covers(self, tool: str) -> bool:
        return tool in rule_families(self.tool)

    @property
    def prefix(self) -> bool:
        return self.spec is not None and self.spec.endswith(":*")

    def _spec_words(self) -> list[str] | None:
        assert self.spec is not None
        return _words(self.spec[:-2] if self.prefix else self.spec)

    # -- paths ---------------------------------------------------------------------------

    def path_pattern(self) -> str:
        """The spec as a path glob (`~` expanded, `./` dropped)."""
        assert self.spec is not None
        spec = self.spec
        if spec.startswith("~"):
            spec = str(Path(spec).expanduser()) + ("/" if spec.endswith("/") else "")
        return spec[2:] if spec.startswith("./") else spec

    def matches_path(self, forms: list[str]) -> bool:
        """Whether the spec matches one of a path's forms (relative and/or absolute)."""
        if self.spec is None:
            return True
        pattern = self.path_pattern()
        return any(rule_match(pattern, form) for form in forms)

    # -- commands ------------------------------------------------------------------------

    def matches_words(self, words: list[str]) -> bool:
        if self.spec is None:
            return True
        want = self._spec_words()
        if want is None or not want:
            return False
        return words[: len(want)] == want if self.prefix else words == want

    def matches_text(self, subject: str) -> bool:
        if self.spec is None:
            return True
        if self.prefix:
            return subject.startswith(self.spec[:-2])
        return subject == self.spec
