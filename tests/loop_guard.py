"""The loop guard: records every blocking call that the package makes on a running event loop.

Built on `blockbuster`, which wraps the blocking functions of the standard library (file and
socket I/O on blocking descriptors, `time.sleep`, contended lock acquires, sqlite, `input`)
and checks, on each call, whether the calling thread is running an event loop. Only calls
with a frame of `forkagent_jupyter` on the stack count (a test's own blocking set-up is not
the package's), except under the functions of other packages listed in `KNOWN` and in
`forkagent_jupyter.emulator` (a test server on its own threads): the package itself has no
allowance. File system metadata calls (`os.stat`, `os.mkdir`, `os.replace`, path resolution,
listing a folder) are not counted: on a local disk they take microseconds, and path checks run
on the loop throughout. Neither is what runs while a module is first imported (once per
process: counting it would make a test's result depend on the order).

A call that counts is recorded with its stack and then runs as usual, so the code under test
behaves as without the guard (an exception raised in it could be swallowed by the code's own
error handling); the test fails at its end.

In the test process `tests/conftest.py` starts a guard around every test. A kernel started by
`tests/kernel/conftest.py` runs `tests/kernel/loop_guard_startup.py` at start (PYTHONSTARTUP),
which starts one for the kernel's life; the fixture reads its findings from the kernel
(`findings_json()`) before shutting it down, and fails the test if there are any.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import blockbuster.blockbuster as bb

import forkagent_jupyter

__all__ = ["Finding", "LoopGuard", "findings_json", "guarded", "install"]

PACKAGE = str(Path(forkagent_jupyter.__file__).resolve().parent)

KNOWN: list[tuple[str, set[str]]] = [
    # forking the kernel for a worker's snapshot happens at the `%fork` (the snapshot is the
    # namespace as it is then), on the loop; IPython's at-fork hook stops its history thread
    # and joins it (the thread waits for work: the join returns at once)
    ("IPython/core/history.py", {"_stop_thread"}),
    # ipykernel flushes stdout/stderr before each display, waiting (at most its flush_timeout)
    # for its IOPub thread
    ("ipykernel/iostream.py", {"flush"}),
]
"""Blocking calls of other packages that the kernel meets on its loop: (file, functions). A
blocking call under one of them is allowed; anywhere else it fails the test."""


class Finding:
    """One blocking call made on a running loop: what was called, and from where."""

    def __init__(self, call: str, stack: list[traceback.FrameSummary]) -> None:
        self.call = call
        self.frames = [f for f in stack if f.filename.startswith(PACKAGE)]
        self.stack = "".join(traceback.format_list(stack))

    @property
    def where(self) -> str:
        """The innermost frame of the package: the line that made the call."""
        frame = self.frames[-1] if self.frames else None
        if frame is None:
            return "?"
        return f"{Path(frame.filename).relative_to(Path(PACKAGE).parent)}:{frame.lineno}"

    def __str__(self) -> str:
        return f"{self.call} at {self.where}"

    def to_dict(self) -> dict[str, str]:
        return {"call": self.call, "where": self.where, "stack": self.stack}


class LoopGuard:
    """Records blocking calls on a running loop while active (one at a time per process)."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self._buster: bb.BlockBuster | None = None

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrap(
            modules: Sequence[str],
            excluded: Sequence[str],
            func: Callable[..., Any],
            func_name: str,
            can_block: list[tuple[str, Iterable[str]]],
            predicate: Callable[..., bool],
        ) -> Callable[..., Any]:
            checked = original(modules, excluded, func, func_name, can_block, predicate)

            def record_then_call(*args: Any, **kwargs: Any) -> Any:
                try:
                    return checked(*args, **kwargs)
                except bb.BlockingError:  # raised by the check, before `func` ran
                    pass
                bb._skip.value = True  # what follows is the guard's own doing
                try:
                    self.findings.append(Finding(func_name, traceback.extract_stack()[:-1]))
                    return func(*args, **kwargs)
                finally:
                    bb._skip.value = False

            return record_then_call

        return wrap

    def start(self) -> LoopGuard:
        buster = bb.BlockBuster(
            scanned_modules=["forkagent_jupyter"], excluded_modules=["forkagent_jupyter.emulator"]
        )
        for name in list(buster.functions):
            if name.startswith("os.") and name not in ("os.read", "os.write", "os.sendfile"):
                del buster.functions[name]  # file system metadata: see the module doc
        for function in buster.functions.values():
            function.can_block_in("logging/__init__.py", {"emit", "flush"})
            # a module's first import: once per process, so which test meets it depends on
            # the order the tests run in
            function.can_block_in("<frozen importlib._bootstrap>", {"_find_and_load"})
            for filename, functions in KNOWN:
                function.can_block_in(filename, functions)
        original = bb._wrap_blocking
        bb._wrap_blocking = self._wrap(original)  # type: ignore[assignment]
        try:
            buster.activate()
        finally:
            bb._wrap_blocking = original
        self._buster = buster
        return self

    def stop(self) -> None:
        if self._buster is not None:
            self._buster.deactivate()
            self._buster = None

    def report(self, findings: Iterable[Finding | dict[str, str]] | None = None) -> str:
        """The findings for people: each call and place once, then the first stack of each."""
        items = [f.to_dict() if isinstance(f, Finding) else f for f in (findings or self.findings)]
        seen: dict[str, dict[str, str]] = {}
        for item in items:
            seen.setdefault(f"{item['call']} at {item['where']}", item)
        lines = [f"{len(items)} blocking call(s) on the event loop:"]
        lines += [f"  {key}" for key in seen]
        for key, item in seen.items():
            lines += ["", f"--- {key}", item["stack"].rstrip()]
        return "\n".join(lines)


@contextmanager
def guarded() -> Iterator[LoopGuard]:
    guard = LoopGuard().start()
    try:
        yield guard
    finally:
        guard.stop()


_kernel_guard: LoopGuard | None = None


def install() -> None:
    """Start the guard for the life of this process (the kernel's startup file calls it)."""
    global _kernel_guard
    if _kernel_guard is None:
        _kernel_guard = LoopGuard().start()


def findings_json(clear: bool = False) -> str:
    """The kernel guard's findings so far, as JSON (a list of {call, where, stack});
    `clear`: forget them (a test that blocks on purpose)."""
    if _kernel_guard is None:
        return "null"  # no guard in this process
    found = [f.to_dict() for f in _kernel_guard.findings]
    if clear:
        _kernel_guard.findings.clear()
    return json.dumps(found)
