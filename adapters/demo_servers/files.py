"""Files: list, read, write, move, delete and search files in one sandboxed folder.

Paths are relative to the folder (``$TOOLWEAVE_DEMO_STATE/files``); a path that leads
outside it, through ``..`` or a symbolic link, is refused.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from toolweave.adapters.demo_servers.serve import CHANGES, READS, REMOVES, main, reply
from toolweave.adapters.demo_servers.store import count_call, state_dir

app = MCPServer("files", instructions="A folder of the user's documents.", log_level="WARNING")

FilePath = Annotated[str, Field(description="Path inside the folder, e.g. 'reports/q3.csv'.")]
MAX_READ_CHARS = 50_000

#: A move takes a file away from where it was: not additive, and not repeatable.
MOVES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)

SEED = {
    "README.md": "# My documents\n\nWork in `work/`, recipes in `recipes/`, lists at the top.\n",
    "todo.txt": "- renew passport\n- book car service\n- send Atlas budget draft to Dana\n",
    "work/atlas-budget-draft.md": (
        "# Atlas budget draft\n\n| item | cost (EUR) |\n|---|---|\n| engineering | 48,000 |\n"
        "| hardware | 12,500 |\n| travel | 6,000 |\n\nTotal: 66,500\n"
    ),
    "work/meeting-notes.md": (
        "# Atlas kickoff\n\nAttendees: Dana, Lena, me.\n"
        "Decisions: scope frozen; budget due Friday.\n"
    ),
    "work/q3-sales.csv": (
        "region,units,revenue\nNorth,1200,84000\nSouth,950,66500\nWest,1430,100100\n"
    ),
    "recipes/pancakes.txt": (
        "Pancakes: 200 g flour, 2 eggs, 300 ml milk, pinch of salt. Rest 20 min.\n"
    ),
    "recipes/tomato-soup.txt": "Tomato soup: 1 kg tomatoes, 1 onion, 2 garlic cloves, basil.\n",
}


def _root() -> Path:
    root = state_dir() / "files"
    if not root.exists():
        for name, text in SEED.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    return root.resolve()


def _path(path: str, *, must_exist: bool = True) -> Path:
    root = _root()
    target = (root / path.strip().lstrip("/")).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"{path!r} is outside the files folder")
    if must_exist and not target.exists():
        raise ToolError(f"{path!r} does not exist; list_files shows what is there")
    return target


def _relative(target: Path) -> str:
    return target.relative_to(_root()).as_posix() or "."


@app.tool(annotations=READS)
async def list_files(
    path: Annotated[str, Field(description="Folder to list; '.' is the top.")] = ".",
) -> CallToolResult:
    """List the files and folders in a folder, with sizes in bytes."""
    folder = _path(path)
    if not folder.is_dir():
        raise ToolError(f"{path!r} is a file, not a folder")
    entries = [
        {
            "name": entry.name,
            "type": "folder" if entry.is_dir() else "file",
            "size": 0 if entry.is_dir() else entry.stat().st_size,
        }
        for entry in sorted(folder.iterdir())
    ]
    return reply({"path": _relative(folder), "entries": entries})


@app.tool(annotations=READS)
async def read_file(path: FilePath) -> CallToolResult:
    """Read a text file."""
    target = _path(path)
    if target.is_dir():
        raise ToolError(f"{path!r} is a folder; list_files lists it")
    text = target.read_text(encoding="utf-8", errors="replace")
    truncated = len(text) > MAX_READ_CHARS
    return reply(
        {"path": _relative(target), "content": text[:MAX_READ_CHARS], "truncated": truncated}
    )


@app.tool(annotations=CHANGES)
async def write_file(
    path: FilePath,
    content: Annotated[str, Field(description="The whole new text of the file.")],
) -> CallToolResult:
    """Write a text file, creating folders as needed; an existing file is replaced."""
    count_call("files", "write_file")
    target = _path(path, must_exist=False)
    if target.is_dir():
        raise ToolError(f"{path!r} is a folder")
    existed = target.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    return reply({"path": _relative(target), "bytes": target.stat().st_size, "replaced": existed})


@app.tool(annotations=MOVES)
async def move_file(
    source: Annotated[str, Field(description="Path of the file or folder to move.")],
    destination: Annotated[str, Field(description="New path; it must not exist yet.")],
) -> CallToolResult:
    """Move or rename a file or folder; never overwrites."""
    count_call("files", "move_file")
    origin, target = _path(source), _path(destination, must_exist=False)
    if target.exists():
        raise ToolError(f"{destination!r} already exists; choose another name")
    if origin == _root():
        raise ToolError("the top folder cannot be moved")
    moved = _relative(origin)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(origin, target)
    return reply({"moved": moved, "to": _relative(target)})


@app.tool(annotations=REMOVES)
async def delete_file(path: FilePath) -> CallToolResult:
    """Delete a file, or an empty folder."""
    count_call("files", "delete_file")
    target = _path(path)
    if target == _root():
        raise ToolError("the top folder cannot be deleted")
    if target.is_dir():
        if any(target.iterdir()):
            raise ToolError(f"folder {path!r} is not empty; delete its files first")
        target.rmdir()
    else:
        target.unlink()
    return reply({"deleted": path})


@app.tool(annotations=READS)
async def search_files(
    query: Annotated[str, Field(description="Text to find in file names and contents.")],
) -> CallToolResult:
    """Find files whose name or text contains the query (case-insensitive), with matching lines."""
    needle = query.lower()
    root = _root()
    matches = []
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        name = file.relative_to(root).as_posix()
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
        hits = [
            {"line": number, "text": line.strip()[:200]}
            for number, line in enumerate(lines, start=1)
            if needle in line.lower()
        ][:5]
        if hits or needle in name.lower():
            matches.append({"path": name, "lines": hits})
        if len(matches) >= 50:
            break
    return reply({"query": query, "matches": matches})


if __name__ == "__main__":
    main(app)
