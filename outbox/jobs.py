"""The outbox's jobs: the dispatcher, the webhooks' sender, the authors' notifications.

The dispatcher hands publish events to deliveries, woken 250 ms after every commit that
wrote some (``wakeups.DISPATCH_AFTER``). It
runs in the ``plugins`` group (never in the publishing loop, so delivering never delays
a publish), in one transaction with its ledger row and with the wake-ups of the subscribers
that got deliveries (``outbox.wakeups``).
"""

from datetime import datetime, timedelta

from django.db import transaction

from coordination.clock import database_now
from coordination.conf import settings
from coordination.priorities import YIELD_FOR, Priority
from coordination.registry import JobContext, job, register_job
from coordination.schedules import WhenDue, hourly
from outbox import dispatch, notifications, retention, wakeups, yielding
from outbox.conf import settings as outbox_settings
from outbox.job_names import DISPATCH_JOB, NOTIFY_JOB, PRUNE_JOB, WEBHOOKS_JOB
from outbox.models import is_webhook
from outbox.subscriptions import DEFAULT_RETRIES, Subscription, subscriber_jobs

#: How many events one run dispatches.
DISPATCH_BATCH = 2000

#: The outbox's jobs run where plugin jobs do (``INSTATIC_PLUGIN_JOBS_RUN_ON``): on workers,
#: delivering uses other processes than the leader's, whose publishing thread it would
#: otherwise share the interpreter with.
RUN_ON = settings.PLUGIN_JOBS_RUN_ON


@job(
    name=DISPATCH_JOB,
    group="plugins",
    schedule=WhenDue(fallback=timedelta(seconds=15)),
    transactional=True,
    run_on=RUN_ON,
)
def dispatch_events(ctx: JobContext) -> datetime | None:
    """Dispatch one batch of events; return now while more may be waiting (and a moment
    later while posts are going out: ``outbox.yielding``)."""
    now = database_now()
    if yielding.steps_aside(Priority.JOBS):
        return now + timedelta(seconds=YIELD_FOR)
    to = dispatch.targets(subscriber_jobs(), dispatch.active_endpoints())
    done = dispatch.dispatch(to, now=now, limit=DISPATCH_BATCH)
    if done.subscribers:
        wakeups.wake_with_commit(
            WEBHOOKS_JOB if is_webhook(name) else name for name in done.subscribers
        )
    if not done.events:
        # Events committed while this run held its state row found it held and were not
        # woken for: look for them once this run's commit lets it see them.
        transaction.on_commit(wakeups.wake_dispatcher_if_events_wait, robust=True)
        return None
    ctx.logger.info("dispatched %d publish event(s) as %d deliveries", done.events, done.deliveries)
    # After a batch, look again at once, for the same reason.
    return now


@job(
    name=WEBHOOKS_JOB,
    group="plugins",
    schedule=WhenDue(fallback=timedelta(seconds=60)),
    run_on=RUN_ON,
    side_effects=True,
)
def send_webhooks(ctx: JobContext) -> datetime | None:
    """Start a lane for each endpoint with deliveries due; return when to look again.

    The run does not send: each endpoint's lane (:mod:`outbox.webhooks.lanes`) does, beside
    the others, so a slow endpoint holds up only its own deliveries, never another
    endpoint's nor this job's next run.
    """
    from outbox.webhooks import lanes

    return lanes.start_due_lanes()


@job(name=PRUNE_JOB, group="plugins", schedule=hourly(minute=41), run_on=RUN_ON)
def prune_outbox(ctx: JobContext) -> None:
    """Every hour, delete finished deliveries, attempts and people-told records older than
    ``INSTATIC_OUTBOX_RETENTION_DAYS``, in short batches."""
    before = retention.cutoff(database_now(), int(outbox_settings.OUTBOX_RETENTION_DAYS))
    deleted = retention.prune(before=before, should_stop=ctx.should_stop)
    if any(deleted.values()):
        ctx.logger.info(
            "pruned %d deliveries, %d webhook attempts and %d people-told records before %s",
            deleted["deliveries"],
            deleted["attempts"],
            deleted["told"],
            before.isoformat(),
        )


#: Claim-first (mail is not transactional): an email is sent once across the replicas, and
#: again only when its attempt failed or was lost with its node. Not atomic: each person told
#: is recorded as their email goes, so a retry tells only the others.
register_job(
    Subscription(
        notifications.notify_people,
        notifications.NOTIFIED_KINDS,
        audience=notifications.posts_with_people,
        atomic=False,
    ),
    name=NOTIFY_JOB,
    group="plugins",
    schedule=WhenDue(fallback=timedelta(seconds=60)),
    retries=DEFAULT_RETRIES,
    run_on=RUN_ON,
    side_effects=True,
)
