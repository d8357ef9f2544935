"""A parent turn streamed into the running cell: text, tool calls, retries, usage.

The cell's output is one display updated at most every `STREAM_INTERVAL` however fast tokens
arrive; an interrupt ends the turn (history stays valid) and says that workers keep running.
"""

from __future__ import annotations

import asyncio
import html
import time
from typing import TYPE_CHECKING

from IPython.display import display

from ...runtime import (
    AgentError,
    Compacted,
    LoopEvent,
    Retrying,
    Stop,
    StreamedText,
    TextDelta,
    ToolResult,
    ToolUse,
)
from ..render.markdown import SafeMarkdown, code_span
from ..render.task_line import cost_text, no_math

if TYPE_CHECKING:
    from ...runtime import Session

__all__ = ["STREAM_INTERVAL", "event_markdown", "run_turn", "usage_html"]

STREAM_INTERVAL = 0.2


def event_markdown(event: LoopEvent) -> str | None:
    """What one event of the turn adds to the cell's Markdown (None: nothing)."""
    if isinstance(event, TextDelta):
        return event.text
    if isinstance(event, ToolUse):  # the tool's own line, its name in bold
        line = event.description or event.name
        rest = line.removeprefix(event.name).removeprefix(":").strip()
        return f"\n\n> **{event.name}**" + (f" {code_span(rest)}" if rest else "") + "\n"
    if isinstance(event, Retrying):
        return f"\n\n*{event.summary}*\n\n"
    if isinstance(event, Compacted):
        return f"\n\n*{event.line()}*\n\n"
    if isinstance(event, ToolResult):
        mark = "error" if event.is_error else "ok"
        first = event.content.strip().splitlines()[0][:100] if event.content.strip() else ""
        return f"> {mark}: {first}\n\n"
    return None


def usage_html(session: Session) -> str:
    """The session's tokens and cost so far, as the turn's footer."""
    u = session.usage
    return no_math(
        f"<p><small>tokens: {u.total_input_tokens:,} in ({u.cache_read_input_tokens:,} cache"
        f" read · {u.cache_creation_input_tokens:,} cache write) · {u.output_tokens:,} out · "
        f"session {cost_text(session.cost_usd)}</small></p>",
        "div",
    )


async def run_turn(session: Session, prompt: str, *, size_said: bool = False) -> None:
    """Run one parent turn, rendering it into the running cell as it streams (`size_said`:
    the prompt's size was said already, see `Session.stream`)."""
    handle = display(SafeMarkdown("…"), display_id=True)
    shown = StreamedText()
    last = 0.0
    stop_html = stop_text = ""  # why the turn stopped (ours, often with amounts: no math)
    try:
        async for event in session.parent.stream(prompt, size_said=size_said):
            shown.apply(event)  # text; a retry takes back the broken attempt's text
            line = None if isinstance(event, TextDelta) else event_markdown(event)
            if line is not None:
                shown.add(line)
            if isinstance(event, Stop) and event.error:
                stop_text = f"{event.reason}: {event.error}"
                why = html.escape(event.error, quote=False)
                stop_html = no_math(f"<p><b>{event.reason}:</b> {why}</p>", "div")
            now = time.monotonic()
            if now - last >= STREAM_INTERVAL:
                last = now
                handle.update(SafeMarkdown(shown.text or "…", stop_html, stop_text))
    except asyncio.CancelledError:
        shown.add("\n\n*Interrupted. Background workers keep running.*")
        handle.update(SafeMarkdown(shown.text, stop_html, stop_text))
        return
    except AgentError:  # refused (an unknown /command...): the caller says it in one line
        handle.update(SafeMarkdown(shown.text, stop_html, stop_text))
        raise
    handle.update(SafeMarkdown(shown.text, stop_html + usage_html(session), stop_text))
