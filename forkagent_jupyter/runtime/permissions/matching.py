"""One tool call as the permission rules see it (`CallFacts`), and what the rules in force
(`RuleBook`) say about it: the deny or ask rule that matches, the allow rule that covers every
part of it, a path outside the work directory that no rule lets through, the files a search
must not show, and the rule "allow for session" would add (exactly as wide as the call).
Rule syntax and the matching of one rule: `permission_rules`.

A Bash call that writes files (a redirection, `sort -o`, `git log --output=`, `cp`, `tar -x`:
`shell_writes`) is decided like a Write of each as well (`CallFacts.writes`): an Edit deny
or ask rule matching one denies or asks it (`matching`); a settings or agent file, a folder
the command fills with names of its own choosing where such a file lies or a deny or ask rule
may apply, and a written name the rules cannot resolve while such a rule is in force are
asked (`write_asks`); the Bash rule that allows the command allows its writes only where a
Write would be allowed (an Edit allow rule, `acceptEdits` inside the work directory), or
where the rule names the line exactly (`writes_allowed`).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel

from ..tools.base import Tool, ToolContext
from ..tools.files.paths import is_inside, literal_prefix, real, shown_path
from .policies import Deny
from .rulebook import RuleBook
from .rules import PATH_TOOLS, READING_TOOLS, Rule, escape_glob
from .runs_later import runs_later
from .shell_programs import program_name, programs, runs_code
from .shell_syntax import ACTIVE, Word, parse_script
from .shell_writes import Written

__all__ = [
    "CallFacts",
    "Target",
    "allowed_by",
    "bash_allowed_by",
    "call_facts",
    "kernel_secret",
    "matching",
    "names_its_writes",
    "outside_denial",
    "read_guard",
    "suggest_rule",
    "touches_settings",
    "unfollowed",
    "widens_a_runner",
    "write_asks",
    "writes_allowed",
]


@dataclass(frozen=True)
class Target:
    """A file a Bash call writes, or (`into`) a folder it writes names of its own choosing
    into (only top-level names matching `names`, where given); `named`: one of the
    command's words names it (not a redirection), so a rule naming the exact line names it."""

    path: Path
    forms: list[str]
    into: bool = False
    names: str | None = None
    named: bool = True


@dataclass(frozen=True)
class CallFacts:
    """One call as the rules see it; for Bash, what it writes (`writes`) and why it may
    write files the rules cannot name (`unread`)."""

    tool: str
    subject: str
    paths: list[Path]
    forms: list[list[str]]  # per path: the forms rules match against
    outside: list[Path]
    root: Path  # the work directory (real): where `/path` rules start
    writes: tuple[Target, ...] = ()
    unread: tuple[str, ...] = ()


def _inside(book: RuleBook, root: Path, path: Path) -> bool:
    return is_inside(root, path) or any(is_inside(d, path) for d in book.directories)


def call_facts(book: RuleBook, tool: Tool[Any], args: BaseModel, ctx: ToolContext) -> CallFacts:
    root = real(ctx.workdir)
    paths = [real(p) for p in tool.paths(args, ctx)]
    forms: list[list[str]] = []
    for p in paths:
        shown = shown_path(root, p)
        forms.append([shown, str(p)] if shown != str(p) else [str(p)])
    outside = [p for p in paths if not _inside(book, root, p)]
    subject = tool.permission_subject(args)
    if tool.name != "Bash":
        return CallFacts(tool.name, subject, paths, forms, outside, root)
    found = programs(subject)
    targets: list[Target] = []
    unread = list(found.unread_writes)
    for written in found.writes:
        got = _targets(written, root, found.changes_dir)
        if isinstance(got, str):
            unread.append(got)
        else:
            targets += got
    return CallFacts(tool.name, subject, paths, forms, outside, root, tuple(targets), tuple(unread))


# -- what a Bash call writes -------------------------------------------------------------------

_COMPUTED = tuple(ACTIVE + c for c in "*?[{$`")


def _forms(root: Path, path: Path) -> list[str]:
    """The forms rules match `path` (real, or a symlink's own place) against, as it is."""
    try:
        return [path.relative_to(root).as_posix() or ".", str(path)]
    except ValueError:
        return [str(path)]


