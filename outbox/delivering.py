"""A subscriber's job: deliver its open deliveries, in order per post, with its policies.

Deciding is :func:`choose` (pure, over the open rows); doing is :func:`deliver_batch`.

- A **transactional** subscriber runs in its run's transaction: the batch in one savepoint
  (if an event fails, the batch is delivered again one savepoint per event, so a failing
  event undoes only its own writes), the succeeded rows marked in the same transaction. A
  crash rolls back the subscriber's writes and the marks together, and the next run
  delivers them again: each (event, subscriber) commits exactly once.
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
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import F

from coordination.alerts import Kind as AlertKind
from coordination.alerts import raise_alert
from coordination.clock import database_now
from coordination.models import JobRun
from coordination.priorities import YIELD_FOR, Priority, job_priority
from coordination.registry import JobContext
from outbox import wakeups, yielding
from outbox.events import EVENT_FIELDS, PostEvent, from_row
from outbox.models import Delivery

logger = logging.getLogger(__name__)

S = Delivery.Status

#: How many open deliveries one run looks at: a run's fixed costs (its ledger row, and on
#: workers its trip through the queue) are shared by this many.
BATCH_SIZE = 2000

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
    created_at: datetime | None = None


@dataclass(frozen=True)
class Subscriber:
    """How the deliveries of one name in the ledger are made: a subscriber's job, or a
    webhook endpoint's.

    ``retry_at(row, attempt, now, exc)`` says when a failed attempt is tried again (None:
    give up; ``exc`` is what the attempt raised, None for an attempt lost with its node);
    ``give_up(row, attempt, error)`` is told when one is given up. ``savepoint``: run
    the handler in a savepoint, so a failure undoes its writes (off for webhooks, whose
    handler records each attempt, failed or not).
    """

    name: str
    handler: Callable[[PostEvent, JobContext], Any]
    transactional: bool
    retry_at: Callable[[Open, int, datetime, Exception | None], datetime | None]
    give_up: Callable[[Open, int, str], None]
    savepoint: bool = True
    #: End the batch after this many failures in a row (an endpoint that is down costs a
    #: few timeouts a run, not one per waiting delivery); None: go on.
    stop_after_failures: int | None = None
    #: Told a batch's events before any is delivered (a webhook reads their posts at once).
    prepare: Callable[[list[PostEvent]], None] | None = None
    #: Claim-first: how many successes are recorded together, in one transaction with
    #: ``flush(settled)`` (a webhook writes the attempts of those deliveries there): one
    #: commit per group, not two per delivery. Deliveries made by a node lost before their
    #: group is recorded stay claimed by a run that is over, so each is attempted again: at
    #: least once, as any claim-first attempt lost with its node.
    record_every: int = 1
    flush: Callable[[set[int]], None] | None = None
    #: Claim-first: how many posts' deliveries are made at once (see :func:`_attempts`).
    concurrency: int = 1
    #: Told each failure; True means the failure stops the subscriber until a person acts
    #: (a webhook endpoint that answered 410 is disabled): the row waits again, counted but
    #: due as before, and no further attempt starts.
    halt: Callable[[Exception], bool] | None = None
    #: The subscriber's rows are its alone while it runs (a webhook lane holds its
    #: endpoint): a row still running is from a holder that is gone, and claims carry no run.
    owns_rows: bool = False
    #: Called in the run's thread after each outcome (a lane renews its hold there).
    heartbeat: Callable[[], None] | None = None
    #: Its tier (``coordination.priorities``): below publishing, a batch waits while posts
    #: are going out (``outbox.yielding``).
    priority: Priority = Priority.JOBS


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
        .values_list(
            "pk", "event_id", "post_id", "status", "attempts", "due_at", "run_id", "created_at"
        )
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
    """Deliver one batch of a plugin subscriber's open deliveries; return when to look again."""
    job = ctx.job

    def give_up(row: Open, attempt: int, error: str) -> None:
        raise_alert(
            AlertKind.JOB_FAILING,
            job.name,
            f"Subscriber {job.name} gave up on event {row.event_id} (post {row.post_id}) "
            f"after {attempt} attempt(s).\n\nLast error:\n{error}",
        )

    subscriber = Subscriber(
        name=job.name,
        handler=subscription.handler,
        transactional=job.transactional,
        retry_at=lambda row, attempt, now, exc: job.retry_at(attempt, now),
        give_up=give_up,
        savepoint=subscription.atomic,
        priority=job_priority(job),
    )
    return deliver_batch(subscriber, ctx)


