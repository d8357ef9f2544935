"""The `forkagent` comm protocol (version 2) and the notification cell, as types.

These mirror `labextension/src/protocol.ts` key for key; `tests/kernel/test_protocol.py`
checks that both sides name the same keys, and that the example of every message in
`labextension/test/protocol-messages.json` is valid here (the extension's tests parse the same
examples). The kernel builds every payload it sends as one of these, so mypy checks the keys
where they are made; `Bridge.broadcast` takes only an `Outbound`.

Kernel to frontend: `Welcome` on every open; `TasksMessage` (a full snapshot, at most twice a
second, when something changed); `ApprovalMessage` and `ApprovalDone`; `InsertCellMessage`
(a notification cell: each ended task in it is a `TaskSnapshot`, the runtime's own type).
Frontend to kernel: comm_open `Hello`; `Approve`; `Stop`. The frontend is not trusted to be
well-formed: `parse_inbound` validates each of its messages strictly (no coercion: `"3"` is
not a number, `0` is not a string; no key the type does not name) and says in one line why it
refuses one. Only
`decision: "allow"` or `"always"` approves a call.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, get_args

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from pydantic_core import to_jsonable_python
from typing_extensions import NotRequired, TypedDict  # pydantic validates it on 3.10/3.11

from ...messages_api.usage import UsageCounts
from ...runtime import TaskSnapshot

__all__ = [
    "ANSWERS",
    "DIGEST_MIME",
    "MIME",
    "TARGET",
    "VERSION",
    "Approval",
    "ApprovalAnswer",
    "ApprovalDone",
    "ApprovalMessage",
    "Approve",
    "Budget",
    "CellMark",
    "CellMetadata",
    "CellSpec",
    "Digest",
    "DigestBundle",
    "DisplayData",
    "Hello",
    "Inbound",
    "InsertCell",
    "InsertCellMessage",
    "MarkdownBundle",
    "NotificationBundle",
    "Outbound",
    "State",
    "Stop",
    "TaskRow",
    "TaskSnapshot",
    "TasksMessage",
    "TokenUsage",
    "Welcome",
    "inbound_or_none",
    "jsonable",
    "parse_hello",
    "parse_inbound",
]

TARGET = "forkagent"
VERSION = 2
MIME: Final = "application/vnd.forkagent.notification+json"
"""The MIME type of one notification: its data is a `TaskSnapshot` (`ITaskSnapshot`)."""
DIGEST_MIME: Final = "application/vnd.forkagent.digest+json"
"""One output for many notifications: its data is a `Digest` (`IDigest`)."""

TokenUsage = UsageCounts
"""Token counts in the Messages API's words (`messages_api.usage.usage_counts`)."""


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
    team: str | None
    """The team it is a teammate of (the panel groups a team's rows); None: in no team."""


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


class Digest(TypedDict):
    """The data of `DIGEST_MIME` (`IDigest`): a row per task, each result clipped and
    without the notification text (`delivery.digest_bundle`)."""

    tasks: list[TaskSnapshot]


NotificationBundle = TypedDict(
    "NotificationBundle",
    {
        "application/vnd.forkagent.notification+json": TaskSnapshot,
        "text/html": str,
        "text/plain": str,
    },
)
"""One notification: the snapshot (the extension draws it) and its summary, the XML folded
under it, as HTML and as plain text for other frontends (`frontend/note_view.py`)."""
DigestBundle = TypedDict(
    "DigestBundle", {"application/vnd.forkagent.digest+json": Digest, "text/plain": str}
)
MarkdownBundle = TypedDict(
    "MarkdownBundle", {"text/html": str, "text/markdown": str, "text/plain": str}
)
"""The parent's answer (`markdown.markdown_bundle`)."""


class DisplayData(TypedDict):
    """An nbformat `display_data` output of a notification cell."""

    output_type: Literal["display_data"]
    data: NotificationBundle | DigestBundle | MarkdownBundle
    metadata: dict[str, str]


class CellMark(TypedDict):
    """`metadata.forkagent` of a notification cell (`ICellMark`): what tells it apart."""

    kind: Literal["notification"]
    key: str
    task_ids: list[str]
    digest: NotRequired[bool]
    """A fan-out's digest (one cell whose outputs are replaced as its tasks end)."""


class CellMetadata(TypedDict):
    forkagent: CellMark


class CellSpec(TypedDict):
    """A complete nbformat code cell (`ICellSpec`)."""

    cell_type: Literal["code"]
    source: str
    metadata: CellMetadata
    outputs: list[DisplayData]


class InsertCell(TypedDict):
    """Where and what to insert (`IInsertCell`)."""

    key: str
    after_cell_id: str | None
    task_ids: list[str]
    cell: CellSpec
    replace: bool
    """A cell with this key already there takes this one's source and outputs (a digest)."""


class State(TypedDict):
    """What a connecting frontend is told at once."""

    tasks: list[TaskRow]
    approvals: list[Approval]
    budget: Budget | None


class Welcome(State):
    type: Literal["welcome"]
    version: int


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


Outbound = Welcome | TasksMessage | ApprovalMessage | ApprovalDone | InsertCellMessage
"""What the kernel sends on the comm."""


def jsonable(data: Outbound | NotificationBundle | DigestBundle) -> dict[str, object]:
    """`data` as plain JSON data (its snapshots as objects), for a comm or a display: a dict,
    as each of these is."""
    found = to_jsonable_python(data)
    assert isinstance(found, dict)
    return found


# -- frontend to kernel ---------------------------------------------------------------------

ApprovalAnswer = Literal["allow", "always", "deny"]
"""What a person answers to an approval (`ApprovalAnswer` in protocol.ts): only the first two
approve. The runtime turns it into its `Decision` (`Allow` or `Deny`)."""
ANSWERS: tuple[ApprovalAnswer, ...] = get_args(ApprovalAnswer)


class Hello(TypedDict):
    """The data of the frontend's comm_open. Unknown keys are ignored (not refused): a hello
    grants nothing (the kernel only keeps it to know who connected), and a newer frontend may
    announce more about itself without being refused by an older kernel."""

    type: Literal["hello"]
    client: NotRequired[str]
    version: NotRequired[int]


_NO_EXTRA = ConfigDict(extra="forbid")
"""A message that asks the kernel to act has exactly its keys: one with any other key (an
`always_for` the kernel does not know) is refused whole, never half-read."""


@with_config(_NO_EXTRA)
class Approve(TypedDict):
    """An answer to the pending approval `request_id` (`reason` goes to the model)."""

    type: Literal["approve"]
    request_id: str
    decision: ApprovalAnswer
    reason: NotRequired[str | None]


@with_config(_NO_EXTRA)
class Stop(TypedDict):
    """The Tasks panel's stop button."""

    type: Literal["stop"]
    task_id: str


Inbound = Approve | Stop
"""What a frontend may send on an open comm (each has its handler on `Bridge`)."""

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


def inbound_or_none(data: object) -> Inbound | None:
    """`data` as its type, or None: as strict as `parse_inbound`, without saying why (cheap,
    for a message that may be one of thousands)."""
    try:
        return _INBOUND.validate_python(data, strict=True)
    except ValidationError:
        return None


def parse_hello(data: object) -> Hello:
    """The data of a frontend's comm_open as `Hello`; ValueError (one line) otherwise."""
    try:
        return _HELLO.validate_python(data, strict=True)
    except ValidationError as exc:
        raise ValueError(_refusal(data, exc)) from None