def _place(word: Word, start: Path, moved: bool) -> Path | str:
    """Where a path word written in `start` is (symlinks followed), or why that cannot be
    told (`moved`: the line moved to another folder first)."""
    found = _places(word, start, moved)
    return found if isinstance(found, str) else found[0]


def _places(word: Word, start: Path, moved: bool) -> list[Path] | str:
    """`_place`, and where a symlink the path names is itself, if it names one: `sed -i`,
    `mv`, `ln -sf` replace the link, `cp` and `>` write where it points."""
    if word.dynamic or any(c in word.key for c in _COMPUTED):
        return f"it writes to {word.text!r}, a name computed when it runs"
    text = word.text
    if text == "~" or text.startswith("~/"):
        lexical = Path("~").expanduser() / text[2:]
    elif text.startswith("~"):
        return f"it writes to {text!r}, in another user's home"
    elif moved and not text.startswith("/"):
        return f"it writes to {text!r} after moving to another folder (cd)"
    else:
        lexical = start / text
    where = real(lexical)
    if lexical.is_symlink() and text.rstrip("/") not in ("", ".", ".."):
        link = real(lexical.parent) / lexical.name
        if link != where:
            return [where, link]
    return [where]


def _targets(written: Written, root: Path, moved: bool) -> list[Target] | str:
    """What one `Written` stands for, as paths (or why the rules cannot tell)."""
    start: Path | str = root
    for step in written.base:
        start = _place(step, start, moved) if isinstance(start, Path) else start
    if isinstance(start, str):
        return start
    places = _places(written.path, start, moved and not written.base)
    if isinstance(places, str):
        return places
    where = places[0]
    named = not written.redirect
    if not written.sources:
        into = where.is_dir() if written.into is None else written.into
        return [Target(p, _forms(root, p), into, written.names, named) for p in places]
    folder = written.to_folder or (
        not written.no_folder and (where.is_dir() or written.path.text.endswith("/"))
    )
    out: list[Target] = []
    for source in written.sources:
        found = _place(source, start, moved)
        if isinstance(found, str):  # `cp *.json dest/`: names the rules cannot tell
            out.append(Target(where, _forms(root, where), True, None, named))
            continue
        name = PurePosixPath(source.text.rstrip("/") or "/").name
        target = real(where / name) if folder and name not in ("", ".", "..") else where
        out.append(Target(target, _forms(root, target), found.is_dir(), None, named))
    return out


def _write_facts(facts: CallFacts, target: Target) -> CallFacts:
    """A Write of `target`, as the rules see one."""
    outside = [] if is_inside(facts.root, target.path) else [target.path]
    return CallFacts("Write", facts.subject, [target.path], [target.forms], outside, facts.root)


def kernel_secret(path: Path, secrets: list[Path]) -> Path | None:
    """The kernel secret (its connection file, Jupyter's runtime folder) `path` is or lies
    in, if any."""
    return next((s for s in secrets if path == s or is_inside(s, path)), None)


def read_guard(
    book: RuleBook, workdir: Path, secrets: list[Path] | None = None
) -> Callable[[Path], bool]:
    """For Glob and Grep: hide files that a deny or ask rule for any reading tool matches,
    and the kernel's secrets (the same for every call, so parallel searches sharing
    `ctx.services` agree)."""
    root = real(workdir)
    hidden = secrets or []

    def allowed(path: Path) -> bool:
        if kernel_secret(path, hidden) is not None:
            return False
        shown = shown_path(root, path)
        forms = [shown, str(path)] if shown != str(path) else [str(path)]
        return not any(
            r.spec is not None
            and any(r.covers(t) for t in READING_TOOLS)
            and r.matches_path(forms, root)
            for r in (*book.deny, *book.ask)  # a search cannot ask per file
        )

    return allowed