def deliver_batch(subscriber: Subscriber, ctx: JobContext) -> datetime | None:
    """Deliver one batch of ``subscriber``'s open deliveries; return when to look again.

    A transactional subscriber's batch must run inside the run's transaction. While posts
    are going out no batch starts (``outbox.yielding``): the run takes nothing and asks to
    look again ``YIELD_FOR`` later (a lane, which holds its endpoint, waits before calling).
    A batch under way ends early, keeping what it delivered, once posts fall due
    (``yielding.Lookout``).
    """
    now = database_now()
    if not subscriber.owns_rows and yielding.steps_aside(subscriber.priority):
        ctx.logger.debug("%s: posts are going out; delivering waits", subscriber.name)
        return now + timedelta(seconds=YIELD_FOR)
    rows = _open_rows(subscriber.name)
    live_runs = set() if subscriber.owns_rows else _live_runs(rows)
    choice = choose(rows, now=now, live_runs=live_runs)
    retries = [
        _record_failure(subscriber, row, row.attempts, ATTEMPT_LOST, now=now) for row in choice.lost
    ]
    take = choice.take
    if take and not subscriber.transactional:
        take = _claim(take, None if subscriber.owns_rows else _run_id(ctx))
    lookout = yielding.Lookout(subscriber.priority)
    delivered, failed = _deliver(subscriber, ctx, take, now=now, aside=lookout)
    retries += failed
    if delivered or failed:
        ctx.logger.info(
            "%s: delivered %d event(s), %d failed", subscriber.name, len(delivered), len(failed)
        )
    if lookout.stepped_aside:
        ctx.logger.debug("%s: posts are going out; the batch stops here", subscriber.name)
        return now + timedelta(seconds=YIELD_FOR)
    if len(rows) == BATCH_SIZE and take:
        return now
    if subscriber.transactional:
        # The dispatcher does not wait for the row this run holds to wake it: look for
        # deliveries written meanwhile once this run's commit frees the row.
        newest = max((row.pk for row in rows), default=0)
        transaction.on_commit(
            partial(
                wakeups.wake_if_new_deliveries, ctx.job.name, subscriber.name, seen_up_to=newest
            ),
            robust=True,
        )
    return min(filter(None, [choice.next_due, *retries]), default=None)


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


