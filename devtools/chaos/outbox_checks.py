"""The soak's invariants of the publish-event outbox: every event reaches every subscriber,
the transactional one exactly once and without waiting for a fallback, the webhook's ids all
received and none recorded succeeded twice. ``invariants.INVARIANTS`` lists them."""

import uuid
from collections import Counter

from devtools.chaos.clock import clock_text
from devtools.chaos.config import DELIVERY_WAIT_BOUND, EVENT_SUBSCRIBER
from devtools.chaos.evidence import waited_behind, worker_disturbances
from devtools.chaos.soak import Soak
from devtools.chaos.webhooks import received_ids


def _published_events(soak: Soak) -> set[int]:
    return {
        pk
        for (pk,) in soak.query("SELECT id FROM publishing_publishevent WHERE kind = 'published'")
    }


def events_reach_every_subscriber(soak: Soak, end_db) -> tuple[bool, str]:
    """Every published event was dispatched and delivered to the transactional subscriber and
    the webhook (one succeeded delivery each), and no delivery is left open: nothing stuck."""
    events = _published_events(soak)
    delivered = Counter(
        event
        for event, subscriber in soak.query(
            "SELECT event_id, subscriber FROM outbox_delivery WHERE status = 'succeeded'"
            " AND subscriber IN (%s, %s)",
            (EVENT_SUBSCRIBER, soak.webhook_name),
        )
    )
    short = sorted(pk for pk in events if delivered[pk] != 2)
    undispatched = soak.scalar(
        "SELECT count(*) FROM publishing_publishevent WHERE dispatched_at IS NULL"
    )
    left_open = soak.scalar("SELECT count(*) FROM outbox_delivery WHERE finished_at IS NULL")
    detail = f"{len(events)} events, {undispatched} undispatched, {left_open} deliveries open"
    if short:
        detail += f", {len(short)} not delivered to both: {short[:5]}"
    return bool(events) and not short and not undispatched and not left_open, detail


def deliveries_without_fallback(soak: Soak, end_db) -> tuple[bool, str]:
    """An event published with no fault near reached the transactional subscriber within
    DELIVERY_WAIT_BOUND: its wake-ups (the dispatcher's, then the subscriber's) were not lost,
    so it did not wait for a fallback schedule. Events whose wait a fault may explain (one of
    WORKER_DISRUPTIONS began before the bound passed) are left out."""
    spans = worker_disturbances(soak)
    checked, excluded, worst, over = 0, 0, (0.0, 0), []
    for event_id, at, finished_at, dispatched_at in soak.query(
        "SELECT e.id, e.at, d.finished_at, e.dispatched_at FROM publishing_publishevent e"
        " JOIN outbox_delivery d"
        " ON d.event_id = e.id AND d.subscriber = %s AND d.status = 'succeeded'"
        " WHERE e.kind = 'published'",
        (EVENT_SUBSCRIBER,),
    ):
        published = soak.local_time(at)
        if waited_behind(spans, published, published + DELIVERY_WAIT_BOUND):
            excluded += 1
            continue
        checked += 1
        wait = (finished_at - at).total_seconds()
        worst = max(worst, (wait, event_id))
        if wait > DELIVERY_WAIT_BOUND:
            dispatched = (dispatched_at - at).total_seconds()
            over.append((wait, event_id, dispatched, soak.local_time(at)))
    if over:
        wait, event_id, dispatched, published = max(over)
        return False, (
            f"{len(over)} of {checked} waited over {DELIVERY_WAIT_BOUND:.0f} s with no fault"
            f" near; worst event {event_id} {wait:.1f} s (published at {clock_text(published)},"
            f" dispatched {dispatched:.1f} s after)"
        )
    return True, f"{checked} events, max {worst[0]:.2f} s; {excluded} with a fault near left out"


def transactional_subscriber_once(soak: Soak, end_db) -> tuple[bool, str]:
    """The transactional subscriber's write of each published event committed exactly once:
    no event lost, none doubled, whatever was killed, frozen or cut off mid-delivery."""
    events = _published_events(soak)
    effects = Counter(
        job.removeprefix("event:")
        for (job,) in soak.query("SELECT job FROM jobsapp_effect WHERE job LIKE 'event:%%'")
    )
    doubled = sorted(int(pk) for pk, n in effects.items() if n > 1)
    missing = sorted(pk for pk in events if str(pk) not in effects)
    detail = f"{len(events)} events, {len(doubled)} twice, {len(missing)} missing"
    if doubled or missing:
        detail += f": {(doubled + missing)[:5]}"
    return bool(events) and not doubled and not missing, detail


def webhook_ids_received(soak: Soak, end_db) -> tuple[bool, str]:
    """Every webhook delivery id reached the receiver (at least once: a retry sends the same
    id), and none was recorded succeeded twice."""
    ids = {
        uuid.UUID(str(value)).hex
        for (value,) in soak.query(
            "SELECT delivery_id FROM outbox_delivery WHERE subscriber = %s", (soak.webhook_name,)
        )
    }
    received = received_ids(soak.webhooks)
    requests = len(soak.webhooks.requests)
    twice = soak.query(
        "SELECT delivery_id FROM outbox_webhookattempt WHERE ok = %s"
        " GROUP BY delivery_id HAVING count(*) > 1",
        (True,),
    )
    unseen = ids - received
    detail = f"{len(ids)} ids, {requests} requests, {len(unseen)} never received"
    detail += f", {len(twice)} succeeded twice"
    return bool(ids) and not unseen and not twice, detail
