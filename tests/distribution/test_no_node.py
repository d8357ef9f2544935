"""An install from source on a machine without Node: everything but the JupyterLab extension,
and one line that says so (at the build, and when the extension is loaded into a kernel)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from forkagent_jupyter.kernel.extension import NO_LABEXTENSION, labextension_installed
from scripts.labextension_build import NO_NODE

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.packaging
def test_a_wheel_builds_from_source_without_node_and_says_what_it_left_out(
    tmp_path: Path,
) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    source = tmp_path / "source"
    for name in filter(None, tracked):
        path = ROOT / name.decode()
        if path.is_file():  # a clone: no built extension, no node_modules
            (source / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            (source / name.decode()).write_bytes(path.read_bytes())
    bin_dir = tmp_path / "bin"  # a PATH with Python and nothing else: no node, no jlpm
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = dict(os.environ, PATH=str(bin_dir))
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", "dist"],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    assert NO_NODE in built.stdout + built.stderr
    (wheel,) = (source / "dist").glob("forkagent_jupyter-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "forkagent_jupyter/runtime/session/session.py" in names
    assert not [n for n in names if n.endswith("labextensions/forkagent-jupyter/package.json")]


def test_the_kernel_says_when_jupyterlab_cannot_find_the_extension(tmp_path: Path) -> None:
    assert not labextension_installed([tmp_path])
    (tmp_path / "forkagent-jupyter").mkdir()
    (tmp_path / "forkagent-jupyter" / "package.json").write_text("{}")
    assert labextension_installed([tmp_path / "elsewhere", tmp_path])
    assert labextension_installed()  # this environment's install carries it
    assert "not installed" in NO_LABEXTENSION and "Node 20" in NO_LABEXTENSION
