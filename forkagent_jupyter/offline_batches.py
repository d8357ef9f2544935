"""Message Batches for the offline backend: the emulator's batch endpoints, in this process.

The offline model has no Message Batches API of its own. A batched fan-out of an offline
session (`%fork --batch`, `Session.fan_out(..., batch=True)`) therefore sends its batch to
an emulator started on 127.0.0.1 on first use (its default brain answers with the offline
model's reply, and its batches end at the first poll), through the real `anthropic` SDK, and
stops it with the session. `runtime/batch/client.py` reaches this module by name: the runtime
and the emulator never import each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["start"]


async def start() -> tuple[Any, Callable[[], Awaitable[None]]]:
    """An `anthropic.AsyncAnthropic` talking to a new in-process emulator, and its stop."""
    import anthropic

    from .emulator import Emulator

    emulator = await asyncio.to_thread(Emulator().start)
    sdk = anthropic.AsyncAnthropic(
        api_key="offline", base_url=emulator.base_url, max_retries=2, timeout=60.0
    )

    async def stop() -> None:
        await sdk.close()
        await asyncio.to_thread(emulator.stop)

    return sdk, stop