def _deliver(
    subscriber: Subscriber,
    ctx: JobContext,
    rows: list[Open],
    *,
    now: datetime,
    aside: Callable[[], bool] = lambda: False,
):
    """Call the handler for each row in order; record outcomes; return the rows delivered
    and the failed ones' retry times (None: given up). No attempt starts once ``aside()``
    (asked in this thread between outcomes) has said the batch steps aside."""
    events = _events(rows)
    delivery_ids = dict(
        Delivery.objects.filter(pk__in=[row.pk for row in rows]).values_list("pk", "delivery_id")
    )

    batch = {
        row.pk: from_row(events[row.event_id], delivery_id=str(delivery_ids[row.pk]))
        for row in rows
    }

    def event_of(row: Open) -> PostEvent:
        return batch[row.pk]

    if subscriber.prepare is not None and rows:
        subscriber.prepare(list(batch.values()))
    if subscriber.transactional and subscriber.savepoint and rows:
        delivered = _deliver_in_one_savepoint(subscriber, ctx, rows, event_of, aside)
        if delivered is not None:
            _record_success(delivered, now=now, counted=False)
            return delivered, []
    delivered: list[int] = []
    failed: list[datetime | None] = []
    attempted: set[int] = set()
    unrecorded: list[int] = []  # claim-first successes not recorded yet
    failed_now: set[int] = set()  # failures recorded since the last record()
    halt = threading.Event()

    def stop() -> bool:
        return halt.is_set() or ctx.should_stop()

    def record() -> None:
        # Only the attempts of outcomes recorded here are flushed: a success a sending thread
        # has made but this loop has not taken yet is written with its success, later, or
        # not at all if the node dies first (then it is sent again, and recorded once).
        with transaction.atomic():
            if subscriber.flush is not None:
                subscriber.flush({*unrecorded, *failed_now})
            _record_success(unrecorded, now=now, counted=True)
        unrecorded.clear()
        failed_now.clear()

    in_a_row = 0
    outcomes = _attempts(subscriber, ctx, rows, event_of, stop)
    try:
        for row, exc in outcomes:
            attempted.add(row.pk)
            if subscriber.heartbeat is not None:
                subscriber.heartbeat()
            if aside():
                halt.set()
            if exc is not None:
                in_a_row += 1
                if in_a_row == subscriber.stop_after_failures:
                    halt.set()
                attempt = row.attempts + 1  # a claim-first claim counted it in the row already
                if subscriber.halt is not None and subscriber.halt(exc):
                    halt.set()
                    _record_halted(row, attempt, _one_line(exc))
                else:
                    failed.append(
                        _record_failure(subscriber, row, attempt, _one_line(exc), now=now, exc=exc)
                    )
                failed_now.add(row.pk)
                if not subscriber.transactional:
                    record()  # a failure's attempt is written with it (failures are rare)
                continue
            in_a_row = 0
            delivered.append(row.pk)
            if not subscriber.transactional:
                unrecorded.append(row.pk)
                if len(unrecorded) >= subscriber.record_every:
                    record()
    finally:
        # Recording failed (the database went away): no further attempt starts.
        halt.set()
        outcomes.close()
    if subscriber.transactional and delivered:
        _record_success(delivered, now=now, counted=False)
    if not subscriber.transactional:
        record()
        _release([row.pk for row in rows if row.pk not in attempted])
    return delivered, failed


Outcome = tuple[Open, Exception | None]


def _attempt(subscriber: Subscriber, ctx: JobContext, row: Open, event: PostEvent):
    """Call the handler for ``row``'s event; return the exception it raised, or None."""
    try:
        if subscriber.savepoint:
            with transaction.atomic():
                subscriber.handler(event, ctx)
        else:
            subscriber.handler(event, ctx)
    except Exception as exc:
        logger.warning(
            "%s failed on %s event %s (attempt %d): %s",
            subscriber.name,
            event.kind,
            event.id,
            row.attempts + 1,
            exc,
            exc_info=not isinstance(exc, DeliveryRefused),
        )
        return exc
    return None


def _attempts(subscriber, ctx, rows: list[Open], event_of, stop) -> Iterator[Outcome]:
    """Attempt ``rows``, yielding each with its outcome; none starts once ``stop()``.

    A post's rows go in order, and after a failure its later rows wait. With a
    ``concurrency`` above one (a webhook), the batch starts with one attempt and, once it
    succeeded, the rest go that many posts at a time: an endpoint that is down still costs
    a few attempts a run, and one that answers is not held to one request at a time.
    """
    if subscriber.concurrency <= 1 or subscriber.transactional or len(rows) < 2:
        yield from _in_order(subscriber, ctx, rows, event_of, stop)
        return
    first, rest = rows[0], rows[1:]
    if stop():
        return
    exc = _attempt(subscriber, ctx, first, event_of(first))
    yield first, exc
    if exc is not None:
        key = _order_key(first)
        rest = [row for row in rest if _order_key(row) != key]
        yield from _in_order(subscriber, ctx, rest, event_of, stop)
    else:
        yield from _side_by_side(subscriber, ctx, rest, event_of, stop)


def _in_order(subscriber, ctx, rows: list[Open], event_of, stop) -> Iterator[Outcome]:
    held: set = set()
    for row in rows:
        key = _order_key(row)
        if key in held:
            continue
        if stop():
            return
        exc = _attempt(subscriber, ctx, row, event_of(row))
        if exc is not None:
            held.add(key)
        yield row, exc


