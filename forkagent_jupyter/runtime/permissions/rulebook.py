"""The rules in force: allow, ask and deny lists, each rule with where it came from, the
rules refused with why, the additional directories, and the decision log. One `RuleBook` is
shared by a session and all its workers; `PermissionGate` (gate.py) decides with it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ...messages_api.shapes import JSON
from ..config.settings import SettingsRead
from .rules import Rule

__all__ = ["RefusedRule", "RuleBook", "RuleKind"]

log = logging.getLogger(__name__)

RuleKind = Literal["allow", "ask", "deny"]
_ANNOUNCED: set[str] = set()


@dataclass(frozen=True)
class RefusedRule:
    """A rule that was not loaded, where it came from, and why."""

    text: str
    kind: str  # allow, ask, deny, or the setting that was refused
    source: str
    reason: str

    def __str__(self) -> str:
        where = f" ({self.source})" if self.source else ""
        return f"{self.kind} {self.text!r}{where}: {self.reason}"


@dataclass
class RuleBook:
    """Allow, ask and deny rules, the rules refused, the additional directories, and the
    decision log; shared by a session and its workers."""

    allow: list[Rule] = field(default_factory=list)
    deny: list[Rule] = field(default_factory=list)
    ask: list[Rule] = field(default_factory=list)
    refused: list[RefusedRule] = field(default_factory=list)
    directories: list[Path] = field(default_factory=list)
    directory_sources: dict[Path, str] = field(default_factory=dict)
    settings_sources: set[str] = field(default_factory=set)
    settings_files: list[str] = field(default_factory=list)
    withheld: list[tuple[str, str]] = field(default_factory=list)
    """What the folder's files grant that waits until the folder is trusted (what, file)."""
    folder_trust: str = ""  # whether the folder is trusted, and why (`trust.FolderTrust.why`)
    tools: frozenset[str] = frozenset()  # the session's own tool names (custom tools too)
    home: Path | None = None  # the person's home: their settings and agent files are there
    log: list[dict[str, JSON]] = field(default_factory=list)

    def of(self, kind: RuleKind) -> list[Rule]:
        return {"allow": self.allow, "ask": self.ask, "deny": self.deny}[kind]

    def add(self, text: str, kind: RuleKind, source: str = "") -> Rule:
        """Add one rule; ValueError (one line) if it is not one (nothing is added)."""
        rule = Rule.parse(text, source, self.tools, restricting=kind != "allow")
        target = self.of(kind)
        if rule not in target:
            target.append(rule)
            said = f"{kind} {text!r} ({source})"
            if rule.words_only and said not in _ANNOUNCED:
                _ANNOUNCED.add(said)
                log.warning(
                    "permission rule %s: its command does not parse; it holds for any line "
                    "holding its words",
                    said,
                )
        return rule

    def add_all(self, texts: Sequence[str], kind: RuleKind, source: str = "") -> list[RefusedRule]:
        """Add every rule that loads; the others are recorded in `refused` (and returned)."""
        refused: list[RefusedRule] = []
        for text in texts:
            try:
                self.add(text, kind, source)
            except ValueError as exc:
                item = RefusedRule(str(text), kind, source, str(exc))
                refused.append(item)
                if item not in self.refused:
                    self.refused.append(item)
                if str(item) not in _ANNOUNCED:  # one line per refused rule, not per reading
                    _ANNOUNCED.add(str(item))
                    log.warning("permission rule refused: %s", item)
        return refused

    def drop_sources(self, sources: set[str]) -> None:
        """Forget the rules and refusals that came from `sources` (settings files read
        again)."""
        for target in (self.allow, self.ask, self.deny):
            target[:] = [r for r in target if r.source not in sources]
        self.refused[:] = [r for r in self.refused if r.source not in sources]

    def apply_settings(self, read: SettingsRead) -> None:
        """Replace what the settings files said before with what they say now (rules added
        by the session itself stay)."""
        self.drop_sources(self.settings_sources)
        self.settings_sources = set(read.files) | {src for _, src, _ in read.refused}
        for kind, text, source in read.rules:
            self.add_all([text], kind, source)
        for what, source, why in read.refused:
            self.refused.append(RefusedRule(what, "setting", source, why))
        self.directories = [path for path, _ in read.directories]
        self.directory_sources = dict(read.directories)
        self.settings_files = list(read.files)
        self.withheld = list(read.withheld)
        self.folder_trust = read.trust.why if read.trust is not None else ""
