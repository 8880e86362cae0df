"""Calendar: a day's events, free slots, creating and cancelling events."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult
from pydantic import Field

from toolweave.adapters.demo_servers.serve import ADDS, READS, REMOVES, Omittable, main, reply
from toolweave.adapters.demo_servers.store import JsonStore, count_call

app = MCPServer("calendar", instructions="The user's calendar.", log_level="WARNING")

Day = Annotated[str, Field(description="Date as YYYY-MM-DD, or 'today' / 'tomorrow'.")]
Clock = Annotated[str, Field(description="Time of day as HH:MM (24-hour).")]

# (title, days from seeding, start, end, attendees, location)
SEED = [
    ("Team standup", 0, "09:30", "09:45", ["Dana Whitfield"], "Video call"),
    ("Lunch with Marco", 0, "12:30", "13:30", ["Marco Rossi"], "Trattoria Da Gino"),
    ("Atlas budget review", 1, "10:00", "11:30", ["Dana Whitfield", "Lena Fischer"], "Room 4B"),
    ("Dentist", 2, "16:00", "16:30", [], "Dr. Alvarez, 12 Elm St"),
    ("Book club", 5, "18:00", "20:00", ["Sam Okafor"], "Sam's place"),
]


def _seed() -> dict[str, Any]:
    today = date.today()
    events = {}
    for number, (title, offset, start, end, attendees, location) in enumerate(SEED, start=1):
        events[f"e{number}"] = {
            "id": f"e{number}",
            "title": title,
            "date": (today + timedelta(days=offset)).isoformat(),
            "start": start,
            "end": end,
            "attendees": attendees,
            "location": location,
        }
    return {"events": events, "next_ids": {"e": len(SEED) + 1}}


store = JsonStore("calendar", _seed)


def _day(text: str | None) -> str:
    words = {"today": 0, "tomorrow": 1}
    if text is None or text.strip().lower() in words:
        return (
            date.today() + timedelta(days=words.get((text or "today").strip().lower(), 0))
        ).isoformat()
    try:
        return date.fromisoformat(text.strip()).isoformat()
    except ValueError:
        raise ToolError(f"{text!r} is not a date; use YYYY-MM-DD, 'today' or 'tomorrow'") from None


def _minutes(clock: str) -> int:
    try:
        moment = datetime.strptime(clock.strip(), "%H:%M")
    except ValueError:
        raise ToolError(f"{clock!r} is not a time; use HH:MM, e.g. 14:30") from None
    return moment.hour * 60 + moment.minute


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _events_on(day: str) -> list[dict[str, Any]]:
    events = [e for e in store.data["events"].values() if e["date"] == day]
    return sorted(events, key=lambda e: e["start"])


@app.tool(annotations=READS)
async def list_events(
    day: Annotated[Omittable[str], Field(description="Date as YYYY-MM-DD; default today.")] = None,
) -> CallToolResult:
    """List the events of one day (default today), in order."""
    when = _day(day)
    return reply({"date": when, "events": _events_on(when)})


@app.tool(annotations=READS)
async def find_free_slots(
    day: Day,
    duration_minutes: Annotated[int, Field(description="Length needed.", gt=0, le=720)] = 30,
    day_start: Annotated[str, Field(description="Earliest start, HH:MM.")] = "09:00",
    day_end: Annotated[str, Field(description="Latest end, HH:MM.")] = "17:00",
) -> CallToolResult:
    """Find free time between day_start and day_end that fits duration_minutes."""
    when = _day(day)
    cursor, end = _minutes(day_start), _minutes(day_end)
    slots = []
    for event in _events_on(when):
        start = _minutes(event["start"])
        if start - cursor >= duration_minutes and start <= end:
            slots.append({"start": _clock(cursor), "end": _clock(min(start, end))})
        cursor = max(cursor, _minutes(event["end"]))
    if end - cursor >= duration_minutes:
        slots.append({"start": _clock(cursor), "end": _clock(end)})
    return reply({"date": when, "duration_minutes": duration_minutes, "free": slots})


@app.tool(annotations=ADDS)
async def create_event(
    title: Annotated[str, Field(description="What the event is.")],
    day: Day,
    start: Clock,
    duration_minutes: Annotated[int, Field(description="Length in minutes.", gt=0, le=1440)] = 60,
    attendees: Annotated[
        Omittable[list[str]], Field(description="Names of people invited.")
    ] = None,
    location: Annotated[Omittable[str], Field(description="Where it takes place.")] = None,
) -> CallToolResult:
    """Put an event in the calendar; the reply lists events it overlaps with."""
    count_call("calendar", "create_event")
    when = _day(day)
    first = _minutes(start)
    last = first + duration_minutes
    if last > 24 * 60:
        raise ToolError("the event would run past midnight; shorten it or split it")
    conflicts = [
        e["id"]
        for e in _events_on(when)
        if _minutes(e["start"]) < last and first < _minutes(e["end"])
    ]
    event_id = store.next_id("e")
    event = {
        "id": event_id,
        "title": title,
        "date": when,
        "start": _clock(first),
        "end": _clock(last),
        "attendees": list(attendees or []),
        "location": location or "",
    }
    store.data["events"][event_id] = event
    store.save()
    return reply({"event": event, "overlaps_with": conflicts})


@app.tool(annotations=REMOVES)
async def cancel_event(
    event_id: Annotated[str, Field(description="Id of the event, e.g. 'e3'.")],
) -> CallToolResult:
    """Cancel (delete) an event."""
    count_call("calendar", "cancel_event")
    event = store.data["events"].pop(event_id, None)
    if event is None:
        raise ToolError(f"no event with id {event_id!r}; list_events shows the ids")
    store.save()
    return reply({"cancelled": event_id, "title": event["title"], "date": event["date"]})


if __name__ == "__main__":
    main(app)
