"""The documentation says what the code is: `docs/architecture.md` names every room of the
runtime and the kernel and nothing else, every module path it names exists, and every link
of the README and of `docs/` reaches a file and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import forkagent_jupyter

PACKAGE = Path(forkagent_jupyter.__file__).parent
ROOT = PACKAGE.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _rooms(part: str) -> set[str]:
    """The rooms of `runtime/` or `kernel/`: top-level modules and packages."""
    return {
        p.name.removesuffix(".py")
        for p in (PACKAGE / part).iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
    }


def _named_rooms(text: str, part: str) -> set[str]:
    """The rooms the table of `### \\`part/\\`` names in its second column."""
    section = text.split(f"### `{part}/`", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    named: set[str] = set()
    for row in section.splitlines():
        cells = row.split("|")
        if len(cells) > 3 and not set(cells[2].strip()) <= {"-", " "}:
            named |= {n.rstrip("/") for n in re.findall(r"`([\w/]+)`", cells[2])}
    return named


@pytest.mark.parametrize("part", ["runtime", "kernel"])
def test_the_architecture_names_every_room_and_no_other(part: str) -> None:
    assert _named_rooms(ARCHITECTURE.read_text(), part) == _rooms(part)


def test_every_module_path_the_architecture_names_exists() -> None:
    """`runtime/loop/fork.py`, `kernel/ui.py`, `cards/hub.py`: each path resolves under the
    package (a path without its part is looked for in both parts)."""
    text = ARCHITECTURE.read_text()
    missing = []
    for path in set(re.findall(r"`((?:[\w]+/)+[\w]+\.py)`", text)):
        if path.split("/")[0] in ("tests", "benchmarks", "scripts"):
            assert (ROOT / path).is_file(), path
            continue
        candidates = [PACKAGE / path, PACKAGE / "runtime" / path, PACKAGE / "kernel" / path]
        if not any(c.is_file() for c in candidates):
            missing.append(path)
    assert missing == []


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def _broken_links(page: Path) -> list[str]:
    broken = []
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"\w+://|mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{page.name}: {target} (no such heading)")
    return broken


def test_every_link_of_the_readme_and_the_docs_resolves() -> None:
    assert [b for page in PAGES for b in _broken_links(page)] == []


def test_the_link_checker_sees_a_broken_file_and_a_broken_heading(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Two words\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#two-words) [x](a.md#three) [y](c.md) [z](https://e.org/#q)\n")
    assert _broken_links(page) == [
        "b.md: a.md#three (no such heading)",
        "b.md: c.md (no such file)",
    ]


def test_the_readme_is_a_front_door() -> None:
    """At most 400 lines: what it is, the two set-up commands, a tour, links."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400
