"""A shell command line as the permission rules read it: simple commands, their words, and
what in them the shell would expand.

This is not a shell. It reads a command line the way bash splits it (quotes, backslashes,
`$(...)`, backticks, `${...}`, `$'...'`, redirections, control operators, subshells) far
enough to answer two questions safely:

- which simple commands the line consists of, word by word, with each character marked as
  *active* (an unquoted `$ * ? [ ~ {` the shell would expand) or literal, so that `'$HOME'`
  and `$HOME` are different words to a rule;
- whether anything in it cannot be judged from its words (command or process substitution,
  a here-document, unbalanced quotes): such a line is never allowed by a rule with a spec.
  The bodies of substitutions are parsed too (deny rules look inside);
- the files its redirections write (`Script.writes`): a line that writes a file is decided
  like a Write of it as well (`matching`).

A word's `key` encodes it for matching: an active character is preceded by `ACTIVE`, so two
words have the same key exactly when the shell would treat them the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ACTIVE", "Script", "Simple", "Word", "parse_script"]

ACTIVE = "\x02"
"""Marks an active (unquoted, expanding) character in a word's key."""

_EXPANDING = frozenset("$*?[~{")
_OPERATORS = ("&&", "||", ";;&", ";;", ";&", "|&", ";", "|", "&", "\n", "(", ")")
_MAX_DEPTH = 12
_NO_FILE = re.compile(r"/dev/(?:null|stdout|stderr|tty|fd/\d+)")
"""Redirection targets that write no file."""
RESERVED = frozenset(
    {"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"}
)


@dataclass(frozen=True)
class Word:
    """One shell word: `text` without quotes, `key` with active characters marked, and whether
    it holds an expansion (`$VAR`, `$(...)`, backticks, `${...}`)."""

    text: str
    key: str
    dynamic: bool = False

    @classmethod
    def plain(cls, text: str) -> Word:
        return cls(text, text)

    @property
    def active(self) -> bool:
        """Whether the shell would expand something in it (a glob, a variable...)."""
        return ACTIVE in self.key


@dataclass
class Simple:
    """One simple command: its words (redirections removed)."""

    words: list[Word] = field(default_factory=list)


@dataclass
class Script:
    """A parsed command line: simple commands and the operators between them (`items`
    alternate), the parsed bodies of its substitutions, the files its redirections write
    (`writes`: `>`, `>>`, `>|`, `&>`, `<>`, `>&FILE`; not `/dev/null`, `/dev/stdout`...), and
    what makes it unjudgeable."""

    items: list[Simple | str] = field(default_factory=list)
    substitutions: list[Script] = field(default_factory=list)
    writes: list[Word] = field(default_factory=list)
    heredoc: bool = False
    broken: bool = False  # unbalanced quotes or brackets, a redirection without a target

    @property
    def commands(self) -> list[Simple]:
        return [item for item in self.items if isinstance(item, Simple) and item.words]

    @property
    def judgeable(self) -> bool:
        """Whether its words (and the files it writes) say everything it does: no
        substitution, no here-document, nothing broken."""
        return not (self.substitutions or self.heredoc or self.broken)

    def stream(self) -> list[str]:
        """The line as a sequence of word keys and operators (for exact comparison)."""
        out: list[str] = []
        for item in self.items:
            if isinstance(item, str):
                out.append("\x00op:" + (";" if item == "\n" else item))
            else:
                out.extend(w.key for w in item.words)
        while out and out[-1] in ("\x00op:;", "\x00op:&"):
            out.pop()
        return out


def _matching(text: str, start: int, open_: str, close: str) -> int:
    """Index of the `close` that ends a bracket opened just before `start` (quotes and nested
    brackets skipped); -1 if there is none."""
    depth, i, n = 1, start, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = text.find("'", i + 1)
            if j < 0:
                return -1
            i = j + 1
            continue
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


_ANSI = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b",
         "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip


