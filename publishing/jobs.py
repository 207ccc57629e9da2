"""The publish job: put due scheduled posts live, take expired ones down, switch revisions.

It runs in the ``publishing`` group (its own leader lock and loop), inside one transaction
with its run-ledger row, whenever something is due: it returns the next ``publish_at`` or
``unpublish_at`` and the scheduler sleeps until then, woken earlier by
:func:`coordination.services.request_wakeup` when an editor schedules something sooner.
A full batch returns "now", so a backlog is worked through batch after batch, each in its own
short transaction. A due post that another transaction holds locked (an editor saving it) is
skipped and looked at again a second later, not at once: that would run the job in a loop.
"""

import logging
from datetime import datetime, timedelta

from coordination.registry import JobContext, job
from coordination.schedules import WhenDue
from publishing import selectors, services
from publishing.conf import settings

logger = logging.getLogger(__name__)

#: How soon the job looks again at due posts it had to skip because their rows were locked.
LOCKED_RETRY = timedelta(seconds=1)


@job(
    name=services.PUBLISH_JOB,
    group="publishing",
    schedule=WhenDue(fallback=timedelta(seconds=60)),
    transactional=True,
)
def publish_due(ctx: JobContext) -> datetime | None:
    """Publish, unpublish and revise one batch of due posts; return when next due."""
    batch_size = int(settings.PUBLISH_BATCH_SIZE)
    published = services.publish_due(batch_size=batch_size, node=ctx.node)
    unpublished = services.unpublish_due(batch_size=batch_size, node=ctx.node)
    revised = services.switch_due_revisions(batch_size=batch_size, node=ctx.node)
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
    if published.more or unpublished.more or revised.more:
        return published.now
    next_due = selectors.next_due_at()
    if next_due is not None and next_due <= published.now:
        return published.now + LOCKED_RETRY  # still due, so skipped: locked by someone else
    return next_due
