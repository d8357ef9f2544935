"""`SessionOptions` and `Session.configure`: one place per setting, live changes, one-line
refusals. Sessions run on the emulator through the real SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from forkagent_jupyter.runtime.errors import ConfigError, UsageError
from forkagent_jupyter.runtime.session.options import SessionOptions, quoted
from forkagent_jupyter.runtime.session.session import Session

pytestmark = pytest.mark.anyio


async def test_keyword_arguments_are_folded_into_the_options(make_session: Any) -> None:
    session = make_session(
        permission_mode="plan", max_workers=3, worker_nice=7, compact_at=0.5, stream_retries=4
    )
    options = session.options
    assert (options.permission_mode, options.max_workers, options.worker_nice) == ("plan", 3, 7)
    # and each reached the part of the session that holds it
    assert session.gate.mode == "plan"
    assert (session.compute.max_workers, session.compute.nice) == (3, 7)
    assert session.compaction.compact_at == 0.5
    assert session.stream_retry.retries == 4
    assert session.main.config.stream_retry.retries == 4


async def test_options_given_whole_and_keywords_over_them(make_session: Any, emulator: Any) -> None:
    from forkagent_jupyter import SessionOptions as Exported

    assert Exported is SessionOptions
    base = SessionOptions(model="claude-haiku-4-5", max_turns=7, cache_ttl="1h")
    session = make_session(options=base, max_turns=3, auto_respond=False)
    assert session.options.max_turns == 3 and session.options.cache_ttl == "1h"
    assert base.max_turns == 7  # the options given are not changed
    await session.ask("Hello.")
    body = emulator.api_requests()[-1].body
    assert body["model"] == "claude-haiku-4-5"


async def test_no_model_is_the_default_model(make_session: Any) -> None:
    from forkagent_jupyter.runtime.model.client import default_model_name

    assert SessionOptions().model == default_model_name()
    assert make_session().model == default_model_name() != ""
    assert make_session(model="").model == default_model_name()


async def test_the_model_takes_aliases_and_refuses_what_no_id_looks_like(
    make_session: Any,
) -> None:
    """`sonnet`, `opus`, `haiku` (Claude Code's aliases) are their model ids; any id of one
    word is kept (a Bedrock id, a Vertex id, a Foundry deployment); spaces, quotes and other
    characters were sent to the API as they were and failed at the first request."""
    from forkagent_jupyter.runtime.model.names import MODEL_ALIASES

    session = make_session(model="haiku")
    assert session.model == MODEL_ALIASES["haiku"]
    for model in (
        "claude-sonnet-4-5@20250929",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "my-foundry-deployment",
    ):
        session.model = model
        assert session.model == model
    session.model = "opus[1m]"
    assert session.model == MODEL_ALIASES["opus"]
    for bad in ("nope please", "''", "\u65e5\u672c", "x" * 300, "inherit", "claude\nx"):
        with pytest.raises(UsageError) as refused:
            session.model = bad
        said = str(refused.value)
        assert said.startswith(f"model = {quoted(bad)} refused: ") and "\n" not in said
        assert len(str(refused.value)) < 400  # the value quoted twice, cut to 80
        assert session.model == MODEL_ALIASES["opus"]  # the previous one stays


async def test_an_unknown_keyword_is_a_type_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_worker'"):
        Session(backend="offline", workdir=tmp_path, transcripts=False, max_worker=3)


async def test_a_refused_value_at_the_start_is_one_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^max_workers = 0 refused: it takes a whole number >= 1"):
        Session(backend="offline", workdir=tmp_path, transcripts=False, max_workers=0)
    with pytest.raises(UsageError, match="compact_at = 2 refused: it takes a fraction"):
        Session(backend="offline", workdir=tmp_path, transcripts=False, compact_at=2)
    with pytest.raises(UsageError, match=r"thinking = 10 refused: it takes .* 1024 tokens or more"):
        Session(backend="offline", workdir=tmp_path, transcripts=False, thinking=10)


async def test_configure_applies_at_once_and_the_next_turn_uses_it(
    make_session: Any, emulator: Any
) -> None:
    session = make_session(auto_respond=False)
    await session.ask("Hello.")
    session.configure(
        model="claude-haiku-4-5",
        cache_ttl="1h",
        permission_mode="acceptEdits",
        max_workers=2,
        worker_memory_mb=64,
        compact_at=0.6,
        stream_retries=1,
        forking=False,
    )
    assert session.gate.mode == "acceptEdits"
    assert (session.compute.max_workers, session.compute.worker_memory_mb) == (2, 64)
    assert session.compaction.compact_at == 0.6
    assert session.main.config.stream_retry.retries == 1  # the running parent's too
    assert session.workers.forking is False
    await session.ask("Again.")
    body = emulator.api_requests()[-1].body
    assert body["model"] == "claude-haiku-4-5"
    ttls = {
        block["cache_control"].get("ttl")
        for message in body["messages"]
        for block in message["content"]
        if isinstance(block, dict) and "cache_control" in block
    }
    assert ttls == {"1h"}
    agent_tool = next(t for t in body["tools"] if t["name"] == "Agent")
    assert "run_in_background" in str(agent_tool["input_schema"])  # the non-forking tool


async def test_configure_with_options_changes_what_differs(make_session: Any) -> None:
    session = make_session()
    wanted = session.options.changed(max_workers=5, permission_mode="dontAsk")
    session.configure(wanted)
    assert session.compute.max_workers == 5 and session.gate.mode == "dontAsk"


async def test_attributes_are_the_options(make_session: Any) -> None:
    session = make_session()
    session.max_cost_usd = 3.0
    session.thinking = 2048
    assert session.options.max_cost_usd == 3.0 and session.budget.limit == 3.0
    assert session.options.thinking == {"type": "enabled", "budget_tokens": 2048}
    assert session.thinking == session.options.thinking


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"backend": "offline"}, "backend is fixed when the session starts"),
        ({"workdir": "/"}, "workdir is fixed when the session starts"),
        ({"max_workers": 0}, "max_workers = 0 refused"),
        ({"max_workers": True}, "max_workers = True refused: it takes a whole number"),
        ({"auto_background_after": True}, "auto_background_after = True refused: it takes"),
        ({"approval_timeout": True}, "approval_timeout = True refused: it takes a number"),
        ({"worker_nice": True}, "worker_nice = True refused: it takes a whole number"),
        ({"stream_retries": "3"}, "stream_retries = '3' refused: it takes a whole number"),
        ({"worker_nice": 20}, "worker_nice = 20 refused"),
        ({"permission_mode": "yolo"}, "permission_mode = 'yolo' refused"),
        ({"max_cost_usd": -1}, "max_cost_usd = -1 refused: it takes a positive number"),
        ({"no_such": 1}, "no setting 'no_such'"),
    ],
)
async def test_a_refused_change_is_one_line_and_nothing_changes(
    make_session: Any, changes: dict[str, Any], message: str
) -> None:
    session = make_session(max_workers=4)
    before = session.options
    with pytest.raises(UsageError, match=message) as caught:
        session.configure(**changes)
    assert "\n" not in str(caught.value)
    assert session.options == before
    assert session.compute.max_workers == 4 and session.gate.mode == "default"


async def test_an_executor_that_cannot_be_used_keeps_the_old_one(make_session: Any) -> None:
    session = make_session()
    with pytest.raises(ConfigError, match="Dask"):
        session.configure(executor="dask")  # no scheduler given, none found
    assert session.options.executor == "local"
    assert session.compute.executor == "local"


async def test_a_session_on_a_dask_cluster_that_cannot_be_used_does_not_start(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="Dask"):
        Session(backend="offline", workdir=tmp_path, transcripts=False, executor="dask")


async def test_the_system_prompt_is_assigned_like_the_other_settings(
    make_session: Any, emulator: Any
) -> None:
    session = make_session(auto_respond=False)
    session.system_prompt = "You answer in one word."
    assert session.options.system_prompt == "You answer in one word."
    await session.ask("Hello.")
    system = emulator.api_requests()[-1].body["system"]
    assert [block["text"] for block in system] == ["You answer in one word."]
    session.system_prompt = None  # back to the built-in prompt
    assert session.system_prompt != "You answer in one word." and session.system_prompt


INF, NAN = float("inf"), float("nan")
WRONG_KIND: list[tuple[str, Any]] = [
    ("auto_respond", "no"),
    ("auto_respond", 1),
    ("forking", "no"),
    ("stagger_forks", 0),
    ("reuse_snapshots", "yes"),
    ("transcripts", 1),
    ("max_workers", True),
    ("max_workers", 2.0),
    ("max_workers", INF),
    ("max_turns", 3.0),
    ("max_tokens", "8192"),
    ("approval_timeout", INF),
    ("approval_timeout", NAN),
    ("approval_timeout", 0),
    ("approval_timeout", 1e300),
    ("auto_background_after", INF),
    ("auto_background_after", -1),
    ("max_cost_usd", INF),
    ("max_cost_usd", NAN),
    ("max_cost_usd", True),
    ("max_cost_usd", 0),
    ("stream_retries", 10**6),
    ("stream_retries", 2.0),
    ("stream_retry_delay", INF),
    ("stream_retry_delay", -0.5),
    ("mcp_startup_timeout", INF),
    ("mcp_call_timeout", NAN),
    ("mcp_call_timeout", 0),
    ("compact_at", NAN),
    ("compact_at", True),
    ("compact_at", 0),
    ("compact_keep_turns", 0),
    ("context_window", 1.5),
    ("worker_memory_mb", 0),
    ("worker_nice", 2.0),
    ("thinking", True),
    ("thinking", 10),
    ("cache_ttl", "2h"),
    ("backend", "nope"),
    ("permission_mode", "yolo"),
    ("executor", "ray"),
    ("model", 5),
    ("large_prompt_tokens", 0),
    ("large_prompt_tokens", True),
    ("large_prompt_tokens", 2.5),
]


@pytest.mark.parametrize(("name", "value"), WRONG_KIND)
async def test_a_value_of_the_wrong_kind_is_refused_in_one_line_naming_what_is_taken(
    make_session: Any, name: str, value: Any
) -> None:
    """Strict: no truthy string for a flag, no bool or float for a count, no infinity, nan or
    number past its bound; the line names the setting, the value and what it takes."""
    with pytest.raises(UsageError) as caught:
        SessionOptions.of(None, {name: value})
    said = str(caught.value)
    assert said.startswith(f"{name} = {value!r} refused: it takes "), said
    assert "\n" not in said
    assert SessionOptions.accepts(name) in said
    if not SessionOptions.model_fields[name].frozen:  # and while the session runs
        session = make_session()
        before = session.options
        with pytest.raises(UsageError) as again:
            session.configure(**{name: value})
        assert str(again.value) == said
        assert session.options == before


async def test_session_of_a_truthy_string_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^auto_respond = 'no' refused: it takes True or False"):
        Session(backend="offline", workdir=tmp_path, transcripts=False, auto_respond="no")


async def test_modes_and_choices_are_read_whatever_their_case(make_session: Any) -> None:
    session = make_session(permission_mode="acceptedits", cache_ttl="1H")
    assert session.options.permission_mode == "acceptEdits" and session.gate.mode == "acceptEdits"
    assert session.options.cache_ttl == "1h"
    session.configure(worker_namespace="SHARED")
    assert session.options.worker_namespace == "shared"
