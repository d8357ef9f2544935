"""Runtime errors as a magic shows them: one `UsageError` line that names the magic.

The runtime refuses bad input (`UsageError`, a `BudgetError` among them), a set-up it cannot
use (`ConfigError`) and a pull it cannot bring back (`PullError`) with a message the person can
act on. Every magic and `api` function that calls the runtime wraps the call in `said_as`,
so each such error reaches the cell as `UsageError: <magic>: <message>` - no traceback, no
hand-written translation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from IPython.core.error import UsageError

__all__ = ["said_as"]


@contextlib.contextmanager
def said_as(magic: str) -> Iterator[None]:
    """Inside, a runtime error meant for the person becomes `UsageError("<magic>: ...")`."""
    from ..runtime import ConfigError, PullError
    from ..runtime import UsageError as RuntimeUsageError

    try:
        yield
    except (RuntimeUsageError, ConfigError, PullError) as exc:
        raise UsageError(f"{magic}: {exc}") from None
