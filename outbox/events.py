"""What a subscriber receives: one publish event as a typed, read-only value."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from publishing.public_events import OUTBOX_KINDS


@dataclass(frozen=True)
class PostEvent:
    """A change of a post the public sees (or a failure to make one), as delivered.

    ``post_id`` stays set after the post is deleted (the ``deleted`` event's post);
    ``version`` is the post's version the change made, where the event records it;
    ``by`` names who acted: an editor's user name, the scheduler node, or ``system``.
    ``delivery_id`` is the same on every attempt of this event for this subscriber.
    """

    id: int
    kind: str
    post_id: int | None
    at: datetime
    version: int | None
    by: str
    delivery_id: str = ""
    data: dict[str, Any] = field(default_factory=dict)


#: The columns :func:`from_row` reads.
EVENT_FIELDS = ("id", "kind", "post_id", "at", "data", "node", "user__username")


def post_of(kind: str, post_id: int | None, data: dict) -> int | None:
    """Return the post an event is about (a deleted post's event keeps it in ``data``)."""
    if post_id is not None:
        return post_id
    value = (data or {}).get("post")
    return value if isinstance(value, int) else None


def is_news(kind: str, data: dict) -> bool:
    """Return True if subscribers are told about an event of ``kind`` with ``data``.

    Events of public changes and failures are; a deleted post's only when it was live.
    """
    if kind not in OUTBOX_KINDS:
        return False
    if kind == "deleted":
        return (data or {}).get("was") == "published"
    return True


def from_row(row: dict, *, delivery_id: str = "") -> PostEvent:
    """Return the :class:`PostEvent` of a ``values(*EVENT_FIELDS)`` row."""
    data = row.get("data") or {}
    version = data.get("version")
    return PostEvent(
        id=row["id"],
        kind=row["kind"],
        post_id=post_of(row["kind"], row["post_id"], data),
        at=row["at"],
        version=version if isinstance(version, int) else None,
        by=row.get("user__username") or row.get("node") or "system",
        delivery_id=delivery_id,
        data=dict(data),
    )
