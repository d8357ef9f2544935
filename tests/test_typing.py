"""Types where the data is: `Any` stays rare in the runtime and the kernel, their
conversations are typed messages, and mypy checks both parts strictly.

`Any` is counted as a name in the code (comments and strings do not count, the import line
does), per 1,000 lines of each part.
"""

from __future__ import annotations

import io
import sys
import tokenize
from pathlib import Path

import pytest

import forkagent_jupyter

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PACKAGE = Path(forkagent_jupyter.__file__).parent
PER_THOUSAND = 12


def any_density(part: str) -> tuple[int, int]:
    """(`Any` names, lines) of the .py files of `part`."""
    names = lines = 0
    for path in sorted((PACKAGE / part).rglob("*.py")):
        source = path.read_text()
        lines += source.count("\n")
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        names += sum(1 for t in tokens if t.type == tokenize.NAME and t.string == "Any")
    return names, lines


@pytest.mark.parametrize("part", ["runtime", "kernel"])
def test_any_is_rare(part: str) -> None:
    names, lines = any_density(part)
    assert lines > 1000
    assert names * 1000 <= PER_THOUSAND * lines, (
        f"{part}/: {names} Any in {lines} lines = {1000 * names / lines:.1f} per 1,000 "
        f"(at most {PER_THOUSAND})"
    )


def test_mypy_is_strict_on_the_runtime_and_the_kernel() -> None:
    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = {
        module
        for override in config.get("overrides", [])
        if override.get("strict") is True
        for module in override["module"]
    }
    relaxed = {
        module
        for override in config.get("overrides", [])
        for module in override["module"]
        if any(
            override.get(flag) is False
            for flag in (
                "disallow_untyped_calls",
                "disallow_untyped_defs",
                "disallow_any_generics",
                "warn_return_any",
            )
        )
    }
    for part in ("runtime", "kernel"):
        assert f"forkagent_jupyter.{part}.*" in strict
        assert not {m for m in relaxed if m.startswith(f"forkagent_jupyter.{part}")}, relaxed


def test_a_conversation_is_typed_messages() -> None:
    """The runtime holds its conversations as `Message`s, not as untyped dicts."""
    import typing

    from forkagent_jupyter.messages_api.shapes import Message
    from forkagent_jupyter.runtime import history

    hints = typing.get_type_hints(history.append_message)
    assert hints["history"] == list[Message] and hints["message"] is Message
