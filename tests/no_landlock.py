"""Run a program on a system without Landlock (an older Linux, or one built without it):
`python tests/no_landlock.py PROGRAM ARGS...`.

It installs a seccomp filter under which Landlock's three system calls fail with ENOSYS, as on
a kernel that lacks them, and becomes PROGRAM; the filter holds for all it starts. Nothing else
changes. Exits 125 where the filter cannot be installed."""

from __future__ import annotations

import ctypes
import os
import platform
import sys

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_FIRST, _LAST = 444, 446  # landlock_create_ruleset, _add_rule, _restrict_self
_ENOSYS = 38


class _Instruction(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def main(argv: list[str]) -> None:
    if platform.machine() not in ("x86_64", "aarch64"):
        print(f"no_landlock: not on {platform.machine()}", file=sys.stderr)
        sys.exit(125)
    code = (
        (0x20, 0, 0, 0),  # load the system call's number
        (0x35, 0, 2, _FIRST),  # below the first: allow
        (0x25, 1, 0, _LAST),  # above the last: allow
        (0x06, 0, 0, 0x00050000 | _ENOSYS),  # Landlock: ENOSYS
        (0x06, 0, 0, 0x7FFF0000),  # allow
    )
    instructions = (_Instruction * len(code))(*(_Instruction(*i) for i in code))
    program = _Program(len(code), instructions)
    libc = ctypes.CDLL(None, use_errno=True)
    if (
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        or libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0
    ):
        print(f"no_landlock: cannot set up ({os.strerror(ctypes.get_errno())})", file=sys.stderr)
        sys.exit(125)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