def matching(rules: list[Rule], facts: CallFacts) -> Rule | None:
    """The first of `rules` (deny or ask) that matches the call; for Bash, an Edit rule
    (any rule for the tools that write files) that matches a file it writes, or a folder it
    fills (a bare one: any write)."""
    for rule in rules:
        if facts.tool == "Bash" and not rule.covers("Bash") and rule.covers("Write"):
            if _matches_a_write(rule, facts):
                return rule
            continue
        if not rule.covers(facts.tool):
            continue
        if rule.spec is None:
            return rule
        if facts.tool in PATH_TOOLS or (facts.paths and facts.tool != "Bash"):
            if any(rule.matches_path(forms, facts.root) for forms in facts.forms):
                return rule
        elif facts.tool == "Bash":
            if rule.denies_command(facts.subject):
                return rule
        elif rule.matches_text(facts.subject):
            return rule
    return None


def _matches_a_write(rule: Rule, facts: CallFacts) -> bool:
    if rule.spec is None:
        return bool(facts.writes or facts.unread)
    return any(rule.matches_path(t.forms, facts.root) for t in facts.writes)


def unfollowed(book: RuleBook, facts: CallFacts) -> str | None:
    """Why a Bash line must be asked because the rules cannot tell what it runs (None: they
    can): its program name is computed when it runs, while a Bash deny rule with a spec is
    in force; it runs code through git (`git -c core.pager=...`, a `!` alias) or changes
    what a later git word means (`git config alias...`), while a Bash deny or ask rule with a
    spec is; its git subcommand may be an alias, while such a rule names git."""
    if facts.tool != "Bash":
        return None
    found = programs(facts.subject)
    if found.computed and any(r.spec is not None and r.covers("Bash") for r in book.deny):
        return (
            "the command's program is computed when it runs, so the deny rules cannot be "
            "checked against it"
        )
    restricting = [r for r in (*book.deny, *book.ask) if r.spec is not None and r.covers("Bash")]
    if found.opaque and restricting:
        return f"{found.opaque[0]}, so the rule {restricting[0]} cannot be checked against it"
    git_rules = [r for r in restricting if r.program in ("git", None)]
    if found.unknown_git and git_rules:
        return f"{found.unknown_git[0]}, so the rule {git_rules[0]} cannot be checked against it"
    return None


def write_asks(book: RuleBook, facts: CallFacts) -> str | None:
    """Why a Bash call's writes must be asked whatever the mode and the allow rules say (None:
    nothing forces it): it writes a settings or agent file; it fills a folder holding one,
    or one where an Edit deny or ask rule may apply; it writes a name the rules cannot
    resolve while such a rule is in force. (A rule that matches a written file is
    `matching`'s.)"""
    for target in facts.writes:
        if target.into:
            if _holds_settings(target, facts.root, book.home):
                return (
                    f"it writes files of its own choosing into {target.forms[0]}, where "
                    "settings or agent files are (a change to one is always approved by the "
                    "user)"
                )
            for rule in (*book.deny, *book.ask):
                if rule.covers("Write") and _may_cover(rule, target.path, facts.root):
                    return (
                        f"it writes files of its own choosing into {target.forms[0]}, which the "
                        f"rule {rule} may cover"
                    )
        elif touches_settings(_write_facts(facts, target), book.home):
            return (
                f"it writes {target.forms[0]}, a settings or agent file (a change to one is "
                "always approved by the user)"
            )
        later = runs_later(target.path / "x" if target.into else target.path, [book.home])
        if later is not None:
            shown = target.forms[0] if target.forms[0].isprintable() else repr(target.forms[0])
            return (
                f"it writes {'into ' if target.into else ''}{shown}, which runs later without "
                f"being asked ({later}; a change to it is always approved by the user)"
            )
    edit_rules = [r for r in (*book.deny, *book.ask) if r.spec is not None and r.covers("Write")]
    if facts.unread and edit_rules:
        return f"{facts.unread[0]}, so the rule {edit_rules[0]} cannot be checked against it"
    return None


def writes_allowed(
    book: RuleBook, facts: CallFacts, *, accept_edits: bool, named: tuple[bool, bool]
) -> bool:
    """Whether a Bash call's writes are allowed as Writes of them would be: by an Edit allow
    rule (with a spec, outside the work directory), by `accept_edits` inside it, or because
    the rule that allowed the command names the exact line (`named`: its words' files, its
    redirections' files)."""
    if facts.unread:
        return False
    for target in facts.writes:
        if named[0 if target.named else 1]:
            continue
        inside = _inside(book, facts.root, target.path)
        if inside and accept_edits:
            continue
        if not any(
            r.covers("Write")
            and (r.spec is not None or inside)
            and r.matches_path(target.forms, facts.root)
            for r in book.allow
        ):
            return False
    return True


