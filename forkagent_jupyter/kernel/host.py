"""What the notebook's views (`ui.py` and the approval policy, answer delivery and task rows it
builds: `approvals/`, `frontend/`) use of the kernel.

`extension.KernelAgent` builds `ui.KernelUI` and hands itself to it as its `AgentHost`;
`KernelUI` builds the other views and hands itself to each as their `ViewHost`. The views
depend on these small types, not on the modules that build them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..runtime import Session
    from .cards.hub import ApprovalPrompt, CardHub, PendingStrip
    from .comm.bridge import Bridge
    from .settings import ForkAgent

__all__ = ["AgentHost", "ConsoleQuestions", "Launch", "ViewHost"]


@dataclass
class Launch:
    """Where a worker came from: the cell that started it, for its notification."""

    cell_id: str | None
    display_id: str
    run: str = ""  # the execute_request that displayed the card (its cell's output then)


class ConsoleQuestions(Protocol):
    """Approvals asked on the kernel's stdin where no widget can answer (a console):
    `approvals.terminal.TerminalAsk`."""

    who: Callable[[ApprovalPrompt], str]  # who asks, as the question names it

    def add(self, prompt: ApprovalPrompt) -> None:
        """Ask `prompt` in the running cell (or when the next cell runs)."""
        ...


class AgentHost(Protocol):
    """The kernel's agent as the views use it: its shell and settings, its session, its comm,
    its console prompt, and stopping a task."""

    @property
    def shell(self) -> InteractiveShell: ...  # (and its `kernel`, when there is one)

    @property
    def settings(self) -> ForkAgent: ...

    @property
    def session(self) -> Session: ...

    @property
    def bridge(self) -> Bridge: ...

    @property
    def terminal(self) -> ConsoleQuestions: ...

    def stop(self, key: str) -> None:
        """Stop the task `key`, as `%stop` does."""
        ...


class ViewHost(Protocol):
    """What the views share: where each worker was launched, the approvals pending, the
    cards, and the few questions only the whole UI can answer."""

    @property
    def agent(self) -> AgentHost: ...

    @property
    def launches(self) -> dict[str, Launch]: ...

    @property
    def pending(self) -> dict[str, ApprovalPrompt]: ...  # by request id

    @property
    def headless_notices(self) -> dict[str, str]: ...  # pending approvals nobody can answer

    @property
    def hub(self) -> CardHub: ...

    @property
    def strip(self) -> PendingStrip: ...

    def launched(self, run: str) -> int:
        """How many workers the cell run `run` (an execute_request id) launched."""
        ...

    def headless(self) -> bool:
        """No frontend can answer an approval."""
        ...

    def tasks_changed(self) -> None:
        """The task table changed: tell the connected frontends (coalesced)."""
        ...
