"""The publish jobs: put due posts live, take expired ones down, switch revisions.

Three jobs of the ``publishing`` group (one leader lock and loop, one job thread each, so
they run side by side), each inside one transaction with its run-ledger row:

- ``publishing.publish_due`` publishes posts due within ``INSTATIC_PUBLISH_ON_TIME_WINDOW``
  (10 s) of now, unpublishes, switches revisions and does other apps' due work (releases,
  each whole, in the run's transaction: :mod:`publishing.due_work`). It runs whenever
  something is due: it returns the next ``publish_at``, ``unpublish_at``, revision or other
  time and the scheduler sleeps until then, woken earlier by
  :func:`coordination.services.request_wakeup` when an editor schedules something sooner.
- ``publishing.publish_backlog`` publishes posts due longer ago (downtime, a bulk import, a
  burst bigger than the publish job could take in the window), newest due first, batch after
  batch. The publish job wakes it when it sees such posts.

So a backlog of 100,000 posts drains beside the posts that are due now, never in front of
them. Both take their rows ``FOR UPDATE SKIP LOCKED`` and change them
conditionally, so even overlapping shares could not publish a post twice.

A full batch returns "now", so a backlog is worked through batch after batch, each in its own
short transaction. A due post that another transaction holds locked (an editor saving it) is
skipped and looked at again a second later, not at once: that would run the job in a loop.
"""

import logging
from datetime import datetime, timedelta

from django.db.models import Q

from coordination import ledger
from coordination.clock import database_now
from coordination.models import JobState
from coordination.registry import JobContext, job
from coordination.schedules import WhenDue
from coordination.wording import duration_text
from publishing import agenda, batches, due_work, hooks, late, selectors
from publishing.conf import settings
from publishing.job_names import BACKLOG_JOB, LATE_JOB, PUBLISH_JOB
from publishing.models import PostRevision
from publishing.public_events import announce_events

logger = logging.getLogger(__name__)


def on_time_window() -> timedelta:
    """Return how long after its time a post is still the publish job's (not the backlog's)."""
    return timedelta(seconds=float(settings.PUBLISH_ON_TIME_WINDOW))


@job(
    name=PUBLISH_JOB,
    group="publishing",
    schedule=WhenDue(fallback=timedelta(seconds=60)),
    transactional=True,
)
def publish_due(ctx: JobContext) -> datetime | None:
    """Publish recently due posts, unpublish and revise one batch; return when next due."""
    batch_size = int(settings.PUBLISH_BATCH_SIZE)
    window = on_time_window()
    # One clock read for the run (each batch would read its own otherwise), and one read of
    # what is due: a kind of change with nothing due costs no statement.
    now = database_now()
    before = agenda.read_agenda(now=now, window=window)
    nothing = batches.BatchResult.nothing(now=now, batch_size=batch_size)
    published, unpublished, revised = nothing, nothing, nothing
    if before.due("publish", now):
        published = batches.publish_due(
            batch_size=batch_size, node=ctx.node, recent=window, now=now
        )
    if before.due("unpublish", now):
        unpublished = batches.unpublish_due(batch_size=batch_size, node=ctx.node, now=now)
    if before.due("revision", now):
        revised = batches.switch_due_revisions(batch_size=batch_size, node=ctx.node, now=now)
    others = due_work.run_due(before, now=now, node=ctx.node)
    changed = list(unpublished.done)
    if revised.done:
        changed += PostRevision.objects.filter(pk__in=revised.done).values_list(
            "post_id", flat=True
        )
    if changed:
        hooks.post_changed(changed, by_editor=False)
    if published.selected or unpublished.selected:
        logger.info(
            "[publish-scheduler] published %d post(s), unpublished %d, %d failed to publish",
            len(published.done),
            len(unpublished.done),
            len(published.failed),
        )
    if revised.selected:
        logger.info(
            "[publish-scheduler] %d scheduled revision(s) went live, %d superseded",
            len(revised.done),
            revised.selected - len(revised.done),
        )
    if published.done or published.failed or unpublished.done or revised.done:
        announce_events()
    if before.backlog:
        _wake_backlog_job(now)
    more = published.more or unpublished.more or revised.more or others.more
    # Nothing was due (a fallback run, or an editor's wake-up for later): nothing changed.
    after = before
    if not more and before.anything_due(now):
        after = agenda.read_agenda(now=now, window=window)
    return agenda.next_run(before=before, after=after, now=now, more=more, held=others.held)


@job(
    name=BACKLOG_JOB,
    group="publishing",
    schedule=WhenDue(fallback=timedelta(minutes=10)),
    transactional=True,
)
def publish_backlog(ctx: JobContext) -> datetime | None:
    """Publish one batch of posts due longer ago than the window; return now while more are."""
    published = batches.publish_due(
        batch_size=int(settings.PUBLISH_BACKLOG_BATCH_SIZE),
        node=ctx.node,
        overdue=on_time_window(),
    )
    if published.done or published.failed:
        announce_events()
    if published.selected:
        logger.info(
            "[publish-scheduler] published %d overdue post(s) from the backlog, %d failed",
            len(published.done),
            len(published.failed),
        )
    if published.more:
        return published.now
    if selectors.has_backlog(due_by=published.now - on_time_window()):
        return published.now + agenda.LOCKED_RETRY  # skipped rows another transaction held
    return None


@job(
    name=LATE_JOB,
    group="publishing",
    schedule=WhenDue(fallback=timedelta(seconds=60)),
    transactional=True,
)
def tell_late_posts(ctx: JobContext) -> datetime | None:
    """Record a ``late`` event for late posts not told yet; return when the next is late.

    The fallback bounds how long a post scheduled since the last run waits to be told.
    """
    now = database_now()
    told = late.record_late_posts(now=now, node=ctx.node)
    if told:
        announce_events()
        logger.warning(
            "[publish-scheduler] %d scheduled post(s) still not live %s past their time",
            told,
            duration_text(late.late_after().total_seconds()),
        )
    return late.next_late_at(now)


def _wake_backlog_job(now: datetime) -> None:
    """Make the backlog job due now, unless it is due already or running.

    While a backlog drains, the backlog job is due already (each full batch returns "now"):
    then its state row is left alone, because locking it here until this run commits would
    make the backlog job's next run find its row held and wait (the engine's check that no
    previous run is alive). Otherwise the row is locked without waiting, skipped when its
    run holds it: the publish job must not queue behind a backlog batch, and a running
    backlog job looks for more overdue posts itself before it ends.
    """
    state = JobState.objects.filter(name=BACKLOG_JOB)
    if state.filter(Q(next_due__lte=now) | Q(wake_at__lte=now)).exists():
        return
    ledger.record_wakeup_request(BACKLOG_JOB, now, skip_locked=True)
