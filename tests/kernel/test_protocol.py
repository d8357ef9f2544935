"""The kernel's payload types and the extension's interfaces name the same keys, and the shared
example of every comm message (`labextension/test/protocol-messages.json`, which the
extension's tests parse too) is valid here: no key missing, none extra; each frontend message
reaches its handler, each message the kernel does not take is dropped with a log line."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest

from forkagent_jupyter.kernel.comm import protocol, tally
from forkagent_jupyter.kernel.comm.bridge import Bridge

from .conftest import OUTBOUND

ROOT = Path(__file__).resolve().parents[2] / "labextension"
SRC = ROOT / "src"
EXAMPLES = json.loads((ROOT / "test" / "protocol-messages.json").read_text(encoding="utf-8"))
PAIRS: dict[str, Any] = {
    "ITokenUsage": protocol.TokenUsage,
    "ITaskRow": protocol.TaskRow,
    "IApproval": protocol.Approval,
    "IBudget": protocol.Budget,
    "ICellMark": protocol.CellMark,
    "ICellSpec": protocol.CellSpec,
    "IInsertCell": protocol.InsertCell,
    "ITaskSnapshot": protocol.TaskSnapshot,
    "IDigest": protocol.Digest,
    "IState": protocol.State,
    "IWelcome": protocol.Welcome,
    "ITasksMessage": protocol.TasksMessage,
    "IApprovalMessage": protocol.ApprovalMessage,
    "IApprovalDone": protocol.ApprovalDone,
    "IInsertCellMessage": protocol.InsertCellMessage,
    "IHello": protocol.Hello,
    "IApprove": protocol.Approve,
    "IStop": protocol.Stop,
}


def keys(kind: Any) -> set[str]:
    """The keys of a TypedDict, or the fields of a pydantic model."""
    fields = getattr(kind, "model_fields", None)
    if fields is not None:
        return set(fields)
    return set(kind.__required_keys__ | kind.__optional_keys__)


def message_types(union: Any) -> set[str]:
    return {get_args(get_type_hints(member)["type"])[0] for member in get_args(union)}


def ts_interfaces(text: str) -> dict[str, set[str]]:
    """Interface name -> its keys (those it extends included), for every
    `export interface I... [extends J] { ... }` in `text`."""
    found: dict[str, set[str]] = {}
    bases: dict[str, str] = {}
    pattern = r"export interface (\w+)(?: extends (\w+))? \{(.*?)\n\}"
    for match in re.finditer(pattern, text, re.S):
        body = re.sub(r"/\*.*?\*/|//[^\n]*", "", match.group(3), flags=re.S)
        found[match.group(1)] = set(re.findall(r"^\s*(\w+)\??:", body, re.M))
        if match.group(2):
            bases[match.group(1)] = match.group(2)
    for name, base in bases.items():
        found[name] |= found.get(base, set())
    return found


def _interfaces() -> dict[str, set[str]]:
    return ts_interfaces((SRC / "protocol.ts").read_text())


@pytest.mark.parametrize("ts_name", sorted(PAIRS))
def test_keys_agree(ts_name: str) -> None:
    interfaces = _interfaces()
    assert ts_name in interfaces, f"{ts_name} is gone from labextension/src/protocol.ts"
    assert keys(PAIRS[ts_name]) == interfaces[ts_name]


def test_constants_agree() -> None:
    text = (SRC / "protocol.ts").read_text()
    assert f"COMM_TARGET = '{protocol.TARGET}'" in text
    assert f"PROTOCOL_VERSION = {protocol.VERSION};" in text
    assert f"NOTIFICATION_MIME = '{protocol.MIME}'" in text
    assert f"DIGEST_MIME = '{protocol.DIGEST_MIME}'" in text
    answers = " | ".join(f"'{d}'" for d in protocol.ANSWERS)
    assert f"export type ApprovalAnswer = {answers};" in text
    listed = text.split("export const KERNEL_MESSAGE_TYPES", 1)[1].split("= [", 1)[1]
    assert set(re.findall(r"'(\w+)'", listed.split("];", 1)[0])) == message_types(protocol.Outbound)


def test_the_parser_sees_a_missing_or_extra_key() -> None:
    text = (
        "export interface IBudget {\n  spent_usd: number; // spent\n  reached?: boolean;\n}\n"
        "export interface IMore extends IBudget {\n  type: 'more';\n}\n"
    )
    assert ts_interfaces(text) == {
        "IBudget": {"spent_usd", "reached"},
        "IMore": {"type", "spent_usd", "reached"},
    }
    assert ts_interfaces(text)["IBudget"] != keys(protocol.Budget)


def test_every_message_has_an_example() -> None:
    sent = {m["type"] for m in EXAMPLES["kernel_to_frontend"]}
    assert sent == message_types(protocol.Outbound)
    taken = {m["type"] for m in EXAMPLES["frontend_to_kernel"]}
    assert taken == message_types(protocol.Inbound) | {"hello"}


def _snapshots(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The task snapshots a notification cell carries (one per notification, a digest's rows)."""
    found: list[dict[str, Any]] = []
    for output in message["cell"]["outputs"]:
        data = output["data"]
        found += [data[protocol.MIME]] if protocol.MIME in data else []
        found += data[protocol.DIGEST_MIME]["tasks"] if protocol.DIGEST_MIME in data else []
    return found


