"""Hurry deliveries along: wake the dispatcher and the subscribers' jobs.

Each wake-up lowers a job's wake-up instant to now, or to a moment later
(``coordination.services.request_wakeup``), and, on PostgreSQL, wakes its group's leader.
None is lost to a state row held by a run:

- A change wakes the dispatcher after its commit (for :data:`DISPATCH_AFTER` later, so the
  changes of that moment share a run) and never waits for the dispatcher's state
  row. A wake-up that finds the row held by a dispatcher run is skipped; that run looks
  again after any batch, and a run that found nothing looks again once it has committed
  (:func:`wake_dispatcher_if_events_wait`), when every change whose wake-up it kept out
  is visible.
- The dispatcher wakes its subscribers in its own transaction (:func:`wake_with_commit`),
  so the wake-up commits with the deliveries it announces, even if the node dies right after.
  A transactional subscriber's row held by its run is left alone: that run looks for
  deliveries it did not see once it has committed (:func:`wake_if_new_deliveries`), so the
  dispatcher never waits for a subscriber's batch (a slow subscriber would hold up every
  other one); and the dispatcher tries once more after its own commit, without waiting,
  for a run that looked before the deliveries were committed. Any other row is held only
  for a moment (an outcome being recorded, a pause): its subscriber is woken after the
  dispatcher's commit, waiting for it.

A wake-up that fails (the database went away) loses nothing: the jobs' schedules look again
on their own.
"""

import logging
from collections.abc import Iterable
from datetime import timedelta
from functools import partial

from django.db import transaction

from coordination.dberrors import DATABASE_ERRORS
from coordination.registry import registry
from coordination.services import request_wakeup
from outbox.job_names import DISPATCH_JOB
from outbox.models import Delivery
from publishing.models import PublishEvent

logger = logging.getLogger(__name__)


#: How long after a change's commit the dispatcher runs: the changes committed within it
#: share one dispatcher run (a post a second is not a run a second, each competing with
#: the publishing it follows), and their events wait that much longer.
DISPATCH_AFTER = timedelta(milliseconds=250)


def wake(
    job_names: Iterable[str], *, skip_locked: bool = True, after: timedelta | None = None
) -> None:
    """Make each of ``job_names`` due now (or ``after`` from now); log and go on if the
    database refuses.

    ``skip_locked=False`` waits for a state row another transaction holds (the job's own
    run) instead of skipping it.
    """
    names = sorted(set(job_names))
    if not names:
        return
    try:
        for name in names:
            request_wakeup(name, None, skip_locked=skip_locked, after=after)
    except DATABASE_ERRORS as exc:
        logger.warning("could not wake %s (%s); their schedules will look again", names, exc)


def wake_with_commit(job_names: Iterable[str]) -> None:
    """Make each of ``job_names`` due now in the caller's transaction. One whose state row is
    held is woken once the transaction commits, waiting for the holder, unless its runs hold
    their row (transactional): then its run in progress looks again itself after its commit,
    and this transaction, once committed, tries once more without waiting, for a run that
    committed, and looked, before these deliveries were committed (a run that holds the row
    then will look after this commit, and see them)."""
    held = [
        name for name in sorted(set(job_names)) if not request_wakeup(name, None, skip_locked=True)
    ]
    brief = [name for name in held if not _runs_hold_their_row(name)]
    if brief:
        transaction.on_commit(partial(wake, brief, skip_locked=False), robust=True)
    holding = [name for name in held if _runs_hold_their_row(name)]
    if holding:
        transaction.on_commit(partial(wake, holding, skip_locked=True), robust=True)


def _runs_hold_their_row(job_name: str) -> bool:
    job = registry.get(job_name)
    return job is not None and job.transactional


def wake_if_new_deliveries(job_name: str, subscriber: str, *, seen_up_to: int) -> None:
    """Wake ``job_name`` if ``subscriber`` has open deliveries its run did not see (written
    after ``seen_up_to``, the newest it read): called once that run has committed, since the
    dispatcher's wake-up left the row the run held alone."""
    try:
        waiting = Delivery.objects.filter(
            subscriber=subscriber, finished_at__isnull=True, pk__gt=seen_up_to
        ).exists()
    except DATABASE_ERRORS as exc:
        logger.warning("could not look for new deliveries (%s); the schedule will", exc)
        return
    if waiting:
        wake([job_name], skip_locked=False)


def wake_dispatcher(**_signal_arguments) -> None:
    """The receiver of ``publishing.public_events.events_committed``."""
    wake([DISPATCH_JOB], after=DISPATCH_AFTER)


def wake_dispatcher_if_events_wait() -> None:
    """Wake the dispatcher if an event waits (after a dispatcher run that found none)."""
    try:
        waiting = PublishEvent.objects.filter(dispatched_at__isnull=True).exists()
    except DATABASE_ERRORS as exc:
        logger.warning("could not look for undispatched events (%s); the schedule will", exc)
        return
    if waiting:
        wake([DISPATCH_JOB], skip_locked=False)
