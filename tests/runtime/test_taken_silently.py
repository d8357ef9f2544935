"""Mistakes that had been taken silently: a name given twice, a model that is no Claude model,
a prompt too large to notice (issue 42, section 4), through the real SDK and the emulator."""

from __future__ import annotations

import re
from typing import Any

import pytest

from forkagent_jupyter.runtime.errors import UsageError
from forkagent_jupyter.runtime.tasks.notifications import CommandQueue
from forkagent_jupyter.runtime.tasks.registry import Task, TaskRegistry

pytestmark = pytest.mark.anyio


# -- a name given twice ----------------------------------------------------------------------


async def test_running_a_named_fork_again_moves_the_name_to_the_new_worker(
    make_session: Any,
) -> None:
    """Re-running a `%fork --name x` cell (Run All twice) had made two tasks named `x`: the
    table showed both, and which one `send`, `stop`, `wait` and `pull` reached was decided by
    the order the registry happened to hold them in. Now `x` names the newest; the earlier one
    keeps its id, and each card says so in one line."""
    session = make_session(auto_respond=False)
    first = session.fork_now("first run `py: 1 + 1`", name="x")
    await session.wait(first.id, timeout=60)
    second = session.fork_now("second run `py: 2 + 2`", name="x")
    assert second.id != first.id
    assert [t.id for t in session.tasks if t.name == "x"] == [second.id]  # one holder
    assert first.name is None and session.task(first.id) is first  # reachable by its id
    assert session.task("x") is second and session.find_task("x") is second
    assert second.notes == [f"x now names this worker; the earlier x is {first.id}"]
    assert first.notes == [f"its name x now names {second.id}, a later worker"]
    await session.wait("x", timeout=60)
    reply = await session.send("x", "once more `py: 3 + 3`")
    assert reply.startswith("Agent x had completed; it was resumed"), reply
    assert second.run == 2 and first.run == 1  # the message reached the newest
    await session.wait(timeout=60)


async def test_a_running_name_or_another_tasks_id_is_no_name_for_a_new_worker(
    make_session: Any,
) -> None:
    session = make_session(auto_respond=False)
    running = session.fork_now("wait `py: __import__('time').sleep(30)`", name="busy")
    with pytest.raises(UsageError, match=r"in use by the running task .*or stop busy first\.$"):
        session.fork_now("another", name="busy")
    with pytest.raises(UsageError, match=r"is the id of another task: give this worker another"):
        session.fork_now("another", name=running.id)
    assert list(session.tasks) == [running]
    await session.stop("busy")


def test_a_task_registered_with_a_name_it_cannot_take_is_registered_without_it() -> None:
    """A resumed agent (or a batch's fork) is not asked first: it goes without the name, and
    its card says why; the running holder keeps it."""
    registry = TaskRegistry(CommandQueue())
    holder = registry.register(Task(id="a1", kind="fork", description="d", name="x"))
    late = registry.register(Task(id="a2", kind="fork", description="d", name="x"))
    assert late.name is None and holder.name == "x"
    assert late.notes == [
        "not named 'x': the name 'x' is in use by the running task a1; use its id a2"
    ]
    assert registry.find("x") is holder and registry.find("a2") is late


# -- a model that is no Claude model -----------------------------------------------------------


@pytest.fixture
def anthropic_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests would go to the Anthropic API itself: no endpoint or backend of the person's."""
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("FORKAGENT_BACKEND", raising=False)


@pytest.mark.usefixtures("anthropic_api")
@pytest.mark.parametrize("backend", [None, "anthropic", "offline"])
async def test_a_model_that_is_no_claude_model_is_refused_where_the_api_would_answer_404(
    tmp_path: Any, backend: str | None
) -> None:
    """`model = "gpt-4"` had been taken, and the first request failed with a 404."""
    from forkagent_jupyter.runtime.session.session import Session

    with pytest.raises(UsageError) as refused:
        Session(model="gpt-4", backend=backend, api_key="k", workdir=tmp_path, transcripts=False)
    said = str(refused.value)
    assert said.startswith(
        "model = 'gpt-4' refused: 'gpt-4' is no Claude model, and the Anthropic API answers 404"
    ), said
    assert "use an alias (sonnet, opus, haiku, fable) or an id such as claude-sonnet-5-5" in said
    assert "\n" not in said
    session = Session(backend="offline", workdir=tmp_path, transcripts=False)
    before = session.model
    with pytest.raises(UsageError, match=r"'sonet' is no Claude model.*did you mean sonnet\?"):
        session.configure(model="sonet")
    with pytest.raises(UsageError, match=r"did you mean claude-opus-4-8"):
        session.model = "opus-4-8"
    assert session.model == before  # the previous one stays
    for taken in ("claude-sonnet-4-5@20250929", "us.anthropic.claude-sonnet-4-5-v1:0", "opus"):
        session.model = taken  # a Claude model's id on any platform, an alias
    await session.aclose()


