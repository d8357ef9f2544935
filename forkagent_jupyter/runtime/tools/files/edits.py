"""Editing tools Claude Code's agents name: MultiEdit (several Edits of one file, all or
none) and NotebookEdit (one cell of an `.ipynb` file on disk).

They write files, so they are asked about like Edit and Write: a call needs approval unless
a rule or the mode allows it, `acceptEdits` allows it, `Edit(...)` rules cover it, and its
path must stay inside the work directory. Each previews its call as the unified diff `run`
would write (for a notebook: the diff of the cell's source).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from ....messages_api.shapes import JSON
from ..base import Tool, ToolContext, ToolError
from .diff import unified_diff
from .paths import resolve_in
from .read_write import (
    EditInput,
    _edit_source,
    _file_lock,
    _FileInput,
    _FileTool,
    _io_error,
    _replace,
    _snippet,
)
from .search import display_path as _shown
from .search import tidy

__all__ = ["MultiEditTool", "NotebookEditTool"]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- MultiEdit -----------------------------------------------------------------------------


class OneEdit(_Input):
    old_string: str = Field(description="Exact text to find (as for Edit).")
    new_string: str = Field(description="Text to put in its place (must differ).")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class MultiEditInput(_FileInput):
    file_path: str = Field(min_length=1, description="File to change (relative or absolute).")
    edits: list[OneEdit] = Field(
        min_length=1,
        description="Edits applied in order, each to the text the previous one left; all of "
        "them apply or none does.",
    )


def _apply_all(path: Path, shown: str, args: MultiEditInput) -> tuple[str, str, int]:
    """(old text, new text, first changed offset) of the whole sequence; a ToolError naming
    the edit that does not apply (nothing is written then)."""
    text = old = None
    at = -1
    for i, edit in enumerate(args.edits, 1):
        one = EditInput(file_path=args.file_path, **edit.model_dump())
        try:
            if text is None:
                text = old = _edit_source(path, shown, one)  # the file's checks, once
            elif not one.old_string:
                raise ToolError("old_string is empty.")
            elif one.old_string == one.new_string:
                raise ToolError("old_string and new_string are identical.")
            done = _replace(text, shown, one)
        except ToolError as exc:
            raise ToolError(f"Edit {i} of {len(args.edits)}: {exc} Nothing was changed.") from None
        text = done.updated
        at = done.at if at < 0 else min(at, done.at)
    assert text is not None and old is not None
    return old, text, at


class MultiEditTool(_FileTool[MultiEditInput]):
    name = "MultiEdit"
    description = (
        "Make several exact-text replacements in one file in one step: each edit is like "
        "Edit's old_string/new_string and applies to the result of the one before it. If any "
        "edit does not match, none is applied. Prefer it over several Edit calls to one file."
    )
    input_model = MultiEditInput

    def describe(self, args: MultiEditInput) -> str:
        n = len(args.edits)
        return f"MultiEdit {tidy(args.file_path)} ({n} edit{'s' if n != 1 else ''})"

    async def preview(self, args: MultiEditInput, ctx: ToolContext) -> str:
        path = resolve_in(ctx.workdir, args.file_path)
        shown = _shown(ctx, path)

        def diff() -> str:
            old, new, _at = _apply_all(path, shown, args)
            return unified_diff(old, new, shown)

        return await asyncio.to_thread(diff)

    async def run(self, args: MultiEditInput, ctx: ToolContext) -> str:
        path = resolve_in(ctx.workdir, args.file_path)
        shown = _shown(ctx, path)

        def write() -> str:
            with _file_lock(path):
                _old, new, at = _apply_all(path, shown, args)
                try:
                    with path.open("w", encoding="utf-8", newline="") as f:
                        f.write(new)
                except OSError as exc:
                    raise _io_error("write", shown, exc) from None
            n = len(args.edits)
            return f"Edited {shown} ({n} edit{'s' if n != 1 else ''}).\n{_snippet(new, at, '')}"

        return await asyncio.to_thread(write)


# -- NotebookEdit --------------------------------------------------------------------------


class NotebookEditInput(_Input):
    notebook_path: str = Field(
        min_length=1, description="The .ipynb file (relative to the work directory or absolute)."
    )
    cell_id: str | None = Field(
        default=None,
        description="The id of the cell to change or delete; for insert, the new cell goes "
        "after it (at the top without one). A 0-based cell number ('3' or 'cell-3') works too.",
    )
    new_source: str = Field(default="", description="The cell's new source (not for delete).")
    cell_type: Literal["code", "markdown"] | None = Field(
        default=None, description="The cell's type: needed for insert; for replace, changes it."
    )
    edit_mode: Literal["replace", "insert", "delete"] = Field(
        default="replace", description="replace (default), insert a new cell, or delete one."
    )


class _Cell(TypedDict, total=False):
    """A notebook cell as nbformat writes it (a file may carry other keys, kept as they are)."""

    cell_type: str
    id: str
    metadata: dict[str, JSON]
    source: str | list[str]
    outputs: list[JSON]
    execution_count: int | None


class _Notebook(TypedDict, total=False):
    """An `.ipynb` document: the keys NotebookEdit reads (it checks that `cells` is a list;
    the rest it writes back as it found them)."""

    cells: list[_Cell]
    nbformat: int
    nbformat_minor: int


def _load_notebook(path: Path, shown: str) -> _Notebook:
    if path.suffix != ".ipynb":
        raise ToolError(f"{shown} is not a notebook (.ipynb); use Edit for other files.")
    if not path.is_file():
        raise ToolError(f"Notebook not found: {shown}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ToolError(f"{shown} is not a readable notebook: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ToolError(f"{shown} is not a notebook: it has no list of cells.")
    return cast(_Notebook, data)  # checked: a dict holding a list of cells


def _source(cell: _Cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _find(cells: list[_Cell], cell_id: str, shown: str) -> int:
    for i, cell in enumerate(cells):
        if cell.get("id") == cell_id:
            return i
    number = cell_id.removeprefix("cell-")
    if number.isdigit() and int(number) < len(cells):
        return int(number)
    ids = ", ".join(str(c.get("id", i)) for i, c in enumerate(cells[:20])) or "none"
    raise ToolError(f"No cell {cell_id!r} in {shown}. Cells: {ids}")


def _new_cell(cell_type: str, source: str, with_id: bool) -> _Cell:
    cell: _Cell = {"cell_type": cell_type, "metadata": {}, "source": source}
    if with_id:
        cell["id"] = secrets.token_hex(4)
    if cell_type == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    return cell


def _notebook_edit(data: _Notebook, args: NotebookEditInput, shown: str) -> tuple[str, str, str]:
    """Apply the edit to `data` in place: (what it did, the cell's old source, new source)."""
    cells = data["cells"]
    with_ids = (data.get("nbformat"), data.get("nbformat_minor", 0)) >= (4, 5)
    if args.edit_mode == "insert":
        if args.cell_type is None:
            raise ToolError("cell_type (code or markdown) is needed to insert a cell.")
        at = _find(cells, args.cell_id, shown) + 1 if args.cell_id is not None else 0
        cell = _new_cell(args.cell_type, args.new_source, with_ids)
        cells.insert(at, cell)
        return f"Inserted a {args.cell_type} cell at position {at}", "", args.new_source
    if args.cell_id is None:
        raise ToolError(f"cell_id is needed to {args.edit_mode} a cell.")
    i = _find(cells, args.cell_id, shown)
    old = _source(cells[i])
    if args.edit_mode == "delete":
        del cells[i]
        return f"Deleted cell {args.cell_id}", old, ""
    cell = cells[i]
    if args.cell_type is not None and args.cell_type != cell.get("cell_type"):
        cells[i] = cell = _new_cell(args.cell_type, args.new_source, False) | (
            {"id": cell["id"]} if "id" in cell else {}
        )
    cell["source"] = args.new_source
    if cell.get("cell_type") == "code":  # its outputs belonged to the old source
        cell["outputs"] = []
        cell["execution_count"] = None
    return f"Replaced the source of cell {args.cell_id}", old, args.new_source


class NotebookEditTool(Tool[NotebookEditInput]):
    name = "NotebookEdit"
    description = (
        "Change one cell of a Jupyter notebook file (.ipynb) on disk: replace its source "
        "(a code cell's outputs are cleared), insert a new cell after cell_id (or at the top), "
        "or delete it. Cells are named by their id (or 0-based number); Read the notebook "
        "first to see them. This edits the file, not the notebook you are running in."
    )
    input_model = NotebookEditInput

    def permission_subject(self, args: NotebookEditInput) -> str:
        return tidy(args.notebook_path)

    def paths(self, args: NotebookEditInput, ctx: ToolContext) -> list[Path]:
        return [resolve_in(ctx.workdir, args.notebook_path)]

    def describe(self, args: NotebookEditInput) -> str:
        cell = f" cell {args.cell_id}" if args.cell_id is not None else ""
        return f"NotebookEdit {tidy(args.notebook_path)}: {args.edit_mode}{cell}"

    async def preview(self, args: NotebookEditInput, ctx: ToolContext) -> str:
        path = resolve_in(ctx.workdir, args.notebook_path)
        shown = _shown(ctx, path)

        def diff() -> str:
            did, old, new = _notebook_edit(_load_notebook(path, shown), args, shown)
            return f"{did}:\n" + (unified_diff(old, new, f"{shown} (cell)") or "(no change)")

        return await asyncio.to_thread(diff)

    async def run(self, args: NotebookEditInput, ctx: ToolContext) -> str:
        path = resolve_in(ctx.workdir, args.notebook_path)
        shown = _shown(ctx, path)

        def write() -> str:
            with _file_lock(path):
                data = _load_notebook(path, shown)
                did, _old, _new = _notebook_edit(data, args, shown)
                text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
                try:
                    path.write_text(text, encoding="utf-8")
                except OSError as exc:
                    raise _io_error("write", shown, exc) from None
            return f"{did} of {shown} ({len(data['cells'])} cells now)."

        return await asyncio.to_thread(write)
