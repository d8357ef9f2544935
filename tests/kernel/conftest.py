"""A real IPython kernel (jupyter_client) with the extension loaded, talking to the emulator."""

from __future__ import annotations

import json
import os
import queue
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pytest
from jupyter_client.manager import KernelManager
from pydantic import ConfigDict, Field, TypeAdapter
from traitlets import List, Unicode

from forkagent_jupyter.emulator import Emulator
from forkagent_jupyter.kernel.comm.protocol import Outbound
from tests.loop_guard import LoopGuard

OUTBOUND: TypeAdapter[Outbound] = TypeAdapter(
    Annotated[Outbound, Field(discriminator="type")], config=ConfigDict(extra="forbid")
)
"""A kernel-to-frontend message, checked strictly: a key its type does not name is an error."""


@dataclass
class Execution:
    reply: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return str(self.reply["content"]["status"])

    def texts(self) -> str:
        """Everything the cell displayed or printed, as plain text/markdown/html. An update of
        a display shown by another cell changes that cell, not this one: it is left out."""
        out = []
        own = {
            m["content"].get("transient", {}).get("display_id")
            for m in self.messages
            if m["msg_type"] == "display_data"
        }
        last = None  # the stream (stdout, stderr) the previous output was
        for m in self.messages:
            c = m["content"]
            if m["msg_type"] == "update_display_data" and c["transient"]["display_id"] not in own:
                continue
            if m["msg_type"] == "stream" and last == c["name"]:
                # one print may come in two stream messages (the kernel flushes on a timer
                # between its writes): a notebook shows them as one text
                out[-1] += c["text"]
            elif m["msg_type"] == "stream":
                out.append(c["text"])
            elif m["msg_type"] in ("display_data", "update_display_data", "execute_result"):
                data = c.get("data", {})
                out.append(
                    data.get("text/markdown") or data.get("text/html") or data.get("text/plain", "")
                )
            elif m["msg_type"] == "error":
                out.append(f"{c['ename']}: {c['evalue']}")
            else:
                continue  # not an output (status, comm traffic): the stream goes on
            last = c["name"] if m["msg_type"] == "stream" else None
        return "\n".join(out)


