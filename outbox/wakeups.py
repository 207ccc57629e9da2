"""Hurry deliveries along: wake the dispatcher and the subscribers' jobs after a commit.

Each wake-up lowers a job's wake-up instant to now (``coordination.services.request_wakeup``)
and, on PostgreSQL, wakes its group's leader. A publish never waits for the dispatcher's
state row (held by its run, which looks again after any batch); the dispatcher, after its
commit, does wait for a subscriber's. A wake-up that fails
(the database went away) loses nothing: the jobs' schedules look again on their own.
"""

import logging
from collections.abc import Iterable

from coordination.dberrors import DATABASE_ERRORS
from coordination.services import request_wakeup
from outbox.job_names import DISPATCH_JOB

logger = logging.getLogger(__name__)


def wake(job_names: Iterable[str], *, skip_locked: bool = True) -> None:
    """Make each of ``job_names`` due now; log and go on if the database refuses.

    ``skip_locked=False`` waits for a state row another transaction holds (the job's own
    run, or a tick planning it) instead of skipping it: the dispatcher wakes subscribers so,
    because a run that already looked and found nothing would not look again.
    """
    names = sorted(set(job_names))
    if not names:
        return
    try:
        for name in names:
            request_wakeup(name, None, skip_locked=skip_locked)
    except DATABASE_ERRORS as exc:
        logger.warning("could not wake %s (%s); their schedules will look again", names, exc)


def wake_dispatcher(**_signal_arguments) -> None:
    """The receiver of ``publishing.public_events.events_committed``."""
    wake([DISPATCH_JOB])
