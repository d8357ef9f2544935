"""The Python tool on real threads: cell semantics, capture, errors, locking, the event loop."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.executors import ThreadRunner
from forkagent_jupyter.runtime.tools.python import ExecResult, PythonTool
from forkagent_jupyter.runtime.tools.services import ToolServices

from .helpers import call, make_ctx

pytestmark = pytest.mark.anyio


async def run(code: str, ns: dict[str, Any], tmp_path: Path, **kw: Any) -> Any:
    return await call(PythonTool(), make_ctx(tmp_path, namespace=ns, **kw), code=code)


async def test_trailing_expression_and_prints(tmp_path: Path) -> None:
    ns: dict[str, Any] = {}
    out = await run("x = 40\nprint('hello')\nx + 2", ns, tmp_path)
    assert not out.is_error and out.content == "hello\n42"
    assert (await run("y = 1", ns, tmp_path)).content == "(no output)"
    assert (await run("None", ns, tmp_path)).content == "(no output)"
    assert (await run("'text'", ns, tmp_path)).content == "'text'"
    err = await run("import sys\nprint('warn', file=sys.stderr)\n[1, 2]", ns, tmp_path)
    assert err.content == "[stderr]\nwarn\n[1, 2]"


async def test_namespace_persists_across_calls(tmp_path: Path) -> None:
    ns: dict[str, Any] = {"df_rows": 3}
    await run("def double(v):\n    return 2 * v\nresult = double(df_rows)", ns, tmp_path)
    assert ns["result"] == 6
    assert (await run("double(result)", ns, tmp_path)).content == "12"


async def test_exception_is_a_tool_error_with_the_code_traceback(tmp_path: Path) -> None:
    ns: dict[str, Any] = {}
    out = await run("print('before')\ndef f():\n    return 1 / 0\nf()", ns, tmp_path)
    assert out.is_error
    assert out.content.startswith("before\nTraceback (most recent call last):")
    assert "return 1 / 0" in out.content  # the code's own line is shown
    assert out.content.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "python.py" not in out.content and "threading" not in out.content
    syntax = await run("def broken(:\n    pass", ns, tmp_path)
    assert syntax.is_error and "SyntaxError" in syntax.content
    exit_ = await run("raise SystemExit(2)", ns, tmp_path)
    assert exit_.is_error and "SystemExit: 2" in exit_.content


async def test_top_level_await(tmp_path: Path) -> None:
    out = await run(
        "import asyncio\nawait asyncio.sleep(0.01)\nawait asyncio.sleep(0, 'ok')", {}, tmp_path
    )
    assert out.content == "'ok'"


async def test_output_is_capped(tmp_path: Path) -> None:
    out = await run("print('z' * 100_000)", {}, tmp_path)
    assert len(out.content) < 31_000 and "cut from the middle" in out.content


async def test_only_this_calls_output_is_captured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = sys.stdout
    ns: dict[str, Any] = {"started": threading.Event(), "printed": threading.Event()}
    code = "print('inside')\nstarted.set()\n_ = printed.wait(30)"
    task = asyncio.ensure_future(run(code, ns, tmp_path))
    assert await asyncio.to_thread(ns["started"].wait, 30)
    print("from the event loop")  # another thread, while the code runs
    ns["printed"].set()
    out = await task
    assert out.content == "inside"
    assert "from the event loop" in capsys.readouterr().out
    assert sys.stdout is original  # the proxy is gone when no call runs


async def test_a_stopped_call_releases_stdout_while_its_thread_lingers(tmp_path: Path) -> None:
    original = sys.stdout
    ns: dict[str, Any] = {"started": threading.Event(), "release": threading.Event()}
    # the code waits inside a C call, where an interrupt cannot reach it until it returns
    task = asyncio.ensure_future(run("started.set()\nrelease.wait(30)", ns, tmp_path))
    assert await asyncio.to_thread(ns["started"].wait, 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    try:
        assert sys.stdout is original  # the call is over, though its thread still waits
        out = await run("print('mine')", {}, tmp_path)
        assert out.content == "mine"
        assert sys.stdout is original
    finally:
        ns["release"].set()


async def test_calls_on_one_namespace_are_serialised(tmp_path: Path) -> None:
    ns: dict[str, Any] = {"log": []}
    code = "import time\nlog.append('{0}-start')\ntime.sleep(0.2)\nlog.append('{0}-end')"
    a, b = await asyncio.gather(
        run(code.format("a"), ns, tmp_path), run(code.format("b"), ns, tmp_path)
    )
    assert not a.is_error and not b.is_error
    log = ns["log"]
    assert log in (
        ["a-start", "a-end", "b-start", "b-end"],
        ["b-start", "b-end", "a-start", "a-end"],
    )


async def test_separate_namespaces_run_in_parallel(tmp_path: Path) -> None:
    # each call waits for the other at a barrier: serialised calls would break it
    barrier = threading.Barrier(2, timeout=30)
    code = "barrier.wait()\n'met'"
    a, b = await asyncio.gather(
        run(code, {"barrier": barrier}, tmp_path), run(code, {"barrier": barrier}, tmp_path)
    )
    assert a.content == b.content == "'met'"


async def test_event_loop_keeps_running_while_code_waits(tmp_path: Path) -> None:
    # the code waits for something only the event loop does: a blocked loop never does it
    ns: dict[str, Any] = {"started": threading.Event(), "ticked": threading.Event()}
    code = "started.set()\nticked.wait(30)"

    async def tick() -> None:
        await asyncio.to_thread(ns["started"].wait, 30)
        await asyncio.sleep(0)
        ns["ticked"].set()

    ticker = asyncio.ensure_future(tick())
    out = await run(code, ns, tmp_path)
    await ticker
    assert out.content == "True"


async def test_cancelling_interrupts_the_code_and_frees_the_namespace(tmp_path: Path) -> None:
    ns: dict[str, Any] = {"started": threading.Event()}
    spin = (
        "import time\nstarted.set()\nstart = time.time()\nwhile time.time() - start < 60:\n"
        "    pass\nfinished = True"
    )
    task = asyncio.ensure_future(run(spin, ns, tmp_path))
    assert await asyncio.to_thread(ns["started"].wait, 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the namespace is free again long before the spin could end by itself
    after = await asyncio.wait_for(run("'finished' in globals()", ns, tmp_path), 30)
    assert after.content == "False"  # the loop was interrupted, not left to finish


async def test_host_supplied_runner(tmp_path: Path) -> None:
    class Upper(ThreadRunner):
        """A runner that shouts what the code printed."""

        async def run(self, code: str) -> ExecResult:
            inner = await super().run(code)
            return ExecResult(inner.stdout.upper(), "", inner.value_repr, inner.error)

    ns: dict[str, Any] = {}
    out = await run("print('hi')\n1", {}, tmp_path, services=ToolServices(python_runner=Upper(ns)))
    assert out.content == "HI\n1"


def test_subject_is_the_code() -> None:
    tool = PythonTool()
    assert tool.permission_subject(tool.parse({"code": "\n x = 1\n"})) == "x = 1"
    assert tool.needs_approval and not tool.concurrency_safe and not tool.allowed_in_plan


def test_execute_source_on_a_loop_thread_explains_await() -> None:
    from forkagent_jupyter.runtime.tools.python import execute_source

    async def main() -> tuple[str | None, str | None]:
        return execute_source("import asyncio\nawait asyncio.sleep(0)", {})

    value, error = asyncio.run(main())
    assert value is None and error is not None
    assert "top-level await is not available here" in error


async def test_progress_written_over_with_carriage_returns_is_its_last_state(
    tmp_path: Path,
) -> None:
    """A tqdm bar (real tqdm, to stderr) and a `print(..., end='\\r')` loop: the model reads
    each line as a notebook shows it, not every update (a long loop's bar was thousands of
    updates in the tool result)."""
    pytest.importorskip("tqdm")
    code = (
        "import sys\nfrom tqdm import tqdm\n"
        "for i in range(400):\n    print(f'\\rstep {i}', end='')\n"
        "print(' done')\n"
        "for _ in tqdm(range(300), desc='rows', mininterval=0, ascii=True, "
        "file=sys.stderr, bar_format='{desc}: {n_fmt}/{total_fmt}'):\n    pass\n"
        "print('a\\r\\nb')"
    )
    out = await run(code, {}, tmp_path)
    assert not out.is_error
    assert out.content == "step 399 done\na\nb\n[stderr]\nrows: 300/300"
