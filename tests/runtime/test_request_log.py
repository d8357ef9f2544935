"""RequestLog: the bodies a session sends; where two sibling forks diverge; breakpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from forkagent_jupyter.runtime.model.request_log import (
    RequestLog,
    breakpoints,
    prefix_bytes,
    shared_prefix,
)
from forkagent_jupyter.runtime.permissions.gate import AllowAll
from forkagent_jupyter.runtime.session.session import Session

pytestmark = pytest.mark.anyio


async def test_sibling_forks_share_bytes_up_to_their_directives(tmp_path: Path) -> None:
    async with Session(backend="offline", workdir=tmp_path, permission_policy=AllowAll()) as s:
        log = RequestLog(s.client)
        s.client = log
        await s.ask("Context. " * 300)
        for word in ("alpha", "beta"):
            await s.fork(f"report on {word}")
        await s.idle()
    firsts = [b for b in log.bodies if "report on" in str(b["messages"][-1])]
    alpha = next(b for b in firsts if "alpha" in str(b["messages"][-1]))
    beta = next(b for b in firsts if "beta" in str(b["messages"][-1]))
    a, b = prefix_bytes(alpha), prefix_bytes(beta)
    n = shared_prefix(alpha, beta)
    assert a[:n] == b[:n] and a[n] != b[n]
    assert b"alpha" not in a[:n] and b"alpha" in a[n:]  # they diverge at the directive
    marks = breakpoints(alpha)
    assert marks and marks[0].where.startswith("tools[")
    assert 1 <= len(marks) <= 4
    # the siblings' shared cache breakpoint ends inside the common prefix
    assert any(0 < m.end_byte <= n for m in marks if m.where.startswith("messages"))
    assert [m.where for m in marks] == [m.where for m in breakpoints(beta)]
    assert shared_prefix(alpha, alpha) == len(a)