def _may_cover(rule: Rule, folder: Path, root: Path) -> bool:
    """Whether `rule` may match a file of some name below `folder`."""
    if rule.spec is None:
        return True
    for pattern in rule.path_patterns(root):
        body = pattern.rstrip("/").removeprefix("./")
        if "/" not in body:  # a name at any depth
            return True
        prefix = re.sub(r"\\(.)", r"\1", literal_prefix(pattern)[0])
        start = Path(prefix) if prefix.startswith("/") else root / prefix
        if is_inside(folder, start) or is_inside(start, folder):
            return True
    return False


def _holds_settings(target: Target, root: Path, home: Path | None) -> bool:
    """Whether a folder a command fills (with names matching `target.names`) holds a settings
    or agent file of the project or of the person, or lies in an agents folder."""
    probes = (*sorted(_SETTINGS_FILES), *(f + "x.md" for f in _AGENT_FOLDERS))
    places = [real(root / p) for p in probes]
    if home is not None:
        places += [real(home / p) for p in (*probes, ".claude.json")]
    for place in places:
        if not is_inside(target.path, place):
            continue
        parts = place.relative_to(target.path).parts
        if target.names is None or (parts and fnmatch.fnmatchcase(parts[0], target.names)):
            return True
    inner = target.path / "x"  # a file in it: in an agents folder?
    return touches_settings(CallFacts("Write", "", [inner], [_forms(root, inner)], [], root), home)


def allowed_by(book: RuleBook, facts: CallFacts) -> Rule | None:
    """The allow rule that covers the whole call (every path, every command of a line)."""
    rules = [r for r in book.allow if r.covers(facts.tool)]
    for rule in rules:
        if rule.spec is None:
            return rule
    specific = [r for r in rules if r.spec is not None]
    if not specific:
        return None
    if facts.paths:
        chosen: list[Rule] = []
        for forms in facts.forms:
            hit = next((r for r in specific if r.matches_path(forms, facts.root)), None)
            if hit is None:
                return None
            chosen.append(hit)
        return chosen[0]
    if facts.tool == "Bash":
        used = bash_allowed_by(book, facts)
        return used[0] if used else None
    return next((r for r in specific if r.matches_text(facts.subject)), None)


def bash_allowed_by(book: RuleBook, facts: CallFacts) -> list[Rule]:
    """The allow rules that together allow a Bash line's commands (its writes aside: see
    `writes_allowed`): a bare `Bash`, a rule for the whole line, or one per command; none
    for a line whose words do not say what it does, or that runs code through git."""
    rules = [r for r in book.allow if r.covers("Bash")]
    bare = next((r for r in rules if r.spec is None), None)
    if bare is not None:
        return [bare]
    script = parse_script(facts.subject)
    if not script.judgeable or programs(facts.subject).opaque:
        return []
    whole = next((r for r in rules if r.allows_command(script)), None)
    if whole is not None:
        return [whole]
    parts = script.commands
    hits = [next((r for r in rules if r.allows_part(p.words)), None) for p in parts]
    return [h for h in hits if h is not None] if parts and all(hits) else []


def names_its_writes(rules: list[Rule]) -> tuple[bool, bool]:
    """Whether the allow rules that allowed a Bash line name the files its words write (a
    bare `Bash`, or rules naming exact lines), and those its redirections write (a bare
    `Bash`, or one exact rule for the line with those redirections)."""
    if any(r.spec is None for r in rules):
        return True, True
    words = bool(rules) and all(r.exact for r in rules)
    return words, words and len(rules) == 1 and rules[0].names_redirects


def outside_denial(book: RuleBook, facts: CallFacts, workdir: Path) -> Deny | None:
    """The denial of a path outside the work directory that no allow rule with a spec for
    this tool lets through."""
    for p in facts.outside:
        if not any(
            r.spec is not None and r.covers(facts.tool) and r.matches_path([str(p)], facts.root)
            for r in book.allow
        ):
            family = "Read" if facts.tool in READING_TOOLS else facts.tool
            where = p if p.is_dir() else p.parent
            return Deny(
                f"{facts.tool} refused: {p} is outside the work directory {real(workdir)}. "
                "Work inside it. Files elsewhere can be allowed only by the user, with a "
                f"rule such as {family}(/{escape_glob(str(where))}/**)."
            )
    return None


