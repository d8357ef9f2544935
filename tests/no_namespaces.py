"""Run a program on a system where no namespace can be made (as under a container runtime's
seccomp profile or Ubuntu's AppArmor restriction): `python tests/no_namespaces.py PROGRAM
ARGS...`.

It enters a user namespace of its own (you, mapped to yourself), sets that namespace's limits
on new user, PID, mount and network namespaces to 0, and becomes PROGRAM: there every
unshare(2) fails (ENOSPC), for PROGRAM and all it starts. Nothing else changes. Exits 125
where even this cannot be set up."""

from __future__ import annotations

import ctypes
import os
import sys

_CLONE_NEWUSER = 0x10000000
LIMITS = ("max_user_namespaces", "max_pid_namespaces", "max_mnt_namespaces", "max_net_namespaces")


def main(argv: list[str]) -> None:
    uid, gid = os.getuid(), os.getgid()
    try:
        if ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWUSER) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
        for path, text in (
            ("/proc/self/setgroups", "deny"),
            ("/proc/self/uid_map", f"{uid} {uid} 1"),
            ("/proc/self/gid_map", f"{gid} {gid} 1"),
            *((f"/proc/sys/user/{limit}", "0") for limit in LIMITS),
        ):
            with open(path, "w") as file:
                file.write(text)
    except OSError as exc:
        print(f"no_namespaces: cannot set up ({exc})", file=sys.stderr)
        sys.exit(125)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
