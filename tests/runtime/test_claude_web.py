"""WebSearch and WebFetch through the Messages API's server tools, served offline by the
emulator (strict) from its fixture corpus: results, usage and price, WebFetch(domain:...)
rules, and a fetch that can reach only the approved page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.emulator.brains import OfflineBrain, Reply, ScriptedBrain
from forkagent_jupyter.messages_api.usage import WEB_SEARCH_USD, Usage, cost_usd
from forkagent_jupyter.runtime.permissions.gate import DenyAll

pytestmark = pytest.mark.anyio

PAGE = "https://field-notes.example.net/penguins/bill-length"


def researcher(workdir: Path) -> None:
    agents = workdir / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "researcher.md").write_text(
        "---\nname: researcher\ndescription: Looks things up on the web\n"
        "tools: WebSearch, WebFetch, Read\n---\nYou research.\n"
    )


def agent_calls(*uses: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(tuple({"type": "tool_use", "name": n, "input": i} for n, i in uses))


def scripted(emulator: Any, *uses: tuple[str, dict[str, Any]]) -> None:
    """The researcher's first request calls `uses`, its second says "done"; the web tools'
    own requests are answered by the offline model (which calls the server tool)."""
    brain = ScriptedBrain(when_empty=OfflineBrain())

    def researcher_turn(first: bool) -> Any:
        def match(req: Any) -> bool:
            system = str(req.get("system"))
            has_results = any(
                isinstance(m.get("content"), list)
                and any(b.get("type") == "tool_result" for b in m["content"])
                for m in req["messages"]
            )
            return "You research." in system and has_results != first

        return match

    brain.add_rule(researcher_turn(True), agent_calls(*uses), times=1)
    brain.add_rule(researcher_turn(False), Reply.text("done"), times=1)
    emulator.brain = brain


async def run_researcher(session: Any, prompt: str = "Look it up.") -> Any:
    definition = await session.workers.definition("researcher")
    run = session.workers.named(session.main, definition, prompt, description="research")
    task = session.workers.start(run)
    await session.wait(task.id, timeout=30)
    return task, run


async def test_search_and_fetch_through_server_tools(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    researcher(tmp_path)
    scripted(
        emulator,
        ("WebSearch", {"query": "penguin bill length"}),
        ("WebFetch", {"url": PAGE, "prompt": "Which species have the longer bills?"}),
    )
    session = make_session(auto_respond=False)
    task, run = await run_researcher(session)
    assert task.status == "completed"
    results = [b for m in run.history for b in m["content"] if b.get("type") == "tool_result"]
    search, fetch = (str(r["content"]) for r in results)
    assert not any(r.get("is_error") for r in results)
    assert f"Bill length of three penguin species: {PAGE}" in search
    assert "Gentoo and Chinstrap penguins have longer bills" in fetch
    # the web requests: one server tool each, the fetch restricted to the page's host
    web = [r.body for r in emulator.api_requests() if "You look things up" in str(r.body)]
    tools = sorted((t["type"], t.get("allowed_domains")) for b in web for t in b["tools"])
    assert tools == [
        ("web_fetch_20250910", ["field-notes.example.net"]),
        ("web_search_20250305", None),
    ]
    # their usage (a search at $10 per 1,000, the fetched page as input) is the agent's
    ledger = emulator.ledger.entries()
    assert sum(e.usage.get("server_tool_use", {}).get("web_search_requests", 0) for e in ledger)
    assert task.usage.web_search_requests == 1 and task.usage.web_fetch_requests == 1
    priced = sum(e.cost_usd for e in ledger)
    assert task.cost_usd == pytest.approx(priced)
    assert session.cost_usd == pytest.approx(priced)


async def test_fetch_errors_and_domain_rules(
    emulator: Any, make_session: Any, tmp_path: Path
) -> None:
    researcher(tmp_path)
    scripted(
        emulator,
        ("WebFetch", {"url": PAGE, "prompt": "What about bills?"}),
        ("WebFetch", {"url": "https://blog.example.com/2026/prompt-caching", "prompt": "x"}),
        ("WebFetch", {"url": "https://blog.example.com/missing", "prompt": "x"}),
        ("WebFetch", {"url": "file:///etc/passwd", "prompt": "x"}),
        ("WebSearch", {"query": "anything"}),
    )
    # nobody to ask: WebFetch runs only where a rule allows it; a deny rule wins
    session = make_session(
        auto_respond=False,
        permission_policy=DenyAll(),
        allow=["WebFetch(domain:*.example.com)", "WebFetch(domain:field-notes.example.net)"],
        deny=["WebFetch(domain:field-notes.example.net)"],
    )
    _task, run = await run_researcher(session)
    denied, allowed, missing, bad_url, search = (
        b for m in run.history for b in m["content"] if b.get("type") == "tool_result"
    )
    assert denied.get("is_error") and "WebFetch(domain:field-notes.example.net)" in str(
        denied["content"]
    )
    assert not allowed.get("is_error") and "first request writes the prefix" in str(
        allowed["content"]
    )
    assert missing.get("is_error")
    assert str(missing["content"]) == (
        "Could not fetch https://blog.example.com/missing (url_not_accessible)."
    )
    assert bad_url.get("is_error") and "http(s) address" in str(bad_url["content"])
    assert search.get("is_error")  # WebSearch needs approval too, and nobody allowed it
    fetched = [r for r in emulator.api_requests() if "web_fetch" in str(r.body.get("tools"))]
    assert len(fetched) == 2  # the denied and the invalid call never reached the API


def test_search_price() -> None:
    usage = Usage.from_api(
        {"input_tokens": 1000, "output_tokens": 100, "server_tool_use": {"web_search_requests": 3}}
    )
    assert usage.web_search_requests == 3
    base = cost_usd(Usage(input_tokens=1000, output_tokens=100), "claude-sonnet-5-5")
    assert cost_usd(usage, "claude-sonnet-5-5") == pytest.approx(base + 3 * WEB_SEARCH_USD)
