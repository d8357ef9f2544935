"""Keeping tool output to a size a model can read: head + tail with a marker between."""

from __future__ import annotations

__all__ = ["MAX_OUTPUT", "HeadTail", "as_shown", "cap_output"]

MAX_OUTPUT = 30_000


def cap_output(text: str, limit: int = MAX_OUTPUT) -> str:
    """`text` if it fits in `limit` characters, else its head and tail with a marker saying
    how much was cut from the middle."""
    if len(text) <= limit:
        return text
    half = limit // 2
    cut = len(text) - 2 * half
    return f"{text[:half]}\n... [{cut} characters cut from the middle] ...\n{text[-half:]}"


def as_shown(text: str) -> str:
    """`text` as a terminal or a notebook shows it: within a line, what follows a carriage
    return writes over the line from its start, so a progress bar's hundred updates are its
    last state (and a CRLF line end is a plain one)."""
    if "\r" not in text:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if "\r" in line:
            shown = ""
            for part in line.split("\r"):
                shown = part + shown[len(part) :]
            lines[i] = shown
    return "\n".join(lines)


class HeadTail:
    """A byte sink that keeps the first and the last `limit // 2` bytes of a stream of any
    length (memory stays bounded however much a command prints)."""

    def __init__(self, limit: int = 4 * MAX_OUTPUT) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def write(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        extra = len(self.tail) - self.half
        if extra > 0:
            del self.tail[:extra]
            self.dropped += extra

    def text(self, limit: int = MAX_OUTPUT) -> str:
        """The kept bytes decoded (invalid UTF-8 replaced), capped to `limit` characters."""
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.dropped:
            marker = f"\n... [{self.dropped} bytes cut from the middle] ...\n"
            half = limit // 2
            return as_shown(head)[:half] + marker + as_shown(tail)[-half:]
        return cap_output(as_shown(head + tail), limit)
