"""Jobs for multi-process tests, in their own ``hatest`` group (own lock, own loop).

They only run when a test starts ``runscheduler --group hatest``.
"""

import threading
from datetime import timedelta

from django.conf import settings

from coordination.registry import job
from coordination.schedules import every
from tests.jobsapp.models import Effect
from tests.support.schedules import ON_REQUEST_ONLY


@job(name="hatest.tick", group="hatest", schedule=every(timedelta(seconds=1)), transactional=True)
def tick(ctx):
    """Every second: write one effect in the run's transaction."""
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
    # Event.wait, not time.sleep: the wrong-clock test runs this under libfaketime, whose
    # clock_nanosleep wrapper rejects Python's absolute monotonic sleeps.
    threading.Event().wait(float(settings.HATEST_WORK_SECONDS))


@job(name="hatest.slow", group="hatest_slow", schedule=every(timedelta(seconds=2)))
def slow(ctx):
    """Every 2 s, claim first, then work for a while (for mid-job faults)."""
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
    threading.Event().wait(float(settings.HATEST_SLOW_SECONDS))


@job(
    name="hatest.crashy",
    group="hatest_crash",
    schedule=every(timedelta(seconds=2)),
    transactional=True,
    missed="all",
    missed_window=timedelta(seconds=30),
)
def crashy(ctx):
    """Every 2 s, transactionally, work long enough to be killed mid-run."""
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
    ctx.logger.info("working on slot %s", ctx.slot.isoformat())
    threading.Event().wait(float(settings.HATEST_SLOW_SECONDS))


@job(name="hatest.manual", group="hatest_cli", schedule=ON_REQUEST_ONLY)
def manual(ctx):
    """Runs only when asked to; fails when ``HATEST_FAIL=1``."""
    if settings.HATEST_FAIL:
        raise RuntimeError("the report server said no")
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
