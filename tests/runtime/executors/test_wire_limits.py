"""A worker's frames have a size limit: the model's code, run in a worker process, can write
anything on its own socket, and a length it writes there must not keep its task running for
ever (the kernel waiting for a body that never comes) nor have the kernel hold gigabytes.
Past the limit the worker is ended and its task fails saying why; a pull's reply has its own,
larger bound, so large values still come back."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from typing import Any

import pytest

from forkagent_jupyter.runtime.executors import PullError, wire
from forkagent_jupyter.runtime.executors.process import child

pytestmark = pytest.mark.anyio

# the worker's side of its socket, reached from its code as a hostile one would
WORKER = "[o for o in __import__('gc').get_objects() if type(o).__name__ == '_Worker'][0]"


async def done(session: Any, task: Any) -> Any:
    [finished] = await session.wait(task.id, timeout=60)
    return finished


async def test_a_worker_writing_a_4_gb_length_is_ended_and_its_task_says_why(
    make_session: Any,
) -> None:
    session = make_session(auto_respond=False)
    code = f"import struct; {WORKER}.conn.sock.sendall(struct.pack('!I', 2**32 - 1)); print('sent')"
    task = await session.fork(f"Lie `py: {code}`")
    # unbounded before: the kernel waited for 4 GB that never came, the task ran for ever
    finished = await asyncio.wait_for(done(session, task), 90)
    assert finished.status == "failed"
    why = "the worker's process sent a message of 4,096 MB, more than the 256 MB one may have"
    assert finished.error == f"{why}, and was ended"
    notes = session.queue.drain("main")
    assert len(notes) == 1 and why in notes[0].text
    runner = session.compute.runners[task.id]
    assert runner.ended == finished.error and not runner.alive
    with pytest.raises(PullError, match=r"no process to pull from: the worker's process sent a"):
        await session.pull(task.id, "struct")


async def test_a_pull_is_not_bound_by_the_message_limit(
    make_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value larger than a message may be still comes back with a pull (a 500 MB array did
    before the limit), and a display larger than a message is left out with a line, not the
    worker: a worker that is not hostile is never ended for its size."""
    monkeypatch.setattr(wire, "MESSAGE_LIMIT", 1 << 20)  # before the fork: the worker has it
    session = make_session(auto_respond=False)
    code = (  # what display() calls in a kernel's worker (this process has no IPython shell)
        "import numpy as np; arr = np.arange(2**19, dtype=float); "
        f"{WORKER}.publish({{'text/plain': 'x' * 2**21}}); print('after')"
    )
    task = await session.fork(f"Make `py: {code}`")
    finished = await asyncio.wait_for(done(session, task), 90)
    assert finished.status == "completed", finished.error
    history = repr(session.workers.runs[task.id].history)
    assert "a display was left out: it was a message of 2 MB, more than the 1 MB" in history
    assert "after" in history
    pulled = await session.pull(task.id, "arr")
    assert pulled["arr"].nbytes == 4 << 20
    assert pulled["arr"][-1] == 2**19 - 1


async def test_a_pull_over_its_bound_is_refused_and_the_worker_stays(
    make_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(child, "pull_limit", lambda: 1 << 20)  # the worker's side of the bound
    session = make_session(auto_respond=False)
    task = await session.fork("Make `py: big = bytes(2 << 20); small = 7`")
    assert (await asyncio.wait_for(done(session, task), 90)).status == "completed"
    with pytest.raises(PullError, match="big: cannot come back: the reply would be a message"):
        await session.pull(task.id, "big", "small")
    assert await session.pull(task.id, "small") == {"small": 7}


async def test_a_frame_over_the_limit_is_refused_from_its_length() -> None:
    """The kernel's reader refuses a frame from its length alone (nothing read or set aside
    for its body); the worker's sender refuses one before sending anything."""
    for lie in (True, False):
        ours, theirs = socket.socketpair()
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        try:
            if lie:
                lie_about = struct.pack("!I", 2**32 - 1) + b"never the rest"
                await asyncio.to_thread(theirs.sendall, lie_about)
                with pytest.raises(wire.FrameTooLargeError, match="4,096 MB, more than the 256"):
                    await asyncio.wait_for(wire.read_message(reader), 30)
                continue
            sender = wire.FrameSocket(theirs)
            with pytest.raises(wire.FrameTooLargeError, match="of 2 MB, more than the 1 MB"):
                await asyncio.to_thread(sender.send, ("output", "x" * (2 << 20)), 1 << 20)
            await asyncio.to_thread(sender.send, ("output", "fits"))
            message = await asyncio.wait_for(wire.read_message(reader, 1 << 20), 30)
            assert message == ("output", "fits")  # nothing of the refused one was sent
        finally:
            writer.close()
            theirs.close()


def test_a_pull_may_bring_back_half_the_memory_at_most_what_a_length_says() -> None:
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert wire.pull_limit() == max(wire.MESSAGE_LIMIT, min(2**32 - 1, memory // 2))
    assert wire.frame_limit("pulled") == wire.pull_limit()
    assert wire.frame_limit("done") == wire.frame_limit("called") == wire.MESSAGE_LIMIT


async def test_a_request_longer_than_the_socket_buffer_goes_whole_with_its_socket() -> None:
    """`send_with_fd` on a socket a transport reads (the snapshot's control socket) sends a
    request far longer than the socket's buffer whole, while the other side reads it slowly,
    and the file descriptor arrives with it."""
    import os
    import socket
    import threading
    import time

    from forkagent_jupyter.runtime.executors.wire import FrameSocket, send_with_fd

    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    _reader, writer = await asyncio.open_unix_connection(sock=ours)  # as the kernel has it
    ports = list(range(1_000_000))  # ~5 MB pickled
    got: list[object] = []
    passed_r, passed_w = os.pipe()

    def slowly() -> None:
        time.sleep(0.3)  # the buffer fills first
        request, fd = FrameSocket(theirs).recv_with_fd()
        got.extend([request, fd])

    thread = threading.Thread(target=slowly)
    thread.start()
    try:
        await asyncio.wait_for(send_with_fd(ours, ("spawn", 1, 0, ports), passed_w), 60)
        await asyncio.to_thread(thread.join, 60)
        request, fd = got
        assert request == ("spawn", 1, 0, ports)
        assert isinstance(fd, int)
        os.write(fd, b"x")  # the same pipe
        assert os.read(passed_r, 1) == b"x"
        os.close(fd)
    finally:
        writer.close()
        theirs.close()
        os.close(passed_r)
        os.close(passed_w)
