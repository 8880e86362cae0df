"""Contacts: search, look up, add and update the people the user knows."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult
from pydantic import Field

from toolweave.adapters.demo_servers.serve import ADDS, CHANGES, READS, Omittable, main, reply
from toolweave.adapters.demo_servers.store import JsonStore, count_call

app = MCPServer("contacts", instructions="The user's address book.", log_level="WARNING")

ContactId = Annotated[str, Field(description="Id of the contact, e.g. 'c2'.")]
FIELDS = ("name", "email", "phone", "company", "notes")

SEED = [
    (
        "Dana Whitfield",
        "dana.whitfield@atlas-eng.com",
        "+1 415 555 0134",
        "Atlas Engineering",
        "Project lead on Atlas.",
    ),
    (
        "Marco Rossi",
        "marco.rossi@example.it",
        "+39 02 5550 1987",
        "Rossi & Figli",
        "Supplier, Milan.",
    ),
    ("Priya Natarajan", "priya.n@northwind.io", "+44 20 7946 0321", "Northwind", "Met at PyCon."),
    ("Sam Okafor", "sam.okafor@gmail.com", "+1 646 555 0177", "", "Neighbour; has a spare key."),
    (
        "Lena Fischer",
        "lena.fischer@atlas-eng.com",
        "+49 30 5550 4410",
        "Atlas Engineering",
        "Finance; approves budgets.",
    ),
    (
        "Miller Motors",
        "service@millermotors.com",
        "+1 415 555 0190",
        "Miller Motors",
        "Car garage.",
    ),
]


def _seed() -> dict[str, Any]:
    contacts = {
        f"c{number}": {"id": f"c{number}", **dict(zip(FIELDS, values, strict=True))}
        for number, values in enumerate(SEED, start=1)
    }
    return {"contacts": contacts, "next_ids": {"c": len(SEED) + 1}}


store = JsonStore("contacts", _seed)


def _contact(contact_id: str) -> dict[str, Any]:
    contact: dict[str, Any] | None = store.data["contacts"].get(contact_id)
    if contact is None:
        raise ToolError(f"no contact with id {contact_id!r}; search_contacts finds ids")
    return contact


@app.tool(annotations=READS)
async def search_contacts(
    query: Annotated[str, Field(description="Part of a name, email, phone or company.")],
) -> CallToolResult:
    """Find contacts by name, email, phone number or company (case-insensitive)."""
    needle = query.lower()
    hits = [
        {key: c[key] for key in ("id", "name", "email", "company")}
        for c in store.data["contacts"].values()
        if any(needle in str(c[key]).lower() for key in FIELDS)
    ]
    return reply({"query": query, "contacts": hits})


@app.tool(annotations=READS)
async def get_contact(contact_id: ContactId) -> CallToolResult:
    """All the details of one contact."""
    return reply(_contact(contact_id))


@app.tool(annotations=ADDS)
async def add_contact(
    name: Annotated[str, Field(description="Full name.")],
    email: Annotated[Omittable[str], Field(description="Email address.")] = None,
    phone: Annotated[Omittable[str], Field(description="Phone number.")] = None,
    company: Annotated[Omittable[str], Field(description="Company or organisation.")] = None,
    notes: Annotated[Omittable[str], Field(description="Anything worth remembering.")] = None,
) -> CallToolResult:
    """Add a person to the address book and return the new contact with its id."""
    count_call("contacts", "add_contact")
    contact_id = store.next_id("c")
    values = {"name": name, "email": email, "phone": phone, "company": company, "notes": notes}
    contact = {"id": contact_id, **{key: value or "" for key, value in values.items()}}
    store.data["contacts"][contact_id] = contact
    store.save()
    return reply(contact)


@app.tool(annotations=CHANGES)
async def update_contact(
    contact_id: ContactId,
    name: Annotated[Omittable[str], Field(description="New full name.")] = None,
    email: Annotated[Omittable[str], Field(description="New email address.")] = None,
    phone: Annotated[Omittable[str], Field(description="New phone number.")] = None,
    company: Annotated[Omittable[str], Field(description="New company.")] = None,
    notes: Annotated[Omittable[str], Field(description="New notes, replacing the old.")] = None,
) -> CallToolResult:
    """Change some details of a contact; details left out stay as they are."""
    count_call("contacts", "update_contact")
    contact = _contact(contact_id)
    values = {"name": name, "email": email, "phone": phone, "company": company, "notes": notes}
    contact.update({key: value for key, value in values.items() if value is not None})
    store.save()
    return reply(contact)


if __name__ == "__main__":
    main(app)
