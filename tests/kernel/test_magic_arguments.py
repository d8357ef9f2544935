"""Every magic is parsed by the parser its `@magic_arguments` declare (`parse_line`): options
and their values from the declaration, prose (a directive, a message) kept as written, and
every problem one UsageError line naming the magic."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from forkagent_jupyter.kernel.magics.agent_magics import (
    AgentMagics,
    agent_options,
    notifications_options,
    parse_line,
    send_options,
    tasks_options,
    transform_cell,
)


def test_prose_is_kept_as_written_after_the_declared_options() -> None:
    line = '--name w  --shared check the user\'s   data "as is"'
    args = parse_line(AgentMagics.fork, line, "%fork", text="directive")
    assert (args.name, args.shared) == ("w", True)
    assert args.directive == 'check the user\'s   data "as is"'
    batch = parse_line(AgentMagics.fork, '--batch --over=xs "A {item}."', "%fork", text="directive")
    assert (batch.batch, batch.over, batch.poll, batch.directive) == (
        True,
        "xs",
        None,
        '"A {item}."',
    )
    sent = parse_line(AgentMagics.send, "w1   it's --not an option", "%send", text="message")
    assert (sent.to, sent.message) == ("w1", "it's --not an option")


def test_agent_and_tasks_lines_use_the_magics_own_parsers() -> None:
    assert vars(agent_options("--new --model=claude-x")) == {
        "new": True,
        "model": "claude-x",
        "think": None,
    }
    assert vars(agent_options("")) == {"new": False, "model": None, "think": None}
    assert agent_options("--think 2048").think == 2048
    assert tasks_options("--wait a b").ids == ["a", "b"]
    pull = tasks_options("--pull w x y")
    assert pull.pull and not pull.wait and pull.ids == ["w", "x", "y"]


@pytest.mark.parametrize(
    ("magic", "line", "text", "message"),
    [
        (AgentMagics.fork, "--bogus x", "directive", "%fork: unknown option --bogus (options: "),
        (AgentMagics.fork, "--name", "directive", "%fork: option --name needs a value"),
        (AgentMagics.fork, "--name --shared x", "directive", "%fork: option --name needs a value"),
        (AgentMagics.agent, "--frobnicate", None, "%%agent: unknown option --frobnicate"),
        (AgentMagics.agent, "extra words", None, "%%agent: unrecognized arguments: extra words"),
        (AgentMagics.agent, "--model", None, "%%agent: argument --model: expected one argument"),
        (AgentMagics.tasks, "--wait --bogus", None, "%tasks: unknown option --bogus"),
        (AgentMagics.stop, "a b", None, "%stop: unrecognized arguments: b"),
        (AgentMagics.notifications, "", None, "%notifications: the following arguments are"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_magic(
    magic: object, line: str, text: str | None, message: str
) -> None:
    name = {"agent": "%%agent"}.get(magic.__name__, f"%{magic.__name__}")  # type: ignore[attr-defined]
    with pytest.raises(UsageError) as caught:
        parse_line(magic, line, name, text=text)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_lines_that_read_files_are_awaited_where_an_await_is_allowed() -> None:
    """`%send` (a resume reads a transcript) and `%notifications` (reads the parent's) become
    awaits at the top level of a cell; indented, in a function perhaps, they stay magics
    (called as IPython would, their line as written)."""
    cell = ["%send w1 it's {x}\n", "%notifications a b\n", "if True:\n", "    %send w1 hi\n"]
    assert transform_cell(cell) == [
        'await __forkagent__.send_line(" w1 it\'s {x}")\n',
        "await __forkagent__.notifications_line(get_ipython().var_expand(' a b'))\n",
        "if True:\n",
        "    get_ipython().run_line_magic('send', 'w1 hi')\n",
    ]
    assert transform_cell(["%send?\n"]) == ["%send?\n"]  # IPython shows the help
    assert vars(send_options(" w1 it's {x}")) == {"to": "w1", "message": "it's {x}"}
    assert notifications_options(" a b").ids == ["a", "b"]
    with pytest.raises(UsageError, match=r"^%send: usage"):
        send_options("w1")


@pytest.mark.parametrize(
    ("magic", "line"),
    [
        (AgentMagics.stop, "a " + "x" * 20_000),
        (AgentMagics.tasks, "--" + "x" * 20_000),
        (AgentMagics.compact, "y" * 20_000),
        (AgentMagics.fork, "--name"),
    ],
)
def test_a_refusal_never_echoes_a_long_line_whole(magic: object, line: str) -> None:
    """A line pasted 20,000 characters long was echoed whole in its one-line refusal."""
    name = f"%{magic.__name__}"  # type: ignore[attr-defined]
    with pytest.raises(UsageError) as caught:
        parse_line(magic, line, name)
    said = str(caught.value)
    assert said.startswith(name + ": ") and len(said) <= 300 and "\n" not in said
