"""`said_as`: the one place a runtime error meant for the person becomes a magic's one-line
UsageError (the magics in a real kernel: test_magics, test_stop_and_send, test_settings)."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from forkagent_jupyter.kernel.said import said_as
from forkagent_jupyter.runtime.errors import ConfigError, ModelError
from forkagent_jupyter.runtime.errors import UsageError as RuntimeUsageError
from forkagent_jupyter.runtime.executors.base import PullError
from forkagent_jupyter.runtime.model.budget import BudgetError


@pytest.mark.parametrize(
    "error",
    [
        RuntimeUsageError("No task 'x'. Known tasks: none yet."),
        ConfigError("the Dask executor needs a scheduler"),
        PullError("df cannot come back: not data"),
        BudgetError("The turn was refused: the budget is reached."),
    ],
)
def test_a_runtime_error_for_the_person_is_one_usage_error_line(error: Exception) -> None:
    with pytest.raises(UsageError) as caught, said_as("%tasks --pull"):
        raise error
    assert str(caught.value) == f"%tasks --pull: {error}"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_other_errors_pass_unchanged() -> None:
    with pytest.raises(ModelError, match="overloaded"), said_as("%send"):
        raise ModelError("overloaded")
    with pytest.raises(KeyError), said_as("%send"):
        raise KeyError("x")
