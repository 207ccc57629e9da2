"""A subscriber's job: deliver its open deliveries, in order per post, with its policies.

Deciding is :func:`choose` (pure, over the open rows); doing is :func:`deliver_pending`.

- A **transactional** subscriber runs in its run's transaction: each event in a savepoint
  (a failing event undoes only its own writes), the succeeded rows marked in the same
  transaction. A crash rolls back the subscriber's writes and the marks together, and the
  next run delivers them again: each (event, subscriber) commits exactly once.
- A **claim-first** subscriber's rows are marked ``running`` with its run, and that mark
  committed, before any is delivered; each outcome is recorded after it. A run that ends
  without recording one (its node died) leaves the row running; once the ledger says that
  run is over, the attempt counts as failed and the retry policy decides: at most once per
  attempt.

A failed attempt is tried again after the job's ``retry_backoff`` (doubling, up to an hour)
while ``retries`` last, then given up (``failed``) with an alert. While one of a post's
events waits for its retry, that post's later events wait behind it: events are delivered
in order per post. Other posts' events go on.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import F

from coordination.alerts import Kind as AlertKind
from coordination.alerts import raise_alert
from coordination.clock import database_now
from coordination.models import JobRun
from coordination.registry import JobContext
from outbox.events import EVENT_FIELDS, from_row
from outbox.models import Delivery

logger = logging.getLogger(__name__)

S = Delivery.Status

#: How many open deliveries one run looks at.
BATCH_SIZE = 500

#: The error recorded for a claim-first attempt whose run ended without an outcome.
ATTEMPT_LOST = "the run delivering it ended without recording an outcome (its node stopped)"


@dataclass(frozen=True)
class Open:
    """An open delivery as :func:`choose` sees it."""

    pk: int
    event_id: int
    post_id: int | None
    status: str
    attempts: int
    due_at: datetime
    run_id: int | None


@dataclass(frozen=True)
class Choice:
    """What a run does: deliver ``take`` (in event order), settle ``lost`` attempts first."""

    take: list[Open]
    lost: list[Open]
    #: When the earliest delivery held back by its back-off is due (None: none is).
    next_due: datetime | None


def _order_key(row: Open):
    """Rows of one post are delivered in order; a row without a post is its own unit."""
    return ("post", row.post_id) if row.post_id is not None else ("event", row.event_id)


def choose(rows: list[Open], *, now: datetime, live_runs: set[int]) -> Choice:
    """Return which of a subscriber's open ``rows`` (in event order) to deliver now.

    A post's rows go in order: the first that cannot go now (waiting for its back-off,
    held by a live run, or a lost attempt to settle) holds back the post's later rows.
    """
    held: set = set()
    take: list[Open] = []
    lost: list[Open] = []
    next_due = None
    for row in rows:
        key = _order_key(row)
        if key in held:
            continue
        if row.status == S.RUNNING:
            held.add(key)
            if row.run_id not in live_runs:
                lost.append(row)
            continue
        if row.due_at > now:
            held.add(key)
            next_due = row.due_at if next_due is None else min(next_due, row.due_at)
            continue
        take.append(row)
    return Choice(take=take, lost=lost, next_due=next_due)


def _open_rows(subscriber: str) -> list[Open]:
    rows = (
        Delivery.objects.filter(subscriber=subscriber, finished_at__isnull=True)
        .order_by("subscriber", "finished_at", "event_id")
        .values_list("pk", "event_id", "post_id", "status", "attempts", "due_at", "run_id")
    )
    return [Open(*row) for row in rows[:BATCH_SIZE]]


def _live_runs(rows: list[Open]) -> set[int]:
    run_ids = {row.run_id for row in rows if row.status == S.RUNNING and row.run_id}
    if not run_ids:
        return set()
    alive = (JobRun.Status.QUEUED, JobRun.Status.RUNNING)
    return set(JobRun.objects.filter(pk__in=run_ids, status__in=alive).values_list("pk", flat=True))


def _events(rows: list[Open]) -> dict[int, dict]:
    from publishing.models import PublishEvent

    ids = [row.event_id for row in rows]
    return {e["id"]: e for e in PublishEvent.objects.filter(pk__in=ids).values(*EVENT_FIELDS)}


def deliver_pending(subscription, ctx: JobContext) -> datetime | None:
    """Deliver one batch of the subscriber's open deliveries; return when to look again."""
    job = ctx.job
    now = database_now()
    rows = _open_rows(job.name)
    choice = choose(rows, now=now, live_runs=_live_runs(rows))
    for row in choice.lost:
        _record_failure(job, row, row.attempts, ATTEMPT_LOST, now=now)
    take = choice.take
    if take and not job.transactional:
        take = _claim(take, _run_id(ctx))
    delivered, failed = _deliver(subscription, ctx, take, now=now)
    if delivered:
        ctx.logger.info("delivered %d event(s), %d failed", len(delivered), failed)
    if choice.lost or (len(rows) == BATCH_SIZE and take):
        return now
    return choice.next_due


