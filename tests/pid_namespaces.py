"""Processes as the host sees them: which PID namespace a process is in, and who else is."""

from __future__ import annotations

from pathlib import Path


def namespace_of(word: str) -> tuple[str, list[str]]:
    """The PID namespace of the live process whose command line holds `word` as one of its
    words (as /proc/<pid>/ns/pid names it), and the command line (words joined by spaces) of
    every live process in that namespace, read from this process's /proc."""
    found: dict[int, tuple[str, list[str]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            namespace = str((entry / "ns" / "pid").readlink())
        except OSError:  # it ended meanwhile (or is a kernel thread)
            continue
        if words:
            found[int(entry.name)] = (namespace, words)
    [namespace] = {ns for ns, words in found.values() if word in words}
    return namespace, [" ".join(words) for ns, words in found.values() if ns == namespace]


def own_namespace() -> str:
    return str(Path("/proc/self/ns/pid").readlink())
