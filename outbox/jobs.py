"""The dispatcher job: publish events to deliveries, woken by every commit that wrote some.

It runs in the ``plugins`` group (never in the publishing loop, so delivering never delays
a publish), in one transaction with its ledger row, and wakes the subscribers that got
deliveries once that transaction commits.
"""

from datetime import datetime, timedelta
from functools import partial

from django.db import transaction

from coordination.clock import database_now
from coordination.registry import JobContext, job
from coordination.schedules import WhenDue
from outbox import dispatch, wakeups
from outbox.job_names import DISPATCH_JOB
from outbox.subscriptions import subscriber_jobs

#: How many events one run dispatches.
DISPATCH_BATCH = 2000


@job(
    name=DISPATCH_JOB,
    group="plugins",
    schedule=WhenDue(fallback=timedelta(seconds=15)),
    transactional=True,
)
def dispatch_events(ctx: JobContext) -> datetime | None:
    """Dispatch one batch of events; return now while more may be waiting."""
    now = database_now()
    done = dispatch.dispatch(subscriber_jobs(), now=now, limit=DISPATCH_BATCH)
    if done.subscribers:
        transaction.on_commit(partial(wakeups.wake, done.subscribers), robust=True)
    if done.events:
        ctx.logger.info(
            "dispatched %d publish event(s) as %d deliveries", done.events, done.deliveries
        )
    # After a batch, look again at once: events committed while this one ran may be waiting,
    # and their wake-up found this run's state row held.
    return now if done.events else None
