"""The wheel as PyPI would get it: metadata, license, the prebuilt extension, one version.

One wheel is built per module (`python -m build --wheel --no-isolation`, a few seconds while
the extension is already built) and unpacked; the package is then run from the unpacked wheel,
where `benchmarks/` does not exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
EXT_SHARE = "data/share/jupyter/labextensions/forkagent-jupyter"


def _source_version() -> str:
    return str(json.loads((ROOT / "labextension" / "package.json").read_text())["version"])


@dataclass
class Wheel:
    path: Path
    unpacked: Path
    names: list[str]
    metadata: Message

    def dist_info(self) -> str:
        return next(n.split("/")[0] for n in self.names if n.endswith(".dist-info/METADATA"))

    def data_dir(self) -> str:
        return self.dist_info().replace(".dist-info", ".data")

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """Python with the unpacked wheel first on the path (before the editable install)."""
        env = dict(os.environ, PYTHONPATH=str(self.unpacked))
        return subprocess.run(
            [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
        )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wheel]:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=600,
    )
    (path,) = out.glob("forkagent_jupyter-*.whl")
    unpacked = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        zf.extractall(unpacked)
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(zf.read(meta_name).decode())
    yield Wheel(path, unpacked, names, metadata)


def test_version_comes_from_the_extension_package_json(wheel: Wheel) -> None:
    version = _source_version()
    assert wheel.metadata["Version"] == version
    assert wheel.path.name == f"forkagent_jupyter-{version}-py3-none-any.whl"
    shipped = wheel.unpacked / wheel.data_dir() / EXT_SHARE
    ext = json.loads((shipped / "package.json").read_text())
    assert ext["name"] == "forkagent-jupyter"
    assert ext["version"] == version


def test_license_and_classifiers(wheel: Wheel) -> None:
    meta = wheel.metadata
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["License-File"] == "LICENSE"
    shipped = (wheel.unpacked / wheel.dist_info() / "licenses" / "LICENSE").read_text()
    assert shipped == (ROOT / "LICENSE").read_text()
    assert "Apache License" in shipped and "Version 2.0, January 2004" in shipped
    assert "END OF TERMS AND CONDITIONS" in shipped
    classifiers = meta.get_all("Classifier") or []
    for wanted in (
        "Framework :: Jupyter :: JupyterLab :: Extensions :: Prebuilt",
        "Framework :: Jupyter :: JupyterLab :: 4",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.13",
        "Operating System :: POSIX :: Linux",
    ):
        assert wanted in classifiers
    # PEP 639: the license is the License-Expression; license classifiers are deprecated
    assert not [c for c in classifiers if c.startswith("License ::")]
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert "forkagent" in (meta.get_payload() or "")


def test_wheel_ships_the_prebuilt_extension(wheel: Wheel) -> None:
    ext = f"{wheel.data_dir()}/{EXT_SHARE}"
    assert f"{ext}/package.json" in wheel.names
    assert f"{ext}/install.json" in wheel.names
    assert f"{ext}/static/style.js" in wheel.names
    assert [n for n in wheel.names if n.startswith(f"{ext}/static/remoteEntry.")]
    install = json.loads((wheel.unpacked / ext / "install.json").read_text())
    assert install["packageName"] == "forkagent-jupyter"
    assert "forkagent_jupyter/__main__.py" in wheel.names
    assert "forkagent_jupyter/examples/01_fan_out.ipynb" in wheel.names
    assert not [n for n in wheel.names if n.startswith(("benchmarks/", "tests/"))]


def test_version_commands_print_the_one_version(wheel: Wheel, tmp_path: Path) -> None:
    expected = f"forkagent-jupyter {_source_version()}"
    by_module = wheel.run("-m", "forkagent_jupyter", "--version", cwd=tmp_path)
    assert by_module.returncode == 0, by_module.stderr
    assert by_module.stdout.strip() == expected
    # the `forkagent` console script, exactly as the wheel declares it
    entry_points = (wheel.unpacked / wheel.dist_info() / "entry_points.txt").read_text()
    line = next(x for x in entry_points.splitlines() if x.startswith("forkagent ="))
    module, func = line.split("=", 1)[1].strip().split(":")
    script = (
        f"import sys; from {module} import {func}; sys.argv[0] = 'forkagent'; sys.exit({func}())"
    )
    by_script = wheel.run("-c", script, "--version", cwd=tmp_path)
    assert by_script.returncode == 0, by_script.stderr
    assert by_script.stdout.strip() == expected
    attr = wheel.run(
        "-c", "import forkagent_jupyter as f; print(f.__file__, f.__version__)", cwd=tmp_path
    )
    file, version = attr.stdout.split()
    assert Path(file).is_relative_to(wheel.unpacked)
    assert version == _source_version()


def test_bench_from_a_wheel_says_why_it_cannot_run(wheel: Wheel, tmp_path: Path) -> None:
    done = wheel.run("-m", "forkagent_jupyter", "bench", "--quick", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("forkagent bench: ")
    assert "source checkout" in lines[0]
