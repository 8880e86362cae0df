"""Messages: the user's inbox; list, read, send, and mark as read or unread."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from toolweave.adapters.demo_servers.serve import READS, main, reply
from toolweave.adapters.demo_servers.store import JsonStore, count_call

app = MCPServer("messages", instructions="The user's messages (email-like).", log_level="WARNING")

USER = "me@example.com"
MessageId = Annotated[str, Field(description="Id of the message, e.g. 'm2'.")]

SEED = [
    (
        "dana.whitfield@atlas-eng.com",
        "Atlas budget draft",
        "Hi! Could you send me the budget draft by Friday? Lena needs to approve it.",
        0,
        False,
    ),
    (
        "sam.okafor@gmail.com",
        "Parcel",
        "Your parcel is with me, come by any time after 6.",
        0,
        False,
    ),
    (
        "service@millermotors.com",
        "Service reminder",
        "Your car is due for its 45,000 km service. Reply to book a slot.",
        2,
        True,
    ),
    (
        "priya.n@northwind.io",
        "Slides from the talk",
        "As promised, the slides: https://example.com/slides.pdf",
        5,
        True,
    ),
]

#: Sending cannot be taken back and reaches people outside this server.
SENDS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
#: Sets a flag: repeating it changes nothing more, and nothing is lost.
FLAGS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def _seed() -> dict[str, Any]:
    now = datetime.now().replace(second=0, microsecond=0)
    inbox = {}
    for number, (sender, subject, body, days_ago, read) in enumerate(SEED, start=1):
        sent = now - timedelta(days=days_ago, hours=number)
        inbox[f"m{number}"] = {
            "id": f"m{number}",
            "from": sender,
            "to": USER,
            "subject": subject,
            "body": body,
            "date": sent.isoformat(),
            "read": read,
        }
    return {"inbox": inbox, "sent": {}, "next_ids": {"m": len(SEED) + 1}}


store = JsonStore("messages", _seed)


def _message(message_id: str) -> dict[str, Any]:
    message: dict[str, Any] | None = store.data["inbox"].get(message_id)
    if message is None:
        message = store.data["sent"].get(message_id)
    if message is None:
        raise ToolError(f"no message with id {message_id!r}; list_inbox shows the ids")
    return message


@app.tool(annotations=READS)
async def list_inbox(
    unread_only: Annotated[bool, Field(description="Only unread messages.")] = False,
) -> CallToolResult:
    """List inbox messages (id, sender, subject, date, read), newest first."""
    messages = [m for m in store.data["inbox"].values() if not (unread_only and m["read"])]
    messages.sort(key=lambda m: m["date"], reverse=True)
    keys = ("id", "from", "subject", "date", "read")
    return reply({"messages": [{key: m[key] for key in keys} for m in messages]})


@app.tool(annotations=READS)
async def read_message(message_id: MessageId) -> CallToolResult:
    """Read one message in full; it stays unread."""
    return reply(_message(message_id))


@app.tool(annotations=SENDS)
async def send_message(
    to: Annotated[str, Field(description="Recipient's email address.")],
    subject: Annotated[str, Field(description="Subject line.")],
    body: Annotated[str, Field(description="Text of the message.")],
) -> CallToolResult:
    """Send a message; it cannot be unsent."""
    count_call("messages", "send_message")
    if "@" not in to:
        raise ToolError(f"{to!r} is not an email address; search_contacts can find one")
    message_id = store.next_id("m")
    message = {
        "id": message_id,
        "from": USER,
        "to": to,
        "subject": subject,
        "body": body,
        "date": datetime.now().replace(microsecond=0).isoformat(),
        "read": True,
    }
    store.data["sent"][message_id] = message
    store.save()
    return reply({"sent": message_id, "to": to, "subject": subject})


@app.tool(annotations=FLAGS)
async def mark_read(
    message_id: MessageId,
    read: Annotated[bool, Field(description="False marks it unread again.")] = True,
) -> CallToolResult:
    """Mark an inbox message as read (or unread)."""
    count_call("messages", "mark_read")
    message = _message(message_id)
    message["read"] = read
    store.save()
    return reply({"id": message_id, "read": read})


if __name__ == "__main__":
    main(app)
