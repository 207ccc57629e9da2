"""Jobs of the ``hatest_workers`` group, declared ``run_on="workers"``, for real processes.

Each writes an ``Effect`` naming the node that ran it (``ctx.node``: the worker process), so
a test sees which process executed a slot and that no slot's effect was written twice.
``HATEST_SLOW_SECONDS`` sets how long the slow ones work (long enough to be killed mid-run).
"""

import threading
from datetime import timedelta

from django.conf import settings

from coordination.registry import job
from coordination.schedules import every
from tests.jobsapp.models import Effect
from tests.support.schedules import ON_REQUEST_ONLY

GROUP = "hatest_workers"


def _work(ctx, seconds: float) -> None:
    ctx.logger.info("run of %s slot %s in flight", ctx.job.name, ctx.slot.isoformat())
    deadline = threading.Event()
    steps = max(1, int(seconds / 0.05))
    for _ in range(steps):
        if ctx.should_stop():
            return
        deadline.wait(seconds / steps)


@job(
    name="workers.tick",
    group=GROUP,
    schedule=every(timedelta(seconds=1)),
    transactional=True,
    run_on="workers",
)
def tick(ctx):
    """Every second, transactionally: the effect commits with the run's ledger outcome."""
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
    _work(ctx, float(settings.HATEST_WORK_SECONDS))


@job(
    name="workers.slow",
    group=GROUP,
    schedule=every(timedelta(seconds=2)),
    transactional=True,
    run_on="workers",
    missed="all",
    missed_window=timedelta(minutes=2),
)
def slow(ctx):
    """Every 2 s, transactionally, working long enough to be killed or frozen mid-run."""
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
    _work(ctx, float(settings.HATEST_SLOW_SECONDS))


@job(
    name="workers.claimed",
    group=GROUP,
    schedule=every(timedelta(seconds=2)),
    run_on="workers",
    retry_abandoned=True,
)
def claimed(ctx):
    """Every 2 s, claim first (its effect is written at once), retried when abandoned."""
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
    _work(ctx, float(settings.HATEST_SLOW_SECONDS))


@job(
    name="workers.retried",
    group=GROUP,
    schedule=ON_REQUEST_ONLY,
    run_on="workers",
    retry_abandoned=True,
)
def retried(ctx):
    """Run on request, claim first, retried when abandoned: nothing else of its
    keeps it busy, so a retry is planned as soon as its abandoned run is found."""
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
    _work(ctx, float(settings.HATEST_SLOW_SECONDS))
