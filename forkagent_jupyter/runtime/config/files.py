"""Reading a configuration file that anyone may have put there, without letting it stop a turn.

Settings files, `.mcp.json`, `~/.claude.json`, agent files, skills and memory are read at every
turn or agent start. A file someone else wrote can be a FIFO (opening it for reading waits for
a writer: the turn would hang), a symlink to `/dev/zero` (reading it never ends and fills the
memory), a huge file, or JSON nested so deep that Python's decoder gives up with a
RecursionError. So a file is read only when it is a regular file of at most `limit` bytes
(checked before it is opened, and again on the open descriptor, opened without blocking), and
JSON only when Python can decode it and it is nested at most `MAX_DEPTH` levels (what reads
the values afterwards recurses too). Anything else is a `FileRefusedError` whose message is
the one line that says why, without the file's name (the caller names the file its own way).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from ...messages_api.shapes import JSON

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "FileRefusedError",
    "read_bytes",
    "read_json",
]

MAX_CONFIG_BYTES = 4_000_000
"""The largest settings or `.mcp.json` file read (a real one is a few KB)."""
MAX_DEPTH = 64
"""The deepest nesting of lists and objects a JSON configuration file may have (a real one
has fewer than ten levels)."""
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


class FileRefusedError(Exception):
    """A file that is not read; the message says why in a few words ("is not a regular
    file", "is larger than 4 MB")."""


def _size(limit: int) -> str:
    return f"{limit / 1_000_000:g} MB" if limit >= 1_000_000 else f"{limit:,} bytes"


def _check(mode: int, size: int, limit: int) -> None:
    if stat.S_ISDIR(mode):
        raise FileRefusedError("is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise FileRefusedError("is not a regular file (a FIFO, a socket or a device); not read")
    if size > limit:
        raise FileRefusedError(f"is larger than {_size(limit)}; not read")


def read_bytes(path: Path, limit: int = MAX_CONFIG_BYTES, *, head: bool = False) -> bytes | None:
    """The file's bytes; None when there is no such file; FileRefusedError when it is not a
    regular file of at most `limit` bytes or cannot be read (`head`: a larger one gives its
    first `limit` bytes instead). Never blocks on a FIFO and never reads more than `limit` + 1
    bytes. Blocking I/O: call it on a thread."""
    size_limit = (1 << 62) if head else limit
    try:
        seen = path.stat()
        _check(seen.st_mode, seen.st_size, size_limit)  # a device or a FIFO is never opened
        fd = os.open(path, _FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except FileRefusedError:
        raise
    except OSError as exc:
        raise FileRefusedError(f"cannot be read ({exc.strerror or exc})") from None
    try:
        found = os.fstat(fd)  # what was opened (it may have been swapped since the check)
        _check(found.st_mode, found.st_size, size_limit)
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except FileRefusedError:
        raise
    except OSError as exc:
        raise FileRefusedError(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if got > limit and head:
        return data[:limit]
    if got > limit:  # it grew while it was read
        raise FileRefusedError(f"is larger than {_size(limit)}; not read")
    return data


def _depth(value: JSON, limit: int) -> int:
    """How deep `value` nests (lists and objects), counting no further than `limit` + 1."""
    deepest = 0
    stack: list[tuple[JSON, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            break
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, level + 1) for child in children)
    return deepest


def read_json(path: Path, limit: int = MAX_CONFIG_BYTES) -> JSON:
    """The file's JSON value (see `read_bytes`); None when there is no such file;
    FileRefusedError when the file cannot be read, is not JSON, or nests deeper than
    `MAX_DEPTH`."""
    raw = read_bytes(path, limit)
    if raw is None:
        return None
    try:
        data: JSON = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise FileRefusedError(
            f"is nested too deeply to read (a configuration file nests at most {MAX_DEPTH} "
            "levels); not read"
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise FileRefusedError(f"is not JSON ({exc})") from None
    if _depth(data, MAX_DEPTH) > MAX_DEPTH:
        raise FileRefusedError(
            f"is nested more than {MAX_DEPTH} levels deep (a configuration file is not); not read"
        )
    return data
