"""The kernel's payload types and the extension's interfaces name the same keys."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.kernel import protocol


def keys(kind: Any) -> set[str]:
    """The keys of a TypedDict, or the fields of a pydantic model."""
    fields = getattr(kind, "model_fields", None)
    return set(fields if fields is not None else kind.__annotations__)


SRC = Path(__file__).resolve().parents[2] / "labextension" / "src"
PAIRS = {
    "ITokenUsage": protocol.TokenUsage,
    "ITaskRow": protocol.TaskRow,
    "IApproval": protocol.Approval,
    "IBudget": protocol.Budget,
    "ICellSpec": protocol.CellSpec,
    "IInsertCell": protocol.InsertCell,
    "INotification": protocol.TaskSnapshot,
    "IHello": protocol.Hello,
    "IApprove": protocol.Approve,
    "IStop": protocol.Stop,
    "IInserted": protocol.Inserted,
}


def ts_interfaces(text: str) -> dict[str, set[str]]:
    """Interface name -> its keys, for every `export interface I... { ... }` in `text`."""
    found: dict[str, set[str]] = {}
    for match in re.finditer(r"export interface (\w+) \{(.*?)\n\}", text, re.S):
        body = re.sub(r"/\*.*?\*/|//[^\n]*", "", match.group(2), flags=re.S)
        found[match.group(1)] = set(re.findall(r"^\s*(\w+)\??:", body, re.M))
    return found


def _interfaces() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for name in ("protocol.ts", "notification.ts"):
        found.update(ts_interfaces((SRC / name).read_text()))
    return found


@pytest.mark.parametrize("ts_name", sorted(PAIRS))
def test_keys_agree(ts_name: str) -> None:
    interfaces = _interfaces()
    assert ts_name in interfaces, f"{ts_name} is gone from labextension/src"
    assert keys(PAIRS[ts_name]) == interfaces[ts_name]


def test_constants_agree() -> None:
    text = (SRC / "protocol.ts").read_text()
    assert f"COMM_TARGET = '{protocol.TARGET}'" in text
    assert f"PROTOCOL_VERSION = {protocol.VERSION};" in text
    answers = " | ".join(f"'{d}'" for d in protocol.ANSWERS)
    assert f"export type ApprovalAnswer = {answers};" in text


def test_the_parser_sees_a_missing_or_extra_key() -> None:
    text = "export interface IBudget {\n  spent_usd: number; // spent\n  reached?: boolean;\n}\n"
    assert ts_interfaces(text) == {"IBudget": {"spent_usd", "reached"}}
    assert ts_interfaces(text)["IBudget"] != set(protocol.Budget.__annotations__)
