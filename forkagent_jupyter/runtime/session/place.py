"""`Place`: where a session lives, which every part that reads the folder's files or
names the session is given whole."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Place"]


@dataclass(frozen=True)
class Place:
    """The work directory (the project's files, the agents' working directory), the home
    folder (the person's own `~/.claude` files) and the session's id (its transcripts'
    folder, what hooks are told)."""

    workdir: Path
    home: Path
    session_id: str