async def test_a_model_that_is_no_claude_model_is_sent_as_written_elsewhere_with_one_line(
    make_session: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy (a base URL of its own) or another backend may know any name: taken, with one
    line on stderr, once."""
    session = make_session(model="gpt-4-proxy-a")  # the emulator's base URL
    assert session.model == "gpt-4-proxy-a"
    said = capsys.readouterr().err.splitlines()
    assert said == [
        "forkagent: model 'gpt-4-proxy-a' is no Claude model id; it is sent to the endpoint at "
        "base_url as written (its first request says whether that endpoint knows it)."
    ]
    session.model = "gpt-4-proxy-a"
    session.model = "sonnet"
    assert capsys.readouterr().err == ""  # said once; a Claude model needs no line
    from forkagent_jupyter.runtime.session.options import SessionOptions

    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("FORKAGENT_BACKEND", raising=False)
    options = SessionOptions(backend="foundry", model="my-deployment-b")
    assert options.model == "my-deployment-b"
    assert "sent to the foundry backend as written" in capsys.readouterr().err
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/v1")
    assert SessionOptions.check("model", "llama-c") == "llama-c"
    assert "sent to the endpoint at ANTHROPIC_BASE_URL as written" in capsys.readouterr().err
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://api.anthropic.com/")
    with pytest.raises(UsageError, match="'llama-d' is no Claude model"):
        SessionOptions.check("model", "llama-d")
    with pytest.raises(UsageError, match="'llama-e' is no Claude model"):
        SessionOptions.check("model", "llama-e", {"backend": "anthropic"})
    assert SessionOptions.check("model", "llama-f", {"backend": "vertex"}) == "llama-f"


# -- a prompt too large to notice --------------------------------------------------------------

BIG = "2024-01-01,42.0,north\n" * 1000  # 22,000 characters: about 5,600 tokens


async def test_a_large_prompt_directive_or_message_is_said_with_its_size_and_cost_first(
    emulator: Any, make_session: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 2 MB `{var}` had gone out with no word (a simulated $6.32, 58% of the parent's
    context). Past `large_prompt_tokens` one line on stderr says the size and what it costs,
    before anything is sent; then it goes."""
    from forkagent_jupyter.messages_api.tokens import count_input_tokens
    from forkagent_jupyter.messages_api.usage import Usage, cost_usd

    session = make_session(auto_respond=False, large_prompt_tokens=5_000)
    tokens = count_input_tokens({"messages": [{"role": "user", "content": BIG}]})
    write = cost_usd(
        Usage(cache_creation_input_tokens=tokens, ephemeral_5m_input_tokens=tokens), session.model
    )
    reread = cost_usd(Usage(cache_read_input_tokens=tokens), session.model)
    turn = await session.ask(BIG)
    assert turn.ok, turn.error
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1, said
    figures = re.fullmatch(
        r"forkagent: this prompt is ~([\d,]+) tokens \(1% of claude-sonnet-5-5's 1,000,000-token "
        r"context window\): about \$([\d.]+) to send, and it stays in the conversation: "
        r"\$([\d.]+) more for each later request\. Large data costs less saved to a file and "
        r"named in the prompt \(the agent reads what it needs\)\.",
        said[0],
    )
    assert figures is not None, said[0]
    assert int(figures[1].replace(",", "")) == tokens  # nothing measured yet: the count
    assert float(figures[2]) == pytest.approx(write, rel=0.05)
    assert float(figures[3]) == pytest.approx(reread, rel=0.1)
    sent = emulator.api_requests()[-1].body["messages"][-1]["content"]
    assert BIG in [b.get("text") for b in sent]  # and it was sent
    task = session.fork_now("look at it " + BIG, name="w")
    said = capsys.readouterr().err
    assert (
        re.match(r"forkagent: this directive is ~5,\d{3} tokens \(1% ", said)
        and "\n" not in said.strip()
    )
    assert "for the worker's first request (what it inherits is read from the cache)" in said
    await session.wait("w", timeout=60)
    await session.send("w", BIG)
    said = capsys.readouterr().err
    assert (
        re.match(r"forkagent: this message is ~5,\d{3} tokens \(1% ", said)
        and "stays in w's conversation" in said
    )
    await session.wait(task.id, timeout=60)
    await session.ask("small")  # under the threshold: no line
    session.large_prompt_tokens = None  # never said
    await session.ask(BIG)
    assert capsys.readouterr().err == ""


async def test_a_prompt_that_cannot_fit_the_context_window_is_refused_before_it_is_sent(
    emulator: Any, make_session: Any
) -> None:
    """Refused in one line: its size, the window, what to do instead; nothing is sent and no
    history changes. Compaction off: the conversation so far does not shrink, so a prompt
    larger than it that does not fit beside it is refused too."""
    session = make_session(auto_respond=False, context_window=28_000, compact_at=None)
    await session.ask("hello")
    task = session.fork_now("a worker `py: 1`", name="w")
    await session.wait(task.id, timeout=60)
    await session.ask(BIG)  # the conversation: about 10,000 tokens
    requests, messages = len(emulator.api_requests()), list(session.messages)
    huge = BIG * 5  # about 28,000 tokens: more than the window by itself
    with pytest.raises(UsageError) as refused:
        await session.ask(huge)
    said = str(refused.value)
    assert re.match(
        r"this prompt is ~2\d,\d{3} tokens: even beside the system prompt and tools alone "
        r"\(~4,\d{3}\) and room for the reply \(8,192\) it does not fit claude-sonnet-5-5's "
        r"28,000-token context window, so it was not sent; save the data to a file and name the "
        r"file in the prompt \(the agent reads what it needs\)\.$",
        said,
    ), said
    with pytest.raises(UsageError, match=r"^this directive is ~2\d,.*so it was not sent"):
        session.fork_now("look " + huge)
    with pytest.raises(UsageError, match=r"^this message is ~2\d,.*so it was not sent"):
        await session.send("w", huge)
    with pytest.raises(UsageError, match=r"^this message is ~2\d,"):
        session.send_now("w", huge)
    # it would fit beside the system prompt, not beside the conversation, and it is larger
    # than what the conversation has added: the conversation would have to be compacted
    with pytest.raises(UsageError) as refused:
        await session.ask(BIG * 2)
    said = str(refused.value)
    assert re.match(r"this prompt is ~1\d,\d{3} tokens: with the conversation so far \(~1", said)
    assert "(~1" in said and "; compaction is off) and room for the reply (8,192)" in said
    assert said.endswith("(the agent reads what it needs), or compact the conversation first.")
    assert "\n" not in said
    assert len(emulator.api_requests()) == requests and session.messages == messages
    assert [t.id for t in session.tasks] == [task.id] and task.run == 1


async def test_with_compaction_on_only_what_cannot_fit_beside_the_system_prompt_is_refused(
    emulator: Any, make_session: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Compaction can shrink the conversation to its system prompt and tools: a prompt that
    would fit there goes (the conversation is compacted first, and the line says so); only
    one that would not is refused."""
    session = make_session(auto_respond=False, context_window=28_000, large_prompt_tokens=5_000)
    await session.ask("hello")
    requests = len(emulator.api_requests())
    with pytest.raises(UsageError) as refused:
        await session.ask(BIG * 5)
    said = str(refused.value)
    assert re.match(r"this prompt is ~2\d,\d{3} tokens: even beside the system prompt and", said)
    assert said.endswith("name the file in the prompt (the agent reads what it needs).")
    assert len(emulator.api_requests()) == requests
    first = await session.ask(BIG * 2)  # about 11,500 tokens: the window has room
    assert first.ok, first.error
    capsys.readouterr()
    again = await session.ask(BIG * 2)  # no room beside the first: compacted, then sent
    assert again.ok, again.error
    line = capsys.readouterr().err
    assert "(the conversation is compacted first, to make room)" in line, line
    assert str(session.messages[0]["content"]).startswith(  # compacted, then answered
        "[{'type': 'text', 'text': '<conversation-summary>"
    )