def _run_id(ctx: JobContext) -> int | None:
    return (
        JobRun.objects.filter(job=ctx.job.name, slot=ctx.slot).values_list("pk", flat=True).first()
    )


def _claim(rows: list[Open], run_id: int | None) -> list[Open]:
    """Mark ``rows`` running with ``run_id`` and commit that; return the rows claimed."""
    with transaction.atomic():
        claimed = set(
            Delivery.objects.select_for_update()
            .filter(pk__in=[row.pk for row in rows], status=S.PENDING, finished_at__isnull=True)
            .values_list("pk", flat=True)
        )
        Delivery.objects.filter(pk__in=claimed).update(
            status=S.RUNNING, run_id=run_id, attempts=F("attempts") + 1
        )
    return [row for row in rows if row.pk in claimed]


def _deliver(subscription, ctx: JobContext, rows: list[Open], *, now: datetime):
    """Call the subscriber for each row in order; record outcomes; return (delivered, failed)."""
    job = ctx.job
    events = _events(rows)
    delivery_ids = dict(
        Delivery.objects.filter(pk__in=[row.pk for row in rows]).values_list("pk", "delivery_id")
    )
    held: set = set()
    delivered: list[int] = []
    failed = 0
    for row in rows:
        key = _order_key(row)
        if key in held:
            continue
        if ctx.should_stop():
            break
        event = from_row(events[row.event_id], delivery_id=str(delivery_ids[row.pk]))
        attempt = row.attempts + 1  # a claim-first claim counted it in the row already
        try:
            with transaction.atomic():
                subscription.handler(event, ctx)
        except Exception as exc:
            logger.warning(
                "subscriber %s failed on %s event %s (attempt %d): %s",
                job.name,
                event.kind,
                event.id,
                attempt,
                exc,
                exc_info=True,
            )
            held.add(key)
            failed += 1
            _record_failure(job, row, attempt, f"{type(exc).__name__}: {exc}", now=now)
            continue
        delivered.append(row.pk)
        if not job.transactional:
            _record_success([row.pk], now=now, counted=True)
    if job.transactional and delivered:
        _record_success(delivered, now=now, counted=False)
    return delivered, failed


def _record_success(pks: list[int], *, now: datetime, counted: bool) -> None:
    """Mark deliveries succeeded (``counted``: their attempt was counted when claimed)."""
    attempts = F("attempts") if counted else F("attempts") + 1
    Delivery.objects.filter(pk__in=pks).update(
        status=S.SUCCEEDED, finished_at=now, attempts=attempts, last_error="", run=None
    )


def _record_failure(job, row: Open, attempt: int, error: str, *, now: datetime) -> None:
    """Record failed attempt number ``attempt``: retry after the back-off, or give up."""
    retry_at = job.retry_at(attempt, now) if attempt >= 1 else now
    values = {"attempts": max(attempt, row.attempts), "last_error": error[:2000], "run": None}
    if retry_at is None:
        Delivery.objects.filter(pk=row.pk).update(status=S.FAILED, finished_at=now, **values)
        raise_alert(
            AlertKind.JOB_FAILING,
            job.name,
            f"Subscriber {job.name} gave up on event {row.event_id} (post {row.post_id}) "
            f"after {attempt} attempt(s).\n\nLast error:\n{error}",
        )
        return
    Delivery.objects.filter(pk=row.pk).update(status=S.PENDING, due_at=retry_at, **values)
