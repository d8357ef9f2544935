"""Permission rules as Claude Code writes them: `Tool` or `Tool(spec)`, and how one matches.

A bare rule (`Bash`, `Write`; `Tool(*)` is the same) matches every call of that tool; in
deny, it also removes the tool from what the model is offered. `TOOL_FAMILIES` is the one
table of which tools a rule covers: `Read(...)` also covers the tools that read (Glob, Grep,
LS), `Edit(...)` (and `Write`, `MultiEdit`, `NotebookEdit`) every tool that writes files,
`Task(...)` is `Agent(...)`. A tool name that is neither known (`KNOWN_TOOLS`) nor an MCP
name (`mcp__server`, `mcp__server__*`, `mcp__server__tool`) is refused, as is an empty spec
(`Bash()`): a rule a user cannot mean is said at load, never read as "all" or "nothing".

File tools (any call that reports paths): the spec is a gitignore-like glob matched against
the *real* paths the call touches (symlinks followed), read as Claude Code reads it:
`//abs/path` from the filesystem root, `/path` from the project root (the work directory),
`~/path` from the home folder, `path` or `./path` from the work directory (a spec without a
`/` matches a name at any depth). `**` crosses folders, `*` does not; a spec that matches a
folder covers everything in it (see `tools.files.paths`); `\\*` is a literal star. Braces
expand as in bash and in the Glob tool (`data/{a,b}.csv` is `data/a.csv` and `data/b.csv`;
nested, with globs, `{1..3}` ranges; `\\{` is a literal brace), each alternative read as a
spec of its own; a spec whose braces stand for more than `MAX_BRACE_EXPANSION` is refused.

Bash: the spec is a command line read by `shell_syntax`, so spacing and quoting of plain
words do not matter, but quoted and unquoted `$`, globs and `~` do (`'$HOME'` is not
`$HOME`). An unquoted `*` matches any characters, spaces included (`Bash(npm run *)`);
a trailing ` *` or `:*` also matches nothing (`Bash(ls *)` matches `ls` and `ls -la`, not
`lsof`; `Bash(git status:*)` matches `git status -s`). A spec with no `*` matches exactly
that command. A rule matches one simple command; a command line made of several is allowed
only if every part is (an exact rule may name a whole line, operators included). Deny rules
look through paths, wrappers, shells and runners (`shell_programs`).

WebFetch: `WebFetch(domain:example.com)` (`domain:*.example.com` for its subdomains).
Other tools: the spec is compared with the tool's permission subject: exactly, or as a
prefix when it ends in `:*`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ..tools.files.paths import MAX_BRACE_EXPANSION, expand_braces, rule_match
from .shell_programs import program_name, programs
from .shell_syntax import ACTIVE, Script, Word, parse_script

__all__ = [
    "EDITING_TOOLS",
    "KNOWN_TOOLS",
    "PATH_TOOLS",
    "READING_TOOLS",
    "TOOL_FAMILIES",
    "Rule",
    "escape_glob",
    "rule_families",
]

EDITING_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
READING_TOOLS = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead"})

TOOL_FAMILIES: dict[str, frozenset[str]] = {
    "Read": READING_TOOLS,
    "Edit": EDITING_TOOLS,
    "Write": EDITING_TOOLS,
    "MultiEdit": EDITING_TOOLS,
    "NotebookEdit": EDITING_TOOLS,
    "Task": frozenset({"Agent"}),
}
"""The tools a rule naming a key covers (a name not here covers only itself). A new tool that
reads or writes files is added to `READING_TOOLS` or `EDITING_TOOLS`, and nowhere else."""

KNOWN_TOOLS: frozenset[str] = frozenset(
    {
        *READING_TOOLS,
        *EDITING_TOOLS,
        "Bash", "Python", "Agent", "Task", "SendMessage", "TaskStop", "TaskOutput",
        "TodoWrite", "WebFetch", "WebSearch", "KillShell", "BashOutput", "ExitPlanMode",
        "SlashCommand", "Skill", "PowerShell", "AskUserQuestion", "EnterPlanMode",
        "TodoRead", "KillBash", "ListMcpResourcesTool", "ReadMcpResourceTool", "LSP",
    }
)  # fmt: skip
"""Tool names a rule may name: this project's and Claude Code's (a rule for a tool this
project does not have loads and matches nothing)."""

PATH_TOOLS = READING_TOOLS | EDITING_TOOLS
"""Tools whose rule specs are paths."""

_NAME = r"[A-Za-z_][A-Za-z0-9_]*|mcp__[A-Za-z0-9_.-]+(?:__\*)?"
_MCP = re.compile(r"mcp__([A-Za-z0-9.-]+(?:_[A-Za-z0-9.-]+)*)(?:__(.+))?")


def rule_families(rule_tool: str) -> frozenset[str]:
    """The tools a rule naming `rule_tool` applies to."""
    return TOOL_FAMILIES.get(rule_tool, frozenset({rule_tool}))


def escape_glob(text: str) -> str:
    """`text` as a rule spec that matches exactly it (`**` -> `\\*\\*`)."""
    return re.sub(r"([*?\[\]{}\\])", r"\\\1", text)


# -- Bash patterns --------------------------------------------------------------------------

_WILD = ACTIVE + "*"
_ANY = r"[\s\S]*"
_ANY_IN_PART = r"(?:(?!\x00op:)[\s\S])*"


def _word_regex(key: str, *, loose: bool, any_: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(key):
        if key.startswith(_WILD, i):
            out.append(any_)
            i += 2
            continue
        if key[i] == ACTIVE:
            out.append(re.escape(key[i + 1]) if loose else re.escape(key[i : i + 2]))
            i += 2
            continue
        out.append(re.escape(key[i]))
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class _BashSpec:
    """A Bash rule's spec, compiled: `strict` matches word keys (allow rules), `loose` the
    words' text with the program's path dropped (deny rules); `literals` are its leading
    words without a wildcard (what must appear in a line the matcher cannot follow);
    `redirects` the files its redirections write (a line it allows writes exactly those)."""

    strict: re.Pattern[str]
    loose: re.Pattern[str]
    multi: bool
    wild: bool
    literals: tuple[str, ...]
    redirects: tuple[str, ...]


def _compile_bash(spec: str) -> _BashSpec:
    prefix = spec.endswith(":*")
    script = parse_script(spec[:-2] if prefix else spec)
    if script.broken:
        raise ValueError("the command in it does not parse (unbalanced quotes or brackets)")
    if script.substitutions:
        raise ValueError("a rule cannot match a command substitution ($(...), `...`)")
    stream = script.stream()
    if not stream:
        raise ValueError("it names no command")
    multi = any(tok.startswith("\x00op:") for tok in stream)
    any_ = _ANY_IN_PART if multi else _ANY

    optional_tail = len(stream) > 1 and stream[-1] == _WILD  # `ls *` also matches `ls`
    body = stream[:-1] if optional_tail else stream
    tail = f"(?:\x00{any_})?" if (optional_tail or prefix) else ""

    def build(loose: bool) -> re.Pattern[str]:
        parts: list[str] = []
        for k, tok in enumerate(body):
            if tok.startswith("\x00op:"):
                parts.append(re.escape(tok))
                continue
            if loose and k == 0 and ACTIVE not in tok:
                tok = program_name(tok)
            parts.append(_word_regex(tok, loose=loose, any_=any_))
        return re.compile("\x00".join(parts) + tail)

    literals: list[str] = []
    for tok in stream:
        if ACTIVE in tok or tok.startswith("\x00op:"):
            break
        literals.append(program_name(tok) if not literals else tok)
    wild = prefix or any(_WILD in tok for tok in stream)
    redirects = tuple(w.key for w in script.writes)
    return _BashSpec(build(False), build(True), multi, wild, tuple(literals), redirects)


def _strict_key(words: list[Word]) -> str:
    return "\x00".join(w.key for w in words)


def _loose_keys(words: list[Word]) -> list[str]:
    texts = [w.text for w in words]
    keys = ["\x00".join(texts)]
    if texts and program_name(texts[0]) != texts[0]:
        keys.append("\x00".join([program_name(texts[0]), *texts[1:]]))
    return keys


_TOKEN = re.compile(r"[A-Za-z0-9_.+/@%:,=-]+")


def _tokens(command: str, words: list[list[Word]]) -> set[str]:
    """Every word-like token of a line (raw text and unquoted words), with program paths
    dropped: what a line the matcher cannot follow might run."""
    found: set[str] = set()
    for text in [command, *(w.text for ws in words for w in ws)]:
        for tok in _TOKEN.findall(text):
            found.add(tok)
            found.add(program_name(tok))
    return found


def _spec_words(spec: str) -> list[str]:
    """The words of a Bash spec read as text (its `:*` tail and wildcards left out)."""
    return [
        program_name(t) if i == 0 else t
        for i, t in enumerate(_TOKEN.findall(spec.removesuffix(":*")))
    ]


# -- rules ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """`Tool` or `Tool(spec)`; `str(rule)` gives the text back. `source` says where it came
    from (a settings file, `Session(allow=...)`, "allow for session"); rules are equal by
    their text alone."""

    tool: str
    spec: str | None = None
    source: str = field(default="", compare=False)
    words_only: bool = field(default=False, compare=False)
    """A deny or ask Bash rule whose command does not parse (`Bash(python3 -c ' *)`): it
    holds wherever its words appear, as a rule holds on a line the matcher cannot follow."""

    @classmethod
    def parse(
        cls,
        text: str,
        source: str = "",
        tools: frozenset[str] = frozenset(),
        *,
        restricting: bool = False,
    ) -> Rule:
        """Read a rule; ValueError (one line) if it is not one a user can mean. `tools`: tool
        names known besides `KNOWN_TOOLS` (a session's own tools). `restricting` (a deny or
        ask rule): a Bash command that does not parse is read by its words (`words_only`)
        instead of refused, so the rule still holds where Claude Code's would."""
        if not isinstance(text, str):
            raise ValueError(f"a rule is a string like 'Bash(git status:*)', not {text!r}")
        m = re.fullmatch(rf"\s*({_NAME})\s*(?:\((.*)\))?\s*", text, re.DOTALL)
        if m is None:
            raise ValueError(
                f"{text!r} is not a rule: write Tool or Tool(spec), e.g. 'Bash(git status:*)' "
                "or 'Edit(src/**)'"
            )
        tool, raw = m.group(1), m.group(2)
        if not tool.startswith("mcp__") and tool not in KNOWN_TOOLS and tool not in tools:
            near = next((k for k in KNOWN_TOOLS | tools if k.lower() == tool.lower()), None)
            hint = f" (did you mean {near}?)" if near else ""
            raise ValueError(f"{text!r} names no tool: {tool!r} is unknown{hint}")
        if raw is None:
            return cls(tool, None, source)
        spec = raw.strip()
        if not spec:
            raise ValueError(f"{text!r} has an empty spec: write {tool} for every call")
        if "\n" in spec:
            raise ValueError(f"{text!r} spans lines: a rule is one line")
        if spec in ("*", ":*"):
            return cls(tool, None, source)
        rule = cls(tool, spec, source)
        if tool.startswith("mcp__"):
            raise ValueError(f"{text!r}: an MCP rule takes no spec (name the tool instead)")
        if tool == "Bash":
            try:
                _bash(spec)
            except ValueError:
                if not (restricting and _spec_words(spec)):
                    raise
                return cls(tool, spec, source, words_only=True)
        elif tool == "WebFetch" and not spec.startswith("domain:"):
            raise ValueError(f"{text!r}: a WebFetch rule is WebFetch(domain:example.com)")
        elif tool in PATH_TOOLS:
            try:
                _alternatives(spec)
            except ValueError as exc:
                raise ValueError(f"{text!r}: {exc}") from None
        return rule

    def __str__(self) -> str:
        return self.tool if self.spec is None else f"{self.tool}({self.spec})"

    def with_source(self, source: str) -> Rule:
        return Rule(self.tool, self.spec, source, self.words_only)

    def covers(self, tool: str) -> bool:
        """Whether this rule applies to calls of `tool` (families; MCP servers)."""
        if self.tool.startswith("mcp__"):
            return _mcp_covers(self.tool, tool)
        return tool in rule_families(self.tool)

    @property
    def prefix(self) -> bool:
        return self.spec is not None and self.spec.endswith(":*")

    @property
    def exact(self) -> bool:
        """A Bash rule that names one command line (no wildcard, no prefix): the files the
        line's words name are the person's to write, as the rule wrote them."""
        return (
            self.tool == "Bash"
            and self.spec is not None
            and not self.words_only
            and (not _bash(self.spec).wild)
        )

    @property
    def names_redirects(self) -> bool:
        """An exact Bash rule whose command writes files through redirections (`Bash(make
        > log.txt)`): it allows only lines writing exactly those."""
        return self.exact and bool(_bash(self.spec or "").redirects)

    @property
    def program(self) -> str | None:
        """The program a Bash rule with a spec names (None: it starts with a wildcard)."""
        if self.spec is None:
            return None
        if self.words_only:
            words = _spec_words(self.spec)
            return words[0] if words else None
        literals = _bash(self.spec).literals
        return literals[0] if literals else None

    # -- paths ---------------------------------------------------------------------------

    def path_patterns(self, root: Path | None = None) -> list[str]:
        """The spec as path globs, one per alternative its braces stand for: `//abs` ->
        `/abs`, `/path` -> under `root` (the project), `~/path` -> under the home folder,
        `./path` -> `path` (relative)."""
        assert self.spec is not None
        try:
            specs = _alternatives(self.spec)
        except ValueError:  # a rule of a tool whose specs are not paths
            specs = (self.spec,)
        return [_path_pattern(spec, root) for spec in specs]

    def matches_path(self, forms: list[str], root: Path | None = None) -> bool:
        """Whether the spec matches one of a path's forms (relative and/or absolute)."""
        if self.spec is None:
            return True
        return any(
            rule_match(pattern, form) for pattern in self.path_patterns(root) for form in forms
        )

    # -- commands ------------------------------------------------------------------------

    def allows_command(self, script: Script) -> bool:
        """Allow side: whether this rule allows the whole line (every part matched by it);
        the gate combines rules part by part with `allows_part`."""
        if self.spec is None:
            return True
        if self.words_only:  # a restricting rule only: it never allows
            return False
        spec = _bash(self.spec)
        if not script.judgeable:
            return False
        if spec.redirects and spec.redirects != tuple(w.key for w in script.writes):
            return False
        if spec.multi or spec.redirects:
            return spec.strict.fullmatch("\x00".join(script.stream())) is not None
        return bool(script.commands) and all(self.allows_part(c.words) for c in script.commands)

    def allows_part(self, words: list[Word]) -> bool:
        if self.spec is None:
            return True
        if self.words_only:
            return False
        spec = _bash(self.spec)
        if spec.multi or spec.redirects:  # the whole line only
            return False
        return spec.strict.fullmatch(_strict_key(words)) is not None

    def denies_command(self, command: str) -> bool:
        """Deny side: whether this rule matches anything `command` would run, seen through
        paths, wrappers, shells and runners; where the line cannot be followed, whether the
        rule's words appear in it at all."""
        if self.spec is None:
            return True
        if self.words_only:
            return set(_spec_words(self.spec)) <= _tokens(command, programs(command).commands)
        spec = _bash(self.spec)
        if spec.multi:
            whole = parse_script(command)
            if spec.loose.fullmatch("\x00".join(w for w in _loose_stream(whole))):
                return True
        found = programs(command)
        for words in found.commands:
            if any(spec.loose.fullmatch(key) for key in _loose_keys(words)):
                return True
        if found.unseen and spec.literals:
            return set(spec.literals) <= _tokens(command, found.commands)
        return False

    # -- other tools ---------------------------------------------------------------------

    def matches_text(self, subject: str) -> bool:
        if self.spec is None:
            return True
        if self.tool == "WebFetch":
            return _domain_matches(self.spec[len("domain:") :], subject)
        if self.prefix:
            return subject.startswith(self.spec[:-2])
        return subject == self.spec


