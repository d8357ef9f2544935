"""The build hook's function for the JupyterLab extension: Node builds it, or the install goes
on without it and says so in one line.

The extension is TypeScript, built with Node 20 and `jlpm`. A wheel carries it prebuilt, so
only an install from this source tree needs Node; without Node such an install still works
(the kernel extension, the runtime, the magics, the cards), with notifications shown in the
launching cell instead of as new cells, and `%load_ext forkagent_jupyter` says the JupyterLab
extension is missing. With Node, the built files must be there afterwards.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from hatch_jupyter_builder import npm_builder

BUILT = ("forkagent_jupyter/labextension/package.json", "forkagent_jupyter/labextension/static")
NO_NODE = (
    "forkagent-jupyter: Node.js was not found, so the JupyterLab extension is not built; "
    "everything else is installed (notifications show in the launching cell). Install Node 20 "
    "and reinstall, or install the wheel, which carries the extension."
)


def build(target_name: str, version: str, **kwargs: Any) -> None:
    """`hatch_jupyter_builder.npm_builder` where Node is found; else one line on stderr."""
    if shutil.which("node") is None:
        print(NO_NODE, file=sys.stderr)
        return
    npm_builder(target_name, version, **kwargs)
    missing = [path for path in BUILT if not Path(path).exists()]
    if missing:
        raise RuntimeError(f"the JupyterLab extension's build did not write {', '.join(missing)}")
