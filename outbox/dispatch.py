"""The dispatcher: hand each undispatched publish event to the subscribers declared now.

One run takes the oldest undispatched events (``dispatched_at IS NULL``, by id), writes one
:class:`~outbox.models.Delivery` per (event, subscriber that wants its kind), and marks the
events dispatched, all in the run's transaction with its ledger row: a crash rolls it all
back and the next run does it again, so each pair gets exactly one row. Reading a mark
rather than a cursor means an event whose transaction commits late (a lower id than ones
already dispatched) is still found. Events of other kinds are marked too, to nobody, so
the undispatched events stay one short range of their index.
"""

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from coordination.registry import Job
from outbox.events import is_news, post_of
from outbox.models import Delivery, WebhookEndpoint
from publishing.models import PublishEvent

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Undispatched:
    """An event the dispatcher read: what deciding its deliveries needs."""

    id: int
    kind: str
    post_id: int | None
    data: dict


@dataclass(frozen=True)
class Target:
    """Who may be told: a name in the delivery ledger, the kinds it wants, and (when it is
    told about some posts only) how to find which posts of a batch it wants."""

    name: str
    kinds: frozenset[str]
    audience: Callable[[set[int]], Iterable[int]] | None = None


def targets(subscribers: Iterable[Job], endpoints: Iterable[WebhookEndpoint] = ()) -> list[Target]:
    """Return the targets of subscribers' jobs and of (active) webhook endpoints."""
    found = [Target(job.name, job.func.kinds, job.func.audience) for job in subscribers]
    found += [Target(ep.ledger_name, frozenset(ep.events)) for ep in endpoints]
    return found


def active_endpoints() -> list[WebhookEndpoint]:
    """Return the webhook endpoints new events go to."""
    return list(WebhookEndpoint.objects.filter(active=True).only("pk", "events"))


@dataclass(frozen=True)
class Planned:
    """A delivery to write: this event, to this subscriber."""

    event_id: int
    subscriber: str
    post_id: int | None
    kind: str


def plan_deliveries(
    events: list[Undispatched],
    to: list[Target],
    audiences: Mapping[str, frozenset[int]] | None = None,
) -> list[Planned]:
    """Return the deliveries of ``events`` to the targets ``to``, in event order (pure).

    ``audiences`` names, for the targets told about some posts only, the posts they want.
    """
    audiences = audiences or {}
    planned = []
    for event in events:
        if not is_news(event.kind, event.data):
            continue
        post_id = post_of(event.kind, event.post_id, event.data)
        for target in to:
            if event.kind not in target.kinds:
                continue
            if target.name in audiences and post_id not in audiences[target.name]:
                continue
            planned.append(Planned(event.id, target.name, post_id, event.kind))
    return planned


def find_audiences(events: list[Undispatched], to: list[Target]) -> dict[str, frozenset[int]]:
    """Ask each target told about some posts only which posts of ``events`` it wants."""
    posts = {post_of(e.kind, e.post_id, e.data) for e in events} - {None}
    found = {}
    for target in to:
        if target.audience is None:
            continue
        try:
            found[target.name] = frozenset(target.audience(posts) if posts else ())
        except Exception:
            # Told about every post rather than none: nothing is lost, and the subscriber
            # decides again when it delivers.
            logger.exception("the audience of %s failed; it is told about every post", target.name)
    return found


def undispatched(limit: int) -> list[Undispatched]:
    """Return the oldest ``limit`` undispatched events."""
    rows = (
        PublishEvent.objects.filter(dispatched_at__isnull=True)
        .order_by("dispatched_at", "id")
        .values_list("id", "kind", "post_id", "data")[:limit]
    )
    return [Undispatched(pk, kind, post_id, data or {}) for pk, kind, post_id, data in rows]


@dataclass(frozen=True)
class Dispatched:
    """What one dispatch did: how many events, and which subscribers got deliveries."""

    events: int
    deliveries: int
    subscribers: frozenset[str]
    full: bool


def dispatch(to: list[Target], *, now: datetime, limit: int) -> Dispatched:
    """Write the deliveries of up to ``limit`` events and mark them dispatched at ``now``.

    Call it inside the transaction of the run (the dispatcher job is transactional).
    """
    events = undispatched(limit)
    planned = plan_deliveries(events, to, find_audiences(events, to))
    Delivery.objects.bulk_create(
        [
            Delivery(
                event_id=p.event_id,
                subscriber=p.subscriber,
                post_id=p.post_id,
                kind=p.kind,
                due_at=now,
                created_at=now,
            )
            for p in planned
        ],
        batch_size=1000,
    )
    if events:
        PublishEvent.objects.filter(
            dispatched_at__isnull=True, id__in=[event.id for event in events]
        ).update(dispatched_at=now)
    return Dispatched(
        events=len(events),
        deliveries=len(planned),
        subscribers=frozenset(p.subscriber for p in planned),
        full=len(events) == limit,
    )
