"""A Jupyter server (JupyterLab or Notebook 7) serving this checkout's package and extension,
the Chromium that drives it, and a notebook of code cells: shared by the browser tests
(`tests/browser/conftest.py`) and the browser fan-out benchmark (`benchmarks/browser_fanout.py`)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("FORKAGENT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


def missing() -> str | None:
    """Why the browser cannot run here (no Chromium, no Playwright), or None."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(
    app: str, base: Path, env: dict[str, str], log: Path, start_timeout: float
) -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    """`python -m app` (jupyterlab or notebook) on a free port of 127.0.0.1, its root, home,
    settings, workspaces and runtime folders under `base`, `env` with those folders and this
    checkout on PYTHONPATH; its output to `log`. Yields (url, token, process) once the server
    answers; stops its process group at the end."""
    root = base / "root"
    env = dict(env)
    env.update(
        HOME=str(base / "home"),
        JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        PYTHONPATH=str(ROOT),
    )
    built = ROOT / "forkagent_jupyter" / "labextension"
    if (built / "package.json").exists():  # this checkout's build before any installed copy
        ext = base / "jupyter" / "labextensions"
        ext.mkdir(parents=True)
        (ext / "forkagent-jupyter").symlink_to(built)
        env["JUPYTER_PATH"] = os.pathsep.join(
            p for p in (str(base / "jupyter"), env.get("JUPYTER_PATH", "")) if p
        )
    token = "t" + os.urandom(8).hex()
    port = free_port()
    cmd = [
        sys.executable, "-m", app, "--no-browser", f"--port={port}",
        f"--ServerApp.token={token}", "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0", "--allow-root",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, env=env, cwd=root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{app} did not start (log: {log}): {tail}") from None
                time.sleep(0.2)  # polling the server's port, not a wait for a UI state
        yield url, token, proc
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        except ProcessLookupError:
            pass


def notebook_json(sources: list[str]) -> dict[str, Any]:
    """An nbformat-4 notebook of code cells with these sources (ids `cell-0`, `cell-1`...)."""
    cells = [
        {
            "cell_type": "code",
            "id": f"cell-{i}",
            "metadata": {},
            "source": src,
            "outputs": [],
            "execution_count": None,
        }
        for i, src in enumerate(sources)
    ]
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