class Kernel:
    """Drives one kernel: execute cells, read iopub, send comm messages like a frontend."""

    def __init__(self, km: KernelManager) -> None:
        self.km = km
        self.client = km.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.iopub: list[dict[str, Any]] = []
        self.clicked: set[str] = set()

    def drain(self, until_idle_of: str | None = None, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.client.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                if until_idle_of is None:
                    return
                continue
            self.iopub.append(msg)
            if (
                until_idle_of is not None
                and msg["msg_type"] == "status"
                and msg["parent_header"].get("msg_id") == until_idle_of
                and msg["content"]["execution_state"] == "idle"
            ):
                return
        raise TimeoutError("kernel did not go idle")

    def execute(self, code: str, timeout: float = 60) -> Execution:
        msg_id = self.client.execute(code)
        reply = self.client.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.client.get_shell_msg(timeout=timeout)
        start = len(self.iopub)
        self.drain(until_idle_of=msg_id, timeout=timeout)
        mine = [m for m in self.iopub[start:] if m["parent_header"].get("msg_id") == msg_id]
        return Execution(reply, mine)

    def run_approving(self, code: str, timeout: float = 60) -> Execution:
        """Run a cell and click "Allow once" on every approval that appears meanwhile."""
        msg_id = self.client.execute(code)
        start = len(self.iopub)
        clicked = self.clicked
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.client.get_iopub_msg(timeout=0.1)
            except queue.Empty:
                continue
            self.iopub.append(msg)
            for comm_id in self.widget_comms(description="Allow once"):
                if comm_id not in clicked:
                    clicked.add(comm_id)
                    self.click(comm_id)
            if (
                msg["msg_type"] == "status"
                and msg["parent_header"].get("msg_id") == msg_id
                and msg["content"]["execution_state"] == "idle"
            ):
                break
        else:
            raise TimeoutError("cell did not finish")
        reply = self.client.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.client.get_shell_msg(timeout=timeout)
        mine = [m for m in self.iopub[start:] if m["parent_header"].get("msg_id") == msg_id]
        return Execution(reply, mine)

    def guard_findings(self, clear: bool = False) -> list[dict[str, str]]:
        """What the kernel's loop guard recorded so far (see tests/loop_guard.py)."""
        code = f"print(__import__('tests.loop_guard', fromlist=['x']).findings_json({clear}))"
        result = self.execute(code)
        assert result.status == "ok", result.texts()
        found = json.loads(result.texts().strip().splitlines()[-1])
        assert found is not None, "the kernel has no loop guard"
        return list(found)

    def start(self, code: str) -> str:
        """Send a cell without waiting for it."""
        return str(self.client.execute(code))

    def value(self, expr: str) -> Any:
        result = self.execute(f"print(repr({expr}))")
        assert result.status == "ok", result.texts()
        import ast

        return ast.literal_eval(result.texts().strip().splitlines()[-1])

    def comm_msg(self, comm_id: str, data: dict[str, Any]) -> None:
        msg = self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.client.shell_channel.send(msg)

    def open_comm(self, comm_id: str, target: str = "forkagent") -> dict[str, Any]:
        """Open a comm to `target` as the JupyterLab extension does; returns the welcome."""
        msg = self.client.session.msg(
            "comm_open",
            {"comm_id": comm_id, "target_name": target, "data": {"type": "hello"}},
            metadata={},
        )
        self.client.shell_channel.send(msg)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.drain()
            welcome = self.comm_data(comm_id, "welcome")
            if welcome:
                return welcome[0]
        raise TimeoutError("no welcome on the forkagent comm")

    def comm_typed(self, comm_id: str) -> list[str]:
        """The types of every message the kernel sent on `comm_id`, each checked to be exactly
        its `protocol.Outbound` type (no key missing, none extra, no value of another type)."""
        sent = [
            m["content"]["data"]
            for m in self.iopub
            if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id
        ]
        return [OUTBOUND.validate_python(data, strict=True)["type"] for data in sent]

    def comm_data(self, comm_id: str, kind: str) -> list[dict[str, Any]]:
        """The data of the kernel's comm messages of type `kind` on `comm_id`, in order."""
        return [
            m["content"]["data"]
            for m in self.iopub
            if m["msg_type"] == "comm_msg"
            and m["content"]["comm_id"] == comm_id
            and m["content"]["data"].get("type") == kind
        ]

    def wait_comm(
        self, comm_id: str, kind: str, until: Any = bool, timeout: float = 60
    ) -> list[dict[str, Any]]:
        """Read iopub until `until(comm_data(comm_id, kind))` holds; returns that list."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.comm_data(comm_id, kind)
            if until(found):
                return found
            try:
                self.iopub.append(self.client.get_iopub_msg(timeout=0.2))
            except queue.Empty:
                pass
        raise TimeoutError(f"no {kind} message as expected on comm {comm_id}")

    def click(self, comm_id: str) -> None:
        """A widget Button click exactly as the ipywidgets frontend sends it."""
        self.clicked.add(comm_id)
        self.comm_msg(comm_id, {"method": "custom", "content": {"event": "click"}})

    def cards(self) -> list[str]:
        """Comm ids of the task cards opened so far."""
        return [
            m["content"]["comm_id"]
            for m in self.iopub
            if m["msg_type"] == "comm_open"
            and "forkagent-card"
            in m["content"].get("data", {}).get("state", {}).get("_dom_classes", [])
        ]

    def widget_comms(self, **state: Any) -> list[str]:
        """Comm ids of widgets opened so far whose initial state matches `state`."""
        found = []
        for m in self.iopub:
            if m["msg_type"] != "comm_open":
                continue
            st = m["content"].get("data", {}).get("state", {})
            if all(st.get(k) == v for k, v in state.items()):
                found.append(m["content"]["comm_id"])
        return found


@pytest.fixture
def api_key() -> str:
    """The API key in the kernel's environment (a test module may override it)."""
    return "test-key"


@pytest.fixture
def kernel_env() -> dict[str, str]:
    """Variables added to the kernel's environment (a test module may override it)."""
    return {}


@pytest.fixture
def kernel_parent() -> list[str]:
    """A command line the kernel is started under, as its parent process (a test module may
    override it: a stand-in for the Jupyter server); none by default."""
    return []


class _UnderParent(KernelManager):
    """Starts the kernel's command line after `parent_argv` (a program that runs it)."""

    parent_argv = List(Unicode())

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        return [*self.parent_argv, *super().format_kernel_cmd(extra_arguments)]


@pytest.fixture
def kernel(
    emulator: Emulator,
    tmp_path: Path,
    api_key: str,
    kernel_env: dict[str, str],
    kernel_parent: list[str],
) -> Iterator[Kernel]:
    env = dict(os.environ)
    # as a user's kernel: ipykernel forwards output written to its file descriptors 1 and 2
    # into the running cell, except under pytest, which it detects by this variable
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update(
        ANTHROPIC_API_KEY=api_key,
        ANTHROPIC_BASE_URL=emulator.base_url,
        FORKAGENT_BACKEND="anthropic",
        PYTHONPATH=str(Path(__file__).resolve().parents[2]),
        # the loop guard in the kernel (tests/loop_guard.py)
        PYTHONSTARTUP=str(Path(__file__).with_name("loop_guard_startup.py")),
    )
    env.update(kernel_env)
    km = _UnderParent(kernel_name="python3", parent_argv=kernel_parent)
    km.start_kernel(env=env, cwd=str(tmp_path))
    k = Kernel(km)
    try:
        loaded = k.execute("%load_ext forkagent_jupyter")
        assert loaded.status == "ok", loaded.texts()
        # `%load_ext` is a synchronous cell the user runs once: its imports and set-up are
        # not counted; from here on every blocking call of the package on the loop is
        k.guard_findings(clear=True)
        yield k
        found = k.guard_findings()
        if found:
            pytest.fail("in the kernel: " + LoopGuard().report(found), pytrace=False)
    finally:
        k.client.stop_channels()
        km.shutdown_kernel(now=True)
