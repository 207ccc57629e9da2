"""Claim-first jobs that run until their node stops: in the leader's threads (``hatest_killed``)
and on worker processes (``hatest_killed_workers``, and ``hatest_killed_workers_other`` beside
it).

Each run is reliably in flight when a test kills its node, and a SIGTERM (``should_stop()``)
ends it at once, so stopping the processes after the test takes no grace period.
"""

import threading
from datetime import timedelta

from coordination.registry import job
from coordination.schedules import every
from tests.support.schedules import ON_REQUEST_ONLY

GROUP = "hatest_killed"


def _until_stopped(ctx) -> None:
    ctx.logger.info("run of %s slot %s in flight", ctx.job.name, ctx.slot.isoformat())
    for _ in range(600):
        if ctx.should_stop():
            return
        threading.Event().wait(0.1)


@job(name="killed.every2s", group=GROUP, schedule=every(timedelta(seconds=2)))
def every2s(ctx):
    """Every 2 s, claim first; runs until its node stops (its later slots come due meanwhile)."""
    _until_stopped(ctx)


@job(
    name="killed.retried",
    group=GROUP,
    schedule=ON_REQUEST_ONLY,
    retry_abandoned=True,
)
def retried(ctx):
    """Run when asked, claim first, retried when abandoned."""
    _until_stopped(ctx)


#: A group of its own, on worker processes: a test kills the worker (or its node) mid-run.
WORKERS_GROUP = "hatest_killed_workers"


@job(
    name="killed.on_worker",
    group=WORKERS_GROUP,
    schedule=every(timedelta(seconds=1)),
    run_on="workers",
)
def on_worker(ctx):
    """Every second, claim first, on a worker process; runs until its process stops (its
    later slots come due meanwhile)."""
    _until_stopped(ctx)


#: A second group on the same worker processes: a worker killed mid-run holds runs of both.
OTHER_WORKERS_GROUP = "hatest_killed_workers_other"


@job(
    name="killed.on_worker_other",
    group=OTHER_WORKERS_GROUP,
    schedule=every(timedelta(seconds=1)),
    run_on="workers",
)
def on_worker_other(ctx):
    """As ``killed.on_worker``, in a group of its own with its own leader."""
    _until_stopped(ctx)


#: A group whose only job runs on request, on worker processes: its leader has nothing due,
#: and sleeps as long as it may, while the run is in flight.
ON_REQUEST_WORKERS_GROUP = "hatest_killed_workers_on_request"


@job(
    name="killed.on_worker_on_request",
    group=ON_REQUEST_WORKERS_GROUP,
    schedule=ON_REQUEST_ONLY,
    run_on="workers",
)
def on_worker_on_request(ctx):
    """Run when asked, claim first, on a worker process; runs until its process stops."""
    _until_stopped(ctx)
