"""One tool call as the permission rules see it (`CallFacts`), and what the rules in force
(`RuleBook`) say about it: the deny or ask rule that matches, the allow rule that covers every
part of it, a path outside the work directory that no rule lets through, the files a search
must not show, and the rule "allow for session" would add (exactly as wide as the call).
Rule syntax and the matching of one rule: `permission_rules`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..tools.base import Tool, ToolContext
from ..tools.paths import is_inside, real, shown_path
from .policies import Deny
from .rulebook import RuleBook
from .rules import PATH_TOOLS, READING_TOOLS, Rule, escape_glob
from .shell_programs import program_name, programs, runs_code
from .shell_syntax import parse_script

__all__ = [
    "CallFacts",
    "allowed_by",
    "call_facts",
    "kernel_secret",
    "matching",
    "outside_denial",
    "read_guard",
    "suggest_rule",
    "touches_settings",
    "unfollowed",
    "widens_a_runner",
]


@dataclass(frozen=True)
class CallFacts:
    """One call as the rules see it."""

    tool: str
    subject: str
    paths: list[Path]
    forms: list[list[str]]  # per path: the forms rules match against
    outside: list[Path]
    root: Path  # the work directory (real): where `/path` rules start


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
    return CallFacts(tool.name, tool.permission_subject(args), paths, forms, outside, root)


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
    """The first of `rules` (deny or ask) that matches the call."""
    for rule in rules:
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


def unfollowed(book: RuleBook, facts: CallFacts) -> str | None:
    """A Bash line whose program name is computed when it runs, while a Bash deny rule
    with a spec is in force: the rules cannot tell what it runs."""
    if facts.tool != "Bash":
        return None
    if not any(r.spec is not None and r.covers("Bash") for r in book.deny):
        return None
    return "computed program" if programs(facts.subject).computed else None


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
        script = parse_script(facts.subject)
        if not script.judgeable:
            return None
        whole = next((r for r in specific if r.allows_command(script)), None)
        if whole is not None:
            return whole
        parts = script.commands
        if not parts:
            return None
        hits = [next((r for r in specific if r.allows_part(p.words)), None) for p in parts]
        return hits[0] if all(h is not None for h in hits) else None
    return next((r for r in specific if r.matches_text(facts.subject)), None)


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
        if "\n" in command or not script.judgeable or not script.commands:
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
