"""Helpers for the SDK conformance suite (fixtures come from tests/conftest.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from forkagent_jupyter.emulator import Emulator
from forkagent_jupyter.messages_api.tokens import ByteTokenizer, flatten

MODEL = "claude-sonnet-5-5"  # minimum cacheable prefix: 1024 tokens
EPHEMERAL: dict[str, Any] = {"type": "ephemeral"}
ONE_HOUR: dict[str, Any] = {"type": "ephemeral", "ttl": "1h"}


def filler(tag: str, n_bytes: int) -> str:
    """Deterministic ASCII text of exactly `n_bytes` bytes, distinct per `tag`."""
    unit = f"[{tag}] lorem ipsum dolor sit amet. "
    return (unit * (n_bytes // len(unit) + 1))[:n_bytes]


def cumulative(body: Mapping[str, Any]) -> list[int]:
    """Cumulative prompt tokens after each flattened block (the documented tokenizer)."""
    out, total = [], 0
    for block in flatten(body, ByteTokenizer()):
        total += block.tokens
        out.append(total)
    return out


def usage_of(message: Any) -> dict[str, int]:
    u = message.usage
    return {
        "input": u.input_tokens,
        "read": u.cache_read_input_tokens,
        "write": u.cache_creation_input_tokens,
        "5m": u.cache_creation.ephemeral_5m_input_tokens,
        "1h": u.cache_creation.ephemeral_1h_input_tokens,
    }


def expected(read: int, w1h: int, w5m: int, total: int) -> dict[str, int]:
    return {
        "input": total - read - w1h - w5m,
        "read": read,
        "write": w1h + w5m,
        "5m": w5m,
        "1h": w1h,
    }


class ControlError(Exception):
    def __init__(self, code: int, body: Any) -> None:
        super().__init__(f"HTTP {code}: {body}")
        self.code = code
        self.body = body


def control(emu: Emulator, method: str, name: str, payload: Any = None) -> Any:
    """Call a control endpoint with the standard library (ControlError on HTTP errors)."""
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(
        f"{emu.base_url}/_emulator/{name}",
        data=data,
        method=method,
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            raise ControlError(exc.code, json.loads(exc.read())) from None


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}
