"""The `forkagent` comm protocol (version 2) and the notification MIME payload, as types.

These mirror `labextension/src/protocol.ts` (and `INotification` in `notification.ts`) key for
key; `tests/kernel/test_protocol.py` checks that both sides name the same keys. The kernel
builds every payload it sends as one of these, so mypy checks the keys where they are made.

Frontend to kernel: comm_open `Hello`; `Approve`; `Stop`; `Inserted`. The frontend is not
trusted to be well-formed: `parse_inbound` validates each of its messages strictly (no
coercion: `"3"` is not a number, `0` is not a string) and says in one line why it refuses one.
Only `decision: "allow"` or `"always"` approves a call.
Kernel to frontend: `Welcome` on every open; `TasksMessage` (a full snapshot, at most twice a
second, when something changed); `ApprovalMessage` and `ApprovalDone`; `InsertCellMessage`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict, get_args

from pydantic import Field, TypeAdapter, ValidationError
from typing_extensions import NotRequired
from typing_extensions import TypedDict as CheckedDict  # pydantic validates it on 3.10/3.11

__all__ = [
    "ANSWERS",
    "TARGET",
    "VERSION",
    "Approval",
    "ApprovalAnswer",
    "ApprovalDone",
    "ApprovalMessage",
    "Approve",
    "Budget",
    "CellSpec",
    "Hello",
    "Inbound",
    "InsertCell",
    "InsertCellMessage",
    "Inserted",
    "Notification",
    "Stop",
    "TaskRow",
    "TasksMessage",
    "TokenUsage",
    "Welcome",
    "parse_hello",
    "parse_inbound",
]

TARGET = "forkagent"
VERSION = 2


class TokenUsage(TypedDict):
    """Token counts in the Messages API's words (`messages_api.usage.usage_counts`)."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    total_input_tokens: int


class TaskRow(TypedDict):
    """One row of the Tasks panel (`ITaskRow`)."""

    id: str
    name: str | None
    kind: str
    status: str
    description: str
    elapsed: float
    usage: TokenUsage
    cost_usd: float
    cell_id: str | None
    current_tool: str | None
    current_input: str
    started_at: float
    pending_approvals: int
    context_tokens: int
    """The prompt size of its last request (what it holds in context)."""
    context_window: int
    """Its model's context window (0: unknown)."""
    compactions: int
    waiting: str  # "waiting for rate limit (N s)" while its request waits for room, else ""
    todos_done: int  # its todo list (TodoWrite): items completed
    todos_total: int  # its todo list: all items (0: no list)


class Approval(TypedDict):
    """A pending permission request (`IApproval`)."""

    request_id: str
    task_id: str | None
    tool: str
    preview: str
    cell_id: str | None
    rule: str | None
    """The rule "Allow for session" adds (exactly this call); None: it cannot be offered."""


class Budget(TypedDict):
    """The session's spend against `max_cost_usd` (`IBudget`)."""

    spent_usd: float
    limit_usd: float
    reached: bool


class CellSpec(TypedDict):
    """A complete nbformat code cell (`ICellSpec`)."""

    cell_type: Literal["code"]
    source: str
    metadata: dict[str, Any]
    outputs: list[dict[str, Any]]


class InsertCell(TypedDict):
    """Where and what to insert (`IInsertCell`)."""

    key: str
    after_cell_id: str | None
    task_ids: list[str]
    cell: CellSpec
    replace: NotRequired[bool]
    """A cell with this key already there takes this one's source and outputs (a digest)."""


class Notification(TypedDict):
    """The payload of the notification MIME type (`INotification`)."""

    task_id: str
    name: str | None
    kind: str
    status: str
    description: str
    summary: str
    result: str
    notification: str
    usage: TokenUsage
    cost_usd: float
    elapsed: float


class Welcome(TypedDict):
    type: Literal["welcome"]
    version: int
    tasks: list[TaskRow]
    approvals: list[Approval]
    budget: Budget | None


class TasksMessage(TypedDict):
    type: Literal["tasks"]
    tasks: list[TaskRow]
    budget: Budget | None


class ApprovalMessage(Approval):
    type: Literal["approval"]


class ApprovalDone(TypedDict):
    type: Literal["approval_done"]
    request_id: str


class InsertCellMessage(InsertCell):
    type: Literal["insert_cell"]


# -- frontend to kernel ---------------------------------------------------------------------

ApprovalAnswer = Literal["allow", "always", "deny"]
"""What a person answers to an approval (`ApprovalAnswer` in protocol.ts): only the first two
approve. The runtime turns it into its `Decision` (`Allow` or `Deny`)."""
ANSWERS: tuple[ApprovalAnswer, ...] = get_args(ApprovalAnswer)


class Hello(CheckedDict):
    """The data of the frontend's comm_open."""

    type: Literal["hello"]
    client: NotRequired[str]
    version: NotRequired[int]


class Approve(CheckedDict):
    """An answer to the pending approval `request_id` (`reason` goes to the model)."""

    type: Literal["approve"]
    request_id: str
    decision: ApprovalAnswer
    reason: NotRequired[str | None]


class Stop(CheckedDict):
    """The Tasks panel's stop button."""

    type: Literal["stop"]
    task_id: str


class Inserted(CheckedDict):
    """The frontend inserted the notification cell `key` as `cell_id`."""

    type: Literal["inserted"]
    key: str
    cell_id: str


Inbound = Approve | Stop | Inserted
"""What a frontend may send on an open comm."""

_INBOUND: TypeAdapter[Inbound] = TypeAdapter(Annotated[Inbound, Field(discriminator="type")])
_HELLO: TypeAdapter[Hello] = TypeAdapter(Hello)


def _refusal(data: object, exc: ValidationError) -> str:
    """Why `data` was refused, in one line: the first problem and a short repr of the data."""
    error = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in error["loc"]) or "message"
    shown = repr(data)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {error['msg']}{more}; got {shown}"


def parse_inbound(data: object) -> Inbound:
    """A frontend's comm message as its type; ValueError (one line saying why) otherwise."""
    try:
        return _INBOUND.validate_python(data, strict=True)
    except ValidationError as exc:
        raise ValueError(_refusal(data, exc)) from None


def parse_hello(data: object) -> Hello:
    """The data of a frontend's comm_open as `Hello`; ValueError (one line) otherwise."""
    try:
        return _HELLO.validate_python(data, strict=True)
    except ValidationError as exc:
        raise ValueError(_refusal(data, exc)) from None