class _Lexer:
    def __init__(self, text: str, depth: int) -> None:
        self.text = text
        self.depth = depth
        self.script = Script()
        self.simple = Simple()
        self.chars: list[tuple[str, bool]] = []
        self.started = False
        self.dynamic = False
        self.redirect: str | None = None

    # -- words ---------------------------------------------------------------------------

    def add(self, ch: str, active: bool) -> None:
        self.chars.append((ch, active))
        self.started = True

    def add_raw(self, text: str) -> None:
        """An expansion: kept as active text, the word marked dynamic."""
        for ch in text:
            self.chars.append((ch, True))
        self.started = True
        self.dynamic = True

    def end_word(self) -> None:
        if not self.started:
            return
        word = Word(
            "".join(c for c, _ in self.chars),
            "".join(ACTIVE + c if a else c for c, a in self.chars),
            self.dynamic,
        )
        self.chars, self.started, self.dynamic = [], False, False
        if self.redirect is not None:
            self._redirect_target(self.redirect, word)
            self.redirect = None
            return
        self.simple.words.append(word)

    def _redirect_target(self, op: str, target: Word) -> None:
        if op in ("<<", "<<-"):
            self.script.heredoc = True
        elif op in (">&", "<&") and (target.text.isdigit() or target.text == "-"):
            return
        elif op not in ("<", "<<<") and not _NO_FILE.fullmatch(target.text):
            self.script.writes.append(target)

    def end_simple(self, op: str | None) -> None:
        self.end_word()
        if self.redirect is not None:
            self.script.broken = True
            self.redirect = None
        self.script.items.append(self.simple)
        self.simple = Simple()
        if op is not None:
            self.script.items.append(op)

    def sub(self, body: str) -> None:
        if self.depth >= _MAX_DEPTH:
            self.script.broken = True
            return
        self.script.substitutions.append(_Lexer(body, self.depth + 1).run())

    # -- the scan ------------------------------------------------------------------------

    def run(self) -> Script:
        t, i, n = self.text, 0, len(self.text)
        while i < n:
            c = t[i]
            if c == "\\":
                if i + 1 < n and t[i + 1] == "\n":
                    i += 2
                    continue
                self.add(t[i + 1] if i + 1 < n else "\\", False)
                i += 2
                continue
            if c == "'":
                j = t.find("'", i + 1)
                if j < 0:
                    self.script.broken = True
                    j = n
                for ch in t[i + 1 : j]:
                    self.add(ch, False)
                self.started = True
                i = j + 1
                continue
            if c == '"':
                i = self._dquote(i + 1)
                continue
            if c == "$":
                i = self._dollar(i, quoted=False)
                continue
            if c == "`":
                i = self._backtick(i)
                continue
            if c in " \t\r":
                self.end_word()
                i += 1
                continue
            if c == "#" and not self.started:
                j = t.find("\n", i)
                i = n if j < 0 else j
                continue
            if c in "<>" and t.startswith("(", i + 1):
                j = _matching(t, i + 2, "(", ")")
                if j < 0:
                    self.script.broken = True
                    j = n
                self.sub(t[i + 2 : j])
                self.add_raw(t[i : j + 1])
                i = j + 1
                continue
            if c in "<>" or (c == "&" and t.startswith(">", i + 1)):
                i = self._redirection(i)
                continue
            op = next((o for o in _OPERATORS if t.startswith(o, i)), None)
            if op is not None:
                if op == "(" and self.started:  # `f()` or `a(b`: part of a word to bash too
                    self.script.broken = True
                self.end_simple(op)
                i += len(op)
                continue
            self.add(c, c in _EXPANDING)
            i += 1
        self.end_simple(None)
        return self.script

    def _redirection(self, i: int) -> int:
        t = self.text
        word = "".join(c for c, _ in self.chars)
        if self.started and word.isdigit() and not any(a for _, a in self.chars):
            self.chars, self.started = [], False  # `2>`: a descriptor, not a word
        else:
            self.end_word()
        for op in ("&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">|", ">&", "<", ">"):
            if t.startswith(op, i):
                break
        if self.redirect is not None:
            self.script.broken = True
        self.redirect = op
        i += len(op)
        if op in (">&", "<&"):
            j = i
            while j < len(t) and (t[j].isdigit() or t[j] == "-"):
                j += 1
            if j > i:  # `2>&1`, `>&-`
                self.redirect = None
                return j
        return i

    def _dquote(self, i: int) -> int:
        t, n = self.text, len(self.text)
        self.started = True
        while i < n:
            c = t[i]
            if c == '"':
                return i + 1
            if c == "\\" and i + 1 < n and t[i + 1] in '$`"\\\n':
                if t[i + 1] != "\n":
                    self.add(t[i + 1], False)
                i += 2
                continue
            if c == "$":
                i = self._dollar(i, quoted=True)
                continue
            if c == "`":
                i = self._backtick(i)
                continue
            self.add(c, False)
            i += 1
        self.script.broken = True
        return n

    def _dollar(self, i: int, *, quoted: bool) -> int:
        t, n = self.text, len(self.text)
        nxt = t[i + 1] if i + 1 < n else ""
        if nxt == "(":
            arith = t.startswith("((", i + 1)
            j = _matching(t, i + 2, "(", ")")
            if j < 0:
                self.script.broken = True
                j = n - 1
            body = t[i + 2 : j]
            self.sub(body[1:-1] if arith and body.endswith(")") else body)
            self.add_raw(t[i : j + 1])
            return j + 1
        if nxt == "{":
            j = _matching(t, i + 2, "{", "}")
            if j < 0:
                self.script.broken = True
                j = n - 1
            body = t[i + 2 : j]
            if "$(" in body or "`" in body:
                self.sub(body)
            self.add_raw(t[i : j + 1])
            return j + 1
        if nxt == "'" and not quoted:
            return self._ansi(i + 2)
        if nxt == '"' and not quoted:
            return self._dquote(i + 2)
        if nxt and (nxt.isalnum() or nxt == "_"):
            j = i + 1
            if nxt.isdigit():
                j += 1
            else:
                while j < n and (t[j].isalnum() or t[j] == "_"):
                    j += 1
            self.add_raw(t[i:j])
            return j
        if nxt and nxt in "@*#?-$!":
            self.add_raw(t[i : i + 2])
            return i + 2
        self.add("$", False)
        return i + 1

    def _ansi(self, i: int) -> int:
        t, n = self.text, len(self.text)
        self.started = True
        while i < n:
            c = t[i]
            if c == "'":
                return i + 1
            if c == "\\" and i + 1 < n:
                e = t[i + 1]
                if e in _ANSI:
                    self.add(_ANSI[e], False)
                    i += 2
                    continue
                if e == "x":
                    j = i + 2
                    while j < n and j < i + 4 and t[j] in "0123456789abcdefABCDEF":
                        j += 1
                    if j > i + 2:
                        self.add(chr(int(t[i + 2 : j], 16)), False)
                        i = j
                        continue
                if e in "01234567":
                    j = i + 1
                    while j < n and j < i + 4 and t[j] in "01234567":
                        j += 1
                    self.add(chr(int(t[i + 1 : j], 8) % 256), False)
                    i = j
                    continue
                self.add("\\", False)
                self.add(e, False)
                i += 2
                continue
            self.add(c, False)
            i += 1
        self.script.broken = True
        return n

    def _backtick(self, i: int) -> int:
        t, n = self.text, len(self.text)
        j = i + 1
        while j < n and t[j] != "`":
            j += 2 if t[j] == "\\" else 1
        if j >= n:
            self.script.broken = True
            j = n
        body = t[i + 1 : j].replace("\\`", "`").replace("\\\\", "\\").replace("\\$", "$")
        self.sub(body)
        self.add_raw(t[i : j + 1])
        return j + 1


def parse_script(text: str, depth: int = 0) -> Script:
    """Parse a command line (see the module doc); never raises."""
    return _Lexer(text, depth).run()
