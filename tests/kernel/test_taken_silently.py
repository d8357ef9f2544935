"""Mistakes the notebook had taken silently (issue 42, section 4): a named `%fork` cell run
twice, a model that is no Claude model, a `{var}` too large to notice."""

from __future__ import annotations

import re

import pytest

from .conftest import Kernel

pytestmark = pytest.mark.kernel

SESSION = "__forkagent__.session"


def _outputs(shown: object) -> list[tuple[str, str]]:
    """(kind, text) of each output of a cell, in order: a stream's name, or the message type."""
    out = []
    for m in shown.messages:  # type: ignore[attr-defined]
        c = m["content"]
        if m["msg_type"] == "stream":
            out.append((c["name"], c["text"]))
        elif m["msg_type"] in ("display_data", "execute_result", "error"):
            out.append((m["msg_type"], str(c.get("data", {}).get("text/plain", c.get("evalue")))))
    return out


def test_running_a_named_fork_cell_again_moves_the_name_and_says_so_on_the_card(
    kernel: Kernel,
) -> None:
    first = kernel.execute("%fork --name x first look")
    assert first.status == "ok", first.texts()
    kernel.execute("%tasks --wait x", timeout=60)
    earlier = kernel.value(f"{SESSION}.task('x').id")
    again = kernel.execute("%fork --name x second look")  # the same cell, run again
    assert again.status == "ok", again.texts()
    newer = kernel.value(f"{SESSION}.task('x').id")
    assert newer != earlier
    cards = "__forkagent__.ui.hub.cards"
    assert f"x now names this worker; the earlier x is {earlier}" in kernel.value(
        f"{cards}[{newer!r}].header.value"
    )
    assert f"its name x now names {newer}, a later worker" in kernel.value(
        f"repr({cards}[{earlier!r}])"
    )
    assert kernel.value(f"[t.id for t in {SESSION}.tasks if t.name == 'x']") == [newer]
    kernel.execute("%tasks --wait x", timeout=60)
    assert kernel.execute("%tasks x").texts().count("<tr><td>") == 1  # the newest alone
    table = kernel.execute("%tasks").texts()  # one row named x, the earlier one by its id
    assert table.count("<code>x</code>") == 1 and f"<code>{earlier}</code>" in table, table
    sent = kernel.execute("%send x once more")
    assert sent.status == "ok", sent.texts()
    assert kernel.value(f"{SESSION}.task({newer!r}).run") == 2
    assert kernel.value(f"{SESSION}.task({earlier!r}).run") == 1  # reachable by its id
    kernel.execute("%tasks --wait", timeout=60)


def test_a_model_that_is_no_claude_model_is_one_line_taken_on_a_proxy_refused_on_the_api(
    kernel: Kernel,
) -> None:
    """The kernel talks to the emulator through ANTHROPIC_BASE_URL (a proxy, as far as names
    go): taken, with one line; without it the Anthropic API would answer 404: refused."""
    taken = kernel.execute("%config ForkAgent.model = 'gpt-4-proxy'")
    assert taken.status == "ok"
    assert taken.texts().strip() == (
        "forkagent: model 'gpt-4-proxy' is no Claude model id; it is sent to the endpoint at "
        "ANTHROPIC_BASE_URL as written (its first request says whether that endpoint knows it)."
    )
    assert kernel.value("__forkagent__.settings.model") == "gpt-4-proxy"
    kernel.execute("import os; del os.environ['ANTHROPIC_BASE_URL']")
    refused = kernel.execute("%config ForkAgent.model = 'gpt-4'").texts().strip()
    assert refused == (
        "UsageError: ForkAgent.model = 'gpt-4' refused: 'gpt-4' is no Claude model, and the "
        "Anthropic API answers 404 for it: use an alias (sonnet, opus, haiku, fable) or an id "
        "such as claude-sonnet-5-5; a proxy's or platform's name needs its backend or "
        "ANTHROPIC_BASE_URL (it stays 'gpt-4-proxy')."
    )
    typo = kernel.execute("%config ForkAgent.model = 'sonet'").texts()
    assert "'sonet' is no Claude model, and the Anthropic API answers 404 for it: did you mean" in (
        typo
    )
    assert kernel.value("__forkagent__.settings.model") == "gpt-4-proxy"


def test_a_large_variable_is_said_with_its_size_and_cost_and_one_that_cannot_fit_is_refused(
    kernel: Kernel, emulator: object
) -> None:
    kernel.execute("%config ForkAgent.large_prompt_tokens = 5000")
    kernel.execute("rows = '2024-01-01,42.0,north\\n' * 1000")  # 22,000 characters
    asked = kernel.execute("%%agent\nSummarise these rows:\n{rows}", timeout=120)
    assert asked.status == "ok", asked.texts()
    said = _outputs(asked)
    assert said[0][0] == "stderr", said  # before the answer
    assert re.match(
        r"forkagent: this prompt is ~5,\d{3} tokens \(1% of claude-sonnet-5-5's "
        r"1,000,000-token context window\): about \$0\.0\d\d to send, and it stays in the "
        r"conversation: \$0\.\d{4} more for each later request\. Large data costs less saved to "
        r"a file and named in the prompt",
        said[0][1],
    ), said[0][1]
    assert said[0][1].count("\n") == 1  # one line
    assert sum(kind == "stderr" for kind, _ in said) == 1  # said once
    forked = kernel.execute("%fork --name w count the rows of {rows}")
    assert forked.status == "ok", forked.texts()
    assert re.match(r"forkagent: this directive is ~5,\d{3} tokens", _outputs(forked)[0][1])
    kernel.execute("%tasks --wait w", timeout=60)
    sent = kernel.execute("%send w and these {rows}")
    assert sent.status == "ok", sent.texts()
    assert "forkagent: this message is ~5," in sent.texts()
    assert "stays in w's conversation" in sent.texts()
    kernel.execute("%tasks --wait w", timeout=60)

    # a window with room for the system prompt, the tools, the reply and 3,000 tokens more:
    # the same rows no longer fit, whatever compaction does
    kernel.execute(
        f"{SESSION}.configure(context_window={SESSION}.prompt_size('').base + 8_192 + 3_000)"
    )
    messages = kernel.value(f"len({SESSION}.messages)")
    refused = kernel.execute("%%agent\nAnd these:\n{rows}")
    assert refused.reply["content"]["ename"] == "UsageError"
    evalue = refused.reply["content"]["evalue"]
    assert re.match(
        r"%%agent: this prompt is ~5,\d{3} tokens: even beside the system prompt and tools "
        r"alone \(~\d,\d{3}\) and room for the reply \(8,192\) it does not fit "
        r"claude-sonnet-5-5's \d\d,\d{3}-token context window, so it was not sent; save the "
        r"data to a file and name the file in the prompt \(the agent reads what it needs\)\.$",
        evalue,
    ), evalue
    assert [kind for kind, _ in _outputs(refused)] == ["stderr"]  # that line alone
    assert kernel.value(f"len({SESSION}.messages)") == messages
    for code, magic, kind in (
        ("%fork look at {rows}", "%fork", "directive"),
        ("%send w and {rows}", "%send", "message"),
    ):
        refused = kernel.execute(code)
        assert refused.reply["content"]["ename"] == "UsageError", refused.texts()
        assert refused.reply["content"]["evalue"].startswith(f"{magic}: this {kind} is ~5,")
    assert kernel.value(f"len({SESSION}.tasks)") == 1
