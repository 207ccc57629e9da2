"""Jobs for multi-process tests, in their own ``hatest`` group (own lock, own loop).

They only run when a test starts ``runscheduler --group hatest``.
"""

import time
from datetime import timedelta

from django.conf import settings

from coordination.registry import job
from coordination.schedules import every
from tests.jobsapp.models import Effect


@job(name="hatest.tick", group="hatest", schedule=every(timedelta(seconds=1)), transactional=True)
def tick(ctx):
    """Every second: write one effect in the run's transaction."""
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
    time.sleep(float(getattr(settings, "HATEST_WORK_SECONDS", 0.05)))


@job(name="hatest.slow", group="hatest_slow", schedule=every(timedelta(seconds=1)))
def slow(ctx):
    """Every second, claim first, then work for a while (for mid-job faults)."""
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
    deadline = time.monotonic() + float(getattr(settings, "HATEST_SLOW_SECONDS", 1.5))
    while time.monotonic() < deadline:
        time.sleep(0.05)
