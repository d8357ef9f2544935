"""Read, Write, Edit, Glob, Grep on real files, and the path helpers they share."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from forkagent_jupyter.runtime.tools import builtin_tools
from forkagent_jupyter.runtime.tools.files import EditTool, GlobTool, GrepTool, ReadTool, WriteTool
from forkagent_jupyter.runtime.tools.files.paths import is_inside, resolve_in, shown_path
from forkagent_jupyter.runtime.tools.services import ToolServices

from .helpers import call, make_ctx

pytestmark = pytest.mark.anyio


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


# -- paths ---------------------------------------------------------------------------------


def test_resolve_in_and_is_inside(work: Path, tmp_path: Path) -> None:
    (work / "sub").mkdir()
    (tmp_path / "outside.txt").write_text("x")
    (work / "link").symlink_to(tmp_path / "outside.txt")
    (work / "dirlink").symlink_to(tmp_path)
    assert resolve_in(work, "sub/../a.txt") == work.resolve() / "a.txt"
    assert resolve_in(work, "link") == (tmp_path / "outside.txt").resolve()
    assert is_inside(work, "sub/x.py") and is_inside(work, ".") and is_inside(work, work)
    assert not is_inside(work, "../outside.txt")
    assert not is_inside(work, "/etc/passwd")
    assert not is_inside(work, "link")  # a symlink pointing outside is outside
    assert not is_inside(work, "dirlink/work/../outside.txt")
    assert not is_inside(work, str(work) + "-sibling/x")  # a prefix of the name is not inside
    assert shown_path(work, work / "sub" / "x.py") == "sub/x.py"
    assert shown_path(work, "/etc/passwd") == "/etc/passwd"


def test_builtin_tools_order_and_schemas() -> None:
    tools = builtin_tools()
    names = ["Read", "Write", "Edit", "Glob", "Grep", "Bash", "Python", "Variables", "DescribeData"]
    assert [t.name for t in tools] == names
    reading = ["Read", "Glob", "Grep", "Variables", "DescribeData"]
    assert [t.name for t in tools if t.concurrency_safe] == reading
    assert [t.name for t in tools if not t.needs_approval] == reading
    assert [t.name for t in tools if t.allowed_in_plan] == reading
    for tool in tools:
        spec = tool.spec()
        assert spec["description"] and spec["input_schema"]["type"] == "object"
        for name, prop in spec["input_schema"]["properties"].items():
            assert prop.get("description"), (tool.name, name)


def test_paths_and_subjects(work: Path) -> None:
    ctx = make_ctx(work)
    read = ReadTool()
    args = read.parse({"file_path": "./src/../src/a.py"})
    assert read.permission_subject(args) == "src/a.py"
    assert read.paths(args, ctx) == [work.resolve() / "src" / "a.py"]
    glob = GlobTool()
    g = glob.parse({"pattern": "../other/*.csv"})
    assert glob.paths(g, ctx) == [work.resolve().parent / "other"]
    g = glob.parse({"pattern": "/var/log/**/*.log"})
    assert glob.paths(g, ctx) == [Path("/var/log").resolve()]
    grep = GrepTool()
    assert grep.paths(grep.parse({"pattern": "x"}), ctx) == [work.resolve()]


# -- Read ----------------------------------------------------------------------------------


async def test_read_numbers_lines_and_pages(work: Path) -> None:
    (work / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    ctx = make_ctx(work)
    out = await call(ReadTool(), ctx, file_path="a.txt")
    assert not out.is_error
    assert out.content.splitlines()[0] == "     1\tline 1"
    assert out.content.splitlines()[-1] == "    10\tline 10"
    page = await call(ReadTool(), ctx, file_path="a.txt", offset=3, limit=2)
    assert page.content.splitlines()[:2] == ["     3\tline 3", "     4\tline 4"]
    assert "lines 3-4 of 10" in page.content and "offset=5" in page.content
    past = await call(ReadTool(), ctx, file_path="a.txt", offset=50)
    assert past.is_error and "past the end" in past.content


async def test_read_absolute_path_long_lines_and_empty(work: Path) -> None:
    (work / "long.txt").write_text("x" * 5000 + "\n")
    (work / "empty.txt").write_text("")
    ctx = make_ctx(work)
    out = await call(ReadTool(), ctx, file_path=str(work / "long.txt"))
    assert "3000 more characters" in out.content and len(out.content) < 2200
    assert (await call(ReadTool(), ctx, file_path="empty.txt")).content == "empty.txt is empty."


async def test_read_caps_huge_files(work: Path) -> None:
    (work / "big.txt").write_text("".join(f"{'y' * 100} {i}\n" for i in range(5000)))
    out = await call(ReadTool(), make_ctx(work), file_path="big.txt")
    assert len(out.content) < 70_000
    assert "continue with offset=" in out.content.splitlines()[-1]


async def test_read_refuses_binary_folders_and_missing(work: Path) -> None:
    (work / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (work / "folder").mkdir()
    ctx = make_ctx(work)
    binary = await call(ReadTool(), ctx, file_path="blob.bin")
    assert binary.is_error and "binary" in binary.content
    folder = await call(ReadTool(), ctx, file_path="folder")
    assert folder.is_error and "Glob" in folder.content
    missing = await call(ReadTool(), ctx, file_path="nope.txt")
    assert missing.is_error and "not found" in missing.content


def test_read_rejects_bad_input() -> None:
    with pytest.raises(ValidationError):
        ReadTool().parse({"file_path": "a", "offset": 0})
    with pytest.raises(ValidationError):
        ReadTool().parse({"file_path": "a", "extra": 1})


# -- Write and Edit ------------------------------------------------------------------------


async def test_write_creates_parents_and_overwrites(work: Path) -> None:
    ctx = make_ctx(work)
    out = await call(WriteTool(), ctx, file_path="deep/er/new.py", content="a = 1\r\nb = 2\n")
    assert not out.is_error and out.content.startswith("Created deep/er/new.py (2 lines")
    assert (work / "deep/er/new.py").read_bytes() == b"a = 1\r\nb = 2\n"  # bytes as given
    again = await call(WriteTool(), ctx, file_path="deep/er/new.py", content="")
    assert again.content.startswith("Overwrote") and (work / "deep/er/new.py").read_text() == ""
    (work / "adir").mkdir()
    assert (await call(WriteTool(), ctx, file_path="adir", content="x")).is_error


async def test_edit_replaces_once_and_shows_the_change(work: Path) -> None:
    f = work / "m.py"
    f.write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    out = await call(
        EditTool(), make_ctx(work), file_path="m.py", old_string="return 2", new_string="return 3"
    )
    assert not out.is_error, out.content
    assert f.read_text().endswith("    return 3\n")
    assert "Edited m.py (1 replacement)" in out.content
    assert "     6\t    return 3" in out.content  # numbered snippet of the new text


async def test_edit_errors_the_model_can_fix(work: Path) -> None:
    f = work / "m.py"
    f.write_text("x = 1\nx = 1\n    y = 2\n")
    ctx = make_ctx(work)
    ambiguous = await call(EditTool(), ctx, file_path="m.py", old_string="x = 1", new_string="z")
    assert ambiguous.is_error and "occurs 2 times" in ambiguous.content
    assert "replace_all" in ambiguous.content
    missing = await call(EditTool(), ctx, file_path="m.py", old_string="q = 9", new_string="z")
    assert missing.is_error and "not found" in missing.content
    spaced = await call(EditTool(), ctx, file_path="m.py", old_string="y = 2  ", new_string="z")
    assert spaced.is_error and "whitespace" in spaced.content
    same = await call(EditTool(), ctx, file_path="m.py", old_string="x", new_string="x")
    assert same.is_error and "identical" in same.content
    empty = await call(EditTool(), ctx, file_path="m.py", old_string="", new_string="x")
    assert empty.is_error and "Write" in empty.content
    nofile = await call(EditTool(), ctx, file_path="none.py", old_string="a", new_string="b")
    assert nofile.is_error and "not found" in nofile.content
    assert f.read_text() == "x = 1\nx = 1\n    y = 2\n"  # nothing changed
    every = await call(
        EditTool(), ctx, file_path="m.py", old_string="x = 1", new_string="x = 2", replace_all=True
    )
    assert not every.is_error and "2 replacements" in every.content
    assert f.read_text() == "x = 2\nx = 2\n    y = 2\n"


async def test_edit_keeps_crlf_line_endings(work: Path) -> None:
    f = work / "win.txt"
    f.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    out = await call(
        EditTool(), make_ctx(work), file_path="win.txt", old_string="one\ntwo", new_string="1\n2"
    )
    assert not out.is_error, out.content
    assert f.read_bytes() == b"1\r\n2\r\nthree\r\n"


# -- Glob ----------------------------------------------------------------------------------


def _tree(root: Path, files: list[str]) -> None:
    for name in files:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"content of {name}\n")


async def test_glob_patterns_sorted_and_relative_to_workdir(work: Path) -> None:
    _tree(work, ["b.py", "a.py", "pkg/c.py", "pkg/sub/d.py", "pkg/e.txt", "nb.ipynb"])
    _tree(work, [".git/x.py", "node_modules/m.py", ".venv/lib/v.py", "pkg/__pycache__/c.py"])
    ctx = make_ctx(work)
    top = await call(GlobTool(), ctx, pattern="*.py")
    assert top.content.splitlines() == ["a.py", "b.py"]
    deep = await call(GlobTool(), ctx, pattern="**/*.py")
    assert deep.content.splitlines() == ["a.py", "b.py", "pkg/c.py", "pkg/sub/d.py"]
    inside = await call(GlobTool(), ctx, pattern="**/*.py", path="pkg")
    assert inside.content.splitlines() == ["pkg/c.py", "pkg/sub/d.py"]  # usable with Read
    braces = await call(GlobTool(), ctx, pattern="*.{ipynb,py}")
    assert braces.content.splitlines() == ["a.py", "b.py", "nb.ipynb"]
    named = await call(GlobTool(), ctx, pattern=".venv/**/*.py")
    assert named.content.splitlines() == [".venv/lib/v.py"]
    none = await call(GlobTool(), ctx, pattern="*.csv")
    assert not none.is_error and "No files match" in none.content
    bad = await call(GlobTool(), ctx, pattern="*", path="nowhere")
    assert bad.is_error


async def test_glob_caps_results(work: Path) -> None:
    _tree(work, [f"f{i:04}.txt" for i in range(300)])
    out = await call(GlobTool(), make_ctx(work), pattern="*.txt")
    lines = out.content.splitlines()
    assert len(lines) == 251 and lines[0] == "f0000.txt" and "50 more" in lines[-1]


# -- Grep ----------------------------------------------------------------------------------


async def test_grep_modes(work: Path) -> None:
    (work / "a.py").write_text("import os\nx = 1\nprint(x)\n")
    (work / "b.py").write_text("X = 2\n")
    (work / "notes.md").write_text("x marks\n")
    (work / "img.bin").write_bytes(b"x\x00x")
    ctx = make_ctx(work)
    files = await call(GrepTool(), ctx, pattern=r"\bx\b")
    assert files.content.splitlines() == ["a.py", "notes.md"]
    content = await call(GrepTool(), ctx, pattern=r"\bx\b", output_mode="content", glob="*.py")
    assert content.content.splitlines() == ["a.py:2:x = 1", "a.py:3:print(x)"]
    count = await call(GrepTool(), ctx, pattern=r"^x", output_mode="count", case_insensitive=True)
    assert count.content.splitlines() == ["a.py:1", "b.py:1", "notes.md:1"]
    ctxl = await call(GrepTool(), ctx, pattern="print", output_mode="content", context=1)
    assert ctxl.content.splitlines() == ["a.py-2-x = 1", "a.py:3:print(x)"]
    one = await call(GrepTool(), ctx, pattern="marks", path="notes.md", output_mode="content")
    assert one.content == "notes.md:1:x marks"
    nothing = await call(GrepTool(), ctx, pattern="zzz")
    assert not nothing.is_error and "No matches" in nothing.content
    bad = await call(GrepTool(), ctx, pattern="(unclosed")
    assert bad.is_error and "Invalid regular expression" in bad.content


async def test_grep_does_not_follow_symlinks_out(work: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2\n")
    (work / "link.txt").symlink_to(secret)
    (work / "dirlink").symlink_to(tmp_path)
    (work / "ok.txt").write_text("password=fine\n")
    out = await call(GrepTool(), make_ctx(work), pattern="password", output_mode="content")
    assert out.content == "ok.txt:1:password=fine"


async def test_search_respects_read_guard(work: Path) -> None:
    _tree(work, ["secrets/key.txt", "src/a.txt"])

    def guard(path: Path) -> bool:
        return "secrets" not in path.parts

    ctx = make_ctx(work, services=ToolServices(read_guard=guard))
    assert (await call(GrepTool(), ctx, pattern="content")).content == "src/a.txt"
    assert (await call(GlobTool(), ctx, pattern="**/*.txt")).content == "src/a.txt"


async def test_grep_caps_content(work: Path) -> None:
    (work / "many.txt").write_text("hit\n" * 1000)
    out = await call(GrepTool(), make_ctx(work), pattern="hit", output_mode="content")
    lines = out.content.splitlines()
    assert len(lines) == 251 and "stopped after 250" in lines[-1]
