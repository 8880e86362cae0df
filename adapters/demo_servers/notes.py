"""Notes: create, list, search, read, update and delete short notes with tags."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult
from pydantic import Field

from toolweave.adapters.demo_servers.serve import (
    ADDS,
    CHANGES,
    READS,
    REMOVES,
    Omittable,
    main,
    reply,
)
from toolweave.adapters.demo_servers.store import JsonStore, count_call

app = MCPServer("notes", instructions="The user's personal notes.", log_level="WARNING")

NoteId = Annotated[str, Field(description="Id of the note, e.g. 'n3'.")]


def _seed() -> dict[str, Any]:
    now = datetime.now().replace(microsecond=0)
    seed = [
        ("Groceries", "Milk, eggs, spinach, coffee beans, rice.", ["shopping"], 1),
        (
            "Project Atlas kickoff",
            "Scope agreed with Dana. Next: budget draft by Friday.",
            ["work"],
            3,
        ),
        ("Book recommendations", "The Left Hand of Darkness; Piranesi; Project Hail Mary.", [], 9),
        ("Car service", "Oil change due at 45,000 km. Garage: Miller Motors.", ["car", "todo"], 14),
    ]
    notes = {}
    for number, (title, body, tags, days_ago) in enumerate(seed, start=1):
        stamp = (now - timedelta(days=days_ago)).isoformat()
        notes[f"n{number}"] = {
            "id": f"n{number}",
            "title": title,
            "body": body,
            "tags": tags,
            "created": stamp,
            "updated": stamp,
        }
    return {"notes": notes, "next_ids": {"n": len(seed) + 1}}


store = JsonStore("notes", _seed)


def _note(note_id: str) -> dict[str, Any]:
    note: dict[str, Any] | None = store.data["notes"].get(note_id)
    if note is None:
        raise ToolError(f"no note with id {note_id!r}; list_notes shows the ids")
    return note


def _summary(note: dict[str, Any]) -> dict[str, Any]:
    return {key: note[key] for key in ("id", "title", "tags", "updated")}


@app.tool(annotations=READS)
async def list_notes(
    tag: Annotated[Omittable[str], Field(description="Only notes with this tag.")] = None,
) -> CallToolResult:
    """List the user's notes (id, title, tags), newest first."""
    notes = [n for n in store.data["notes"].values() if tag is None or tag in n["tags"]]
    notes.sort(key=lambda n: n["updated"], reverse=True)
    return reply({"notes": [_summary(n) for n in notes]})


@app.tool(annotations=READS)
async def search_notes(
    query: Annotated[str, Field(description="Words to look for.")],
) -> CallToolResult:
    """Find notes whose title, body or tags contain the query (case-insensitive)."""
    needle = query.lower()
    hits = [
        _summary(n)
        for n in store.data["notes"].values()
        if needle in " ".join([n["title"], n["body"], *n["tags"]]).lower()
    ]
    return reply({"query": query, "notes": hits})


@app.tool(annotations=READS)
async def read_note(note_id: NoteId) -> CallToolResult:
    """Read one note in full."""
    return reply(_note(note_id))


@app.tool(annotations=ADDS)
async def create_note(
    title: Annotated[str, Field(description="Short title.")],
    body: Annotated[str, Field(description="Text of the note.")],
    tags: Annotated[Omittable[list[str]], Field(description="Tags, e.g. ['work'].")] = None,
) -> CallToolResult:
    """Create a new note and return it with its id."""
    count_call("notes", "create_note")
    stamp = datetime.now().replace(microsecond=0).isoformat()
    note_id = store.next_id("n")
    note = {
        "id": note_id,
        "title": title,
        "body": body,
        "tags": list(tags or []),
        "created": stamp,
        "updated": stamp,
    }
    store.data["notes"][note_id] = note
    store.save()
    return reply(note)


@app.tool(annotations=CHANGES)
async def update_note(
    note_id: NoteId,
    title: Annotated[Omittable[str], Field(description="New title.")] = None,
    body: Annotated[Omittable[str], Field(description="New text, replacing the old.")] = None,
    tags: Annotated[Omittable[list[str]], Field(description="New tags, replacing the old.")] = None,
) -> CallToolResult:
    """Change a note's title, text or tags; arguments left out stay as they are."""
    count_call("notes", "update_note")
    note = _note(note_id)
    for key, value in (("title", title), ("body", body), ("tags", tags)):
        if value is not None:
            note[key] = list(value) if isinstance(value, list) else value
    note["updated"] = datetime.now().replace(microsecond=0).isoformat()
    store.save()
    return reply(note)


@app.tool(annotations=REMOVES)
async def delete_note(note_id: NoteId) -> CallToolResult:
    """Delete a note for good."""
    count_call("notes", "delete_note")
    note = _note(note_id)
    del store.data["notes"][note_id]
    store.save()
    return reply({"deleted": note_id, "title": note["title"]})


if __name__ == "__main__":
    main(app)
