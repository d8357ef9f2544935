"""The package's version: one source, `labextension/package.json`.

The build (hatch-nodejs-version) copies it into the wheel's metadata and the JupyterLab
extension's own package.json; the package reads it back from the installed metadata.
"""

from __future__ import annotations

from functools import cache

__all__ = ["DIST_NAME", "package_version"]

DIST_NAME = "forkagent-jupyter"


@cache
def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DIST_NAME)
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"
