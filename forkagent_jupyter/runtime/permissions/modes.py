"""The permission modes, and the mode a worker runs in given its session's and the one its
definition asks for (a definition may narrow, never widen)."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["MODES", "PermissionMode", "worker_mode"]

PermissionMode = Literal["default", "acceptEdits", "bypassPermissions", "plan", "dontAsk", "bubble"]
MODES: tuple[str, ...] = get_args(PermissionMode)


def worker_mode(
    session: PermissionMode, asked: PermissionMode | None, unset: PermissionMode = "bubble"
) -> PermissionMode:
    """A worker's mode, from its session's and the one its definition (an agent file, which
    the model may have written) asks for. A definition may narrow what the session allows and
    may use `acceptEdits`; it never widens past the session:

    - `plan` in either wins;
    - `default` asks (`bubble`: the session's policy decides), whatever the session's mode
      (but `dontAsk`: a session that asks nobody stays so);
    - `acceptEdits` is honoured, and `dontAsk` (it only refuses);
    - `bypassPermissions` holds only while the session itself bypasses; otherwise, as every
      value not named here, the worker takes the session's mode (`unset` for `default`:
      `bubble` for a fork, `acceptEdits` for a named agent whose definition names no mode).
    """
    if "plan" in (session, asked):
        return "plan"
    inherited: PermissionMode = unset if session == "default" else session
    if session == "dontAsk" and asked in (None, "default", "bubble"):
        return "dontAsk"  # nobody is asked in this session
    if asked in ("default", "bubble"):
        return "bubble"
    if asked in ("acceptEdits", "dontAsk"):
        return asked
    return inherited