def suggest_rule(facts: CallFacts, workdir: Path) -> str | None:
    """What "allow for session" adds: a rule exactly as wide as this call (the exact command,
    the exact file, the exact agent type), or None when no rule can say exactly this call."""
    if facts.tool == "Bash":
        command = facts.subject
        script = parse_script(command)
        if "\n" in command or not script.judgeable or not script.commands or script.writes:
            return None  # a redirection's file is not one of the words a rule matches
        if programs(command).opaque or programs(command).unread_writes:
            return None
        if any("\x02*" in w.key for c in script.commands for w in c.words):
            return None  # an unquoted `*` would be read as a wildcard
        text = f"Bash({command})"
        try:
            rule = Rule.parse(text)
        except ValueError:
            return None
        return text if rule.allows_command(script) else None
    if facts.paths:
        if len(facts.paths) != 1:
            return None
        root = real(workdir)
        shown = shown_path(root, facts.paths[0])
        spec = "/" + (escape_glob(shown) if shown != "." else "")
        if shown.startswith("/"):
            spec = "/" + escape_glob(shown)
        return f"{facts.tool}({spec.rstrip('/') or '/'})" if spec != "/" else None
    if facts.subject:
        if "\n" in facts.subject or facts.subject.endswith(":*"):
            return None
        text = f"{facts.tool}({facts.subject})"
        try:
            Rule.parse(text)
        except ValueError:
            return None
        return text
    return facts.tool


_SETTINGS_FILES = frozenset(
    [
        *(
            f"{folder}/{name}"
            for folder in (".claude", ".forkagent")
            for name in ("settings.json", "settings.local.json")
        ),
        ".mcp.json",  # its servers are commands the session runs
    ]
)


_AGENT_FOLDERS = (".claude/agents/", ".forkagent/agents/")


def touches_settings(facts: CallFacts, home: Path | None = None) -> bool:
    """Whether the call touches one of the project's settings files or agent files, or one of
    the person's own in `home` (`~/.claude.json` too: its servers are commands the session
    runs): an agent file's hooks run commands, the person's own run unasked, and their
    settings may turn on any mode; writing one must not be a way around asking."""
    if any(
        forms[0] in _SETTINGS_FILES or forms[0].startswith(_AGENT_FOLDERS) for forms in facts.forms
    ):
        return True
    if home is None:
        return False
    root = real(home)
    for path in facts.paths:
        try:
            inside = path.relative_to(root).as_posix()
        except ValueError:
            continue
        if (
            inside in _SETTINGS_FILES
            or inside == ".claude.json"
            or inside.startswith(_AGENT_FOLDERS)
        ):
            return True
    return any(path in _linked_agent_files(root) for path in facts.paths)


def _linked_agent_files(home: Path) -> set[Path]:
    """What the person's agent files resolve to where they are symlinks (a file or folder of
    ~/.claude/agents linked to one elsewhere, e.g. in a project): editing it edits their
    agent file, whose hooks run unasked."""
    out: set[Path] = set()
    for folder in _AGENT_FOLDERS:
        base = home / folder
        for top, _dirs, names in os.walk(base, followlinks=True):
            if top.count(os.sep) - str(base).count(os.sep) > 8:
                break
            for name in names:
                file = Path(top) / name
                if file.suffix == ".md":
                    target = real(file)
                    if target != file:
                        out.add(target)
    return out


def widens_a_runner(rule: Rule) -> bool:
    """A Bash rule with a wildcard or prefix whose program is a wrapper, shell or interpreter
    (`Bash(sh:*)`, `Bash(env *)`): it would allow whatever they run."""
    if rule.tool != "Bash" or rule.spec is None:
        return False
    if not (rule.prefix or "*" in rule.spec):
        return False
    script = parse_script(rule.spec[:-2] if rule.prefix else rule.spec)
    return (
        any(
            c.words and (c.words[0].active or runs_code(program_name(c.words[0].text)))
            for c in script.commands
        )
        or not script.commands
    )
