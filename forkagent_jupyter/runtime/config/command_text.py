"""A command's text as Claude Code expands it when `/name args` is typed.

* `$ARGUMENTS` is everything typed after the name, as typed; `$ARGUMENTS[N]` and `$N` are the
  N-th argument, counted from 0 (`$0` is the first: Claude Code's current rule; files written
  for its older rule, where `$1` was the first, get the second), the arguments split as a
  shell splits words (quotes group, `$HOME` stays literal, `|` and `;` are not arguments); a
  missing one is empty. Names listed in `arguments:` (`arguments: [issue, branch]`) stand for
  the arguments in that order (`$issue`, `$branch`).
* A text that names no argument at all, given arguments, gets them appended as a last
  paragraph `ARGUMENTS: ...`, so that nothing typed is lost.
* `${CLAUDE_SKILL_DIR}` is the skill's folder and `${CLAUDE_SESSION_ID}` the session's id.
* Shell lines: `` !`command` `` (after a space or at the start of a line) and a fenced block
  opened with ```` ```! ```` ask for a command's output to be put in their place before the
  model reads the text. `shell_lines` finds them; the session runs each through the
  permission gate (asked like the model's own Bash call) and `with_outputs` puts the outputs
  in. Nothing here runs anything.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "ShellLine",
    "shell_lines",
    "split_arguments",
    "substitute",
    "with_outputs",
]

_OPERATOR = re.compile(r"^[();<>|&]+$")


def split_arguments(args: str) -> list[str]:
    """`args` split into words as a shell splits them (quotes group words and are removed;
    nothing is expanded; operators such as `|` are dropped); split on white space when the
    quoting does not close."""
    if not args.strip():
        return []
    lexer = shlex.shlex(args, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote
        return args.split()
    return [w for w in words if not _OPERATOR.match(w)]


def _literal(value: str) -> Callable[[re.Match[str]], str]:
    """A replacement that puts `value` in as it is (no `\\1` or `\\g<>` read in it)."""
    return lambda _match: value


def substitute(text: str, args: str, names: Sequence[str] = ()) -> str:
    """`text` with the arguments put in (see the module doc)."""
    words = split_arguments(args)
    original = text
    for i, name in enumerate(names):
        value = words[i] if i < len(words) else ""
        text = re.sub(rf"\${re.escape(name)}(?![\[\w])", _literal(value), text)

    def indexed(match: re.Match[str]) -> str:
        index = int(match.group(1))
        return words[index] if index < len(words) else ""

    text = re.sub(r"\$ARGUMENTS\[(\d+)\]", indexed, text)
    text = re.sub(r"\$(\d+)(?!\w)", indexed, text)
    text = text.replace("$ARGUMENTS", args)
    if text == original and args:
        text += f"\n\nARGUMENTS: {args}"
    return text


@dataclass(frozen=True)
class ShellLine:
    """A command's request for a shell command's output: `written` is the text it takes the
    place of, `command` what runs."""

    written: str
    command: str


_BLOCK = re.compile(r"```!\s*\n?([\s\S]*?)\n?```")
_INLINE = re.compile(r"(?:(?<=\s)|^)!`([^`]+)`", re.MULTILINE)


def shell_lines(text: str) -> list[ShellLine]:
    """The shell commands `text` asks to run, fenced blocks first, then inline ones, each
    in the order written (empty ones left out)."""
    found = [*_BLOCK.finditer(text), *(_INLINE.finditer(text) if "!`" in text else [])]
    return [ShellLine(m.group(0), m.group(1).strip()) for m in found if m.group(1).strip()]


def with_outputs(text: str, outputs: Sequence[tuple[ShellLine, str]]) -> str:
    """`text` with each shell line replaced by its output (the first place it is written)."""
    for line, output in outputs:
        text = text.replace(line.written, output, 1)
    return text