@pytest.mark.parametrize(
    "example",
    EXAMPLES["kernel_to_frontend"],
    ids=lambda m: f"{m['type']}",
)
def test_each_kernel_message_example_is_exactly_its_type(example: dict[str, Any]) -> None:
    parsed = OUTBOUND.validate_python(example, strict=True)
    assert protocol.jsonable(parsed) == example  # nothing dropped, nothing added
    for snapshot in _snapshots(example) if example["type"] == "insert_cell" else []:
        assert set(snapshot) == keys(protocol.TaskSnapshot)
        assert set(snapshot["usage"]) == keys(protocol.TokenUsage)


def test_the_notification_examples_carry_snapshots() -> None:
    inserts = [m for m in EXAMPLES["kernel_to_frontend"] if m["type"] == "insert_cell"]
    carried = [s for m in inserts for s in _snapshots(m)]
    assert len(carried) == 3  # one notification, a digest of two


def test_a_junk_field_in_a_kernel_message_is_caught() -> None:
    """The strict check above is not vacuous: an extra or missing key fails it."""
    [welcome, *_] = EXAMPLES["kernel_to_frontend"]
    with pytest.raises(ValueError, match="Extra inputs"):
        OUTBOUND.validate_python({**welcome, "extra": 1}, strict=True)
    row = {k: v for k, v in welcome["tasks"][0].items() if k != "waiting"}
    with pytest.raises(ValueError, match="waiting"):
        OUTBOUND.validate_python({**welcome, "tasks": [row]}, strict=True)


def _bridge() -> tuple[Bridge, list[Any]]:
    bridge = Bridge(None)
    handled: list[Any] = []
    bridge.on_approve = handled.append
    bridge.on_stop = handled.append
    return bridge, handled


def test_each_frontend_message_reaches_its_handler() -> None:
    bridge, handled = _bridge()
    [hello, *messages] = EXAMPLES["frontend_to_kernel"]
    assert protocol.parse_hello(hello) == hello
    for message in messages:
        bridge._on_msg({"content": {"data": message}})
    assert handled == messages


@pytest.mark.parametrize("junk", EXAMPLES["dropped_by_kernel"], ids=repr)
def test_what_the_kernel_does_not_take_is_dropped_with_a_log_line(
    junk: Any, caplog: pytest.LogCaptureFixture
) -> None:
    bridge, handled = _bridge()
    with caplog.at_level(logging.WARNING, logger="forkagent_jupyter.kernel.comm.bridge"):
        bridge._on_msg({"content": {"data": junk}})
    assert handled == []
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("forkagent comm: dropped a malformed message from the frontend: ")
    assert "\n" not in line


def test_a_flood_of_junk_is_said_in_a_few_lines_and_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """10,000 junk messages wrote 10,000 lines: now the first few say why, one counts the rest
    (at the end of the spell; here, where no loop runs, when it is flushed)."""
    bridge, handled = _bridge()
    with caplog.at_level(logging.WARNING, logger="forkagent_jupyter.kernel.comm.bridge"):
        for n in range(10_000):
            bridge._on_msg({"content": {"data": {"type": "junk", "n": n}}})
        bridge._on_msg({"content": {"data": EXAMPLES["frontend_to_kernel"][1]}})
        bridge.tally.flush()
        bridge.tally.flush()  # nothing more to say
    assert handled == [EXAMPLES["frontend_to_kernel"][1]]  # what is a message still acts
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == tally.LINES + 1
    assert lines[0].startswith("forkagent comm: dropped a malformed message from the frontend: ")
    assert "'n': 0}" in lines[0] and f"'n': {tally.LINES - 1}}}" in lines[tally.LINES - 1]
    more = 10_000 - tally.LINES
    assert re.fullmatch(
        rf"forkagent comm: dropped {more:,} more messages from the frontend in \d+ s, "
        rf"without a line each \({more:,} malformed\)",
        lines[-1],
    ), lines[-1]
    assert bridge.tally.total == 10_000


def test_a_message_that_acts_has_exactly_its_keys_but_a_hello_may_say_more() -> None:
    """An approval or a stop with a key the protocol does not name is refused whole (the
    kernel never acts on half of a message); a hello grants nothing, and a newer frontend may
    say more about itself in it, so its unknown keys are ignored."""
    [hello, allow, *_] = EXAMPLES["frontend_to_kernel"]
    with pytest.raises(ValueError, match=r"always_for: Extra inputs are not permitted"):
        protocol.parse_inbound({**allow, "always_for": "*"})
    assert protocol.parse_hello({**hello, "features": ["digest"]}) == hello
