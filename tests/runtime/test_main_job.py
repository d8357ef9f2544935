"""`forkagent demo --quick` runs offline, with no key and no network."""

from __future__ import annotations

import os
import re
import subprocess
import sys


def test_forkagent_demo_runs_offline_without_a_key() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
        and not k.startswith("FORKAGENT_")
    }
    # no proxy and an unroutable base: any network attempt would fail loudly
    env["HTTPS_PROXY"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"
    out = subprocess.run(
        [sys.executable, "-m", "forkagent_jupyter.cli", "demo", "--quick"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    # the demo asks for the offline backend itself: no "no credentials" notice
    assert "offline backend" in out.stdout
    assert "credentials" not in out.stderr
    assert "-> Python: " in out.stdout  # the tool's own line about the call
    assert "<- Python result (ok)" in out.stdout
    assert "'mean': 5.725" in out.stdout
    assert "[3.1, 2.6, 9.7, 9.3]" in out.stdout  # turn 2 used turn 1's variables
    reads = [int(m) for m in re.findall(r"(\d+) cache read", out.stdout)]
    ratios = [int(m) for m in re.findall(r"\((\d+)% of the prompt from cache\)", out.stdout)]
    assert len(reads) == len(ratios) == 3  # two turns and the session total
    assert reads[1] > reads[0] > 0  # the second turn reads the first turn's prefix
    assert ratios[1] >= 90