@functools.lru_cache(maxsize=1024)
def _alternatives(spec: str) -> tuple[str, ...]:
    """A path spec's alternatives (its braces expanded); ValueError past the limit."""
    return tuple(expand_braces(spec, MAX_BRACE_EXPANSION))


def _path_pattern(spec: str, root: Path | None) -> str:
    if spec.startswith("//"):
        return spec[1:]
    if spec.startswith("/"):
        base = escape_glob(str(root)) if root is not None else ""
        return base.rstrip("/") + spec
    if spec == "~" or spec.startswith("~/"):
        home = escape_glob(str(Path("~").expanduser()))
        return home + spec[1:]
    return spec[2:] if spec.startswith("./") else spec


def _loose_stream(script: Script) -> list[str]:
    return [tok.replace(ACTIVE, "") for tok in script.stream()]


@functools.lru_cache(maxsize=1024)
def _bash(spec: str) -> _BashSpec:
    return _compile_bash(spec)


def _mcp_covers(rule_tool: str, tool: str) -> bool:
    m = _MCP.fullmatch(rule_tool.removesuffix("__*"))
    if m is None or not tool.startswith("mcp__"):
        return False
    if m.group(2) is None:  # `mcp__server` or `mcp__server__*`: every tool of the server
        return tool.startswith(f"mcp__{m.group(1)}__")
    return tool == rule_tool


def _domain_matches(domain: str, subject: str) -> bool:
    host = (urlsplit(subject).hostname if "://" in subject else subject.split("/")[0]) or ""
    host, domain = host.lower().rstrip("."), domain.lower().strip()
    if domain.startswith("*."):
        return host.endswith(domain[1:]) or host == domain[2:]
    return host == domain