def _side_by_side(subscriber, ctx, rows: list[Open], event_of, stop) -> Iterator[Outcome]:
    """Attempt each post's rows in order on its own thread, ``concurrency`` posts at once;
    yield the outcomes here, in the calling thread, as they come (the handler must not use
    the database: a webhook only sends)."""
    groups: dict = {}
    for row in rows:
        groups.setdefault(_order_key(row), []).append(row)
    outcomes: queue.Queue = queue.Queue()
    done = object()

    def run(group: list[Open]) -> None:
        try:
            for row in group:
                if stop():  # the caller's halt is set when it stops taking outcomes
                    return
                exc = _attempt(subscriber, ctx, row, event_of(row))
                outcomes.put((row, exc))
                if exc is not None:
                    return
        finally:
            outcomes.put(done)

    workers = min(subscriber.concurrency, len(groups))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=subscriber.name) as pool:
        for group in groups.values():
            pool.submit(run, group)
        running = len(groups)
        while running:
            item = outcomes.get()
            if item is done:
                running -= 1
            else:
                yield item


def _deliver_in_one_savepoint(
    subscriber, ctx, rows: list[Open], event_of, aside: Callable[[], bool]
) -> list[int] | None:
    """Deliver a transactional batch in one savepoint; return the rows delivered, or None
    if an event failed (the savepoint rolled back: the batch is then delivered one savepoint
    per event, which finds and records the failing one and undoes only its writes).

    Two statements fewer per event when nothing fails, which is nearly always.
    """
    delivered: list[int] = []
    try:
        with transaction.atomic():
            for row in rows:
                if ctx.should_stop() or aside():
                    break
                subscriber.handler(event_of(row), ctx)
                delivered.append(row.pk)
    except Exception:
        logger.debug("%s: an event of the batch failed; delivering one by one", subscriber.name)
        return None
    return delivered


def _release(pks: list[int]) -> None:
    """Give back claimed deliveries this run did not attempt (their post was held behind a
    failure, or the batch ended early): waiting again, their claim's count undone."""
    if pks:
        Delivery.objects.filter(pk__in=pks, status=S.RUNNING).update(
            status=S.PENDING, run=None, attempts=F("attempts") - 1
        )


class DeliveryRefused(Exception):
    """A delivery the other side refused or never answered: an expected failure (its
    message says what happened), logged without a traceback."""


def _one_line(exc: Exception) -> str:
    if isinstance(exc, DeliveryRefused):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _record_success(pks: list[int], *, now: datetime, counted: bool) -> None:
    """Mark deliveries succeeded (``counted``: their attempt was counted when claimed)."""
    if not pks:
        return
    attempts = F("attempts") if counted else F("attempts") + 1
    Delivery.objects.filter(pk__in=pks).update(
        status=S.SUCCEEDED, finished_at=now, attempts=attempts, last_error="", run=None
    )


def _record_halted(row: Open, attempt: int, error: str) -> None:
    """Record failed attempt number ``attempt`` that stopped its subscriber: the row waits
    again, due as it was, for the subscriber to be started again."""
    Delivery.objects.filter(pk=row.pk).update(
        status=S.PENDING, attempts=max(attempt, row.attempts), last_error=error[:2000], run=None
    )


def _record_failure(
    subscriber: Subscriber,
    row: Open,
    attempt: int,
    error: str,
    *,
    now: datetime,
    exc: Exception | None = None,
) -> datetime | None:
    """Record failed attempt number ``attempt``: retry after the back-off (return when), or
    give up (return None)."""
    retry_at = subscriber.retry_at(row, attempt, now, exc)
    values = {"attempts": max(attempt, row.attempts), "last_error": error[:2000], "run": None}
    if retry_at is None:
        Delivery.objects.filter(pk=row.pk).update(status=S.FAILED, finished_at=now, **values)
        subscriber.give_up(row, attempt, error)
        return None
    Delivery.objects.filter(pk=row.pk).update(status=S.PENDING, due_at=retry_at, **values)
    return retry_at
