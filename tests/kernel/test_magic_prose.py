"""What a person writes to a worker reaches it as written: a question mark at the end of a
`%fork` or `%send` line, several lines in a `%%fork` or `%%send` cell, a variable whose value
has braces, an option with one dash."""

from __future__ import annotations

from typing import Any

import pytest

from forkagent_jupyter.kernel.interpolation import interpolate

from .conftest import Kernel

pytestmark = pytest.mark.kernel


def _result(kernel: Kernel, name: str) -> str:
    waited = kernel.execute(f"%tasks --wait {name}", timeout=120)
    assert waited.status == "ok", waited.texts()
    return str(kernel.value(f"__forkagent__.session.task({name!r}).result"))


def test_a_line_that_ends_in_a_question_mark_is_the_magics(kernel: Kernel, emulator: Any) -> None:
    """IPython reads a trailing `?` as a help request for the last word ("Object `price` not
    found."): the worker was never started."""
    kernel.execute("from forkagent_jupyter.kernel import api\napi.allow('Python')")
    asked = kernel.execute("%fork --name q what is `py: 6 * 7` and the mean price?")
    assert asked.status == "ok", asked.texts()
    assert "not found" not in asked.texts()
    assert "the mean price?" in kernel.value("__forkagent__.session.task('q').description")
    assert "42" in _result(kernel, "q")
    followed = kernel.execute("%send q and now `py: 6 * 8`, the median?")
    assert followed.status == "ok" and "not found" not in followed.texts(), followed.texts()
    assert "48" in _result(kernel, "q")
    # the magic's own help is still a help request
    helped = kernel.execute("%fork ?")
    assert helped.texts().startswith("%fork"), helped.texts()


def test_a_fork_cell_and_a_send_cell_carry_several_lines(kernel: Kernel, emulator: Any) -> None:
    """`%%fork` takes its directive from the cell's body and `%%send` its message; a `{name}`
    value is put in verbatim, its own `{{` and `}}` kept (the worker's f-string prints `{x}`,
    not 5)."""
    kernel.execute("from forkagent_jupyter.kernel import api\napi.allow('Python')")
    kernel.execute("code = 'x = 5\\nprint(f\"{{x}}\" * 2)'")
    started = kernel.execute("%%fork --name m\nRun this, then report:\n```python\n{code}\n```\n")
    assert started.status == "ok", started.texts()
    first = _result(kernel, "m")
    assert "{x}{x}" in first and "55" not in first, first
    sent = kernel.execute("%%send m\nAnd this one:\n```python\nprint(6 * 7)\n```\n")
    assert sent.status == "ok", sent.texts()
    assert "42" in _result(kernel, "m")


def test_an_option_with_one_dash_is_refused(kernel: Kernel) -> None:
    """`%fork -name x ...` had started an unnamed worker whose directive began `-name x`."""
    refused = kernel.execute("%fork -name x profile the columns")
    assert refused.status == "error"
    assert "-name has one dash: did you mean --name?" in refused.texts()
    assert kernel.value("len(__forkagent__.session.tasks) if __forkagent__._session else 0") == 0


def test_interpolation_substitutes_a_value_verbatim() -> None:
    namespace = {"code": 'd = {{"a": 1}}\nf"{{x}}"', "n": 3}
    assert interpolate("run {code}; n={n}; {{lit}} {missing}", namespace) == (
        'run d = {{"a": 1}}\nf"{{x}}"; n=3; {lit} {missing}'
    )


def test_notifications_of_two_tasks_answered_apart_are_both_shown(
    kernel: Kernel, emulator: Any
) -> None:
    """`%notifications A B` showed only the newest answer that named one of them when the
    parent had answered A and B in separate turns; a name with no record is one line."""
    kernel.execute("%config ForkAgent.permission_mode = 'bypassPermissions'")
    for name, code in (("first", "6 * 7"), ("second", "6 * 8")):
        kernel.execute(f"%fork --name {name} compute `py: {code}`")
        kernel.execute(f"%tasks --wait {name}", timeout=120)
        kernel.execute("await __forkagent__.session.idle()", timeout=120)  # answered, alone
        answered = "len(__forkagent__.session.responder.auto_turns)"
        assert kernel.value(answered) == (1 if name == "first" else 2)
    shown = kernel.execute("%notifications first second nosuch")
    assert shown.status == "ok", shown.texts()
    notes = [
        m["content"]["data"]["application/vnd.forkagent.notification+json"]
        for m in shown.messages
        if m["msg_type"] == "display_data"
        and "application/vnd.forkagent.notification+json" in m["content"]["data"]
    ]
    assert sorted(n["name"] for n in notes) == ["first", "second"], notes
    assert "none recorded yet for nosuch" in shown.texts()


def test_a_parents_call_nobody_can_answer_is_refused_at_once(kernel: Kernel) -> None:
    """Without a frontend (nbclient, papermill: allow_stdin false) and without api.allow, each
    %%agent cell waited headless_approval_timeout (20 s) before `Not approved`, though no
    other cell can run meanwhile to answer: it is refused at once, saying how to allow."""
    from .test_terminal import console_cell

    kernel.execute("%config ForkAgent.headless_approval_timeout = 600")  # old code: a hang
    ran = console_cell(kernel, "%%agent\nCount them. `py: 6 * 7`", allow_stdin=False)
    said = ran.execution.texts()
    assert "Not approved" in said and "api.allow('Python')" in said, said
    assert kernel.value("len(__forkagent__.ui.pending)") == 0
