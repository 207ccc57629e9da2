"""Helpers for engine tests: a recording job, one-registry declarations, ticks, due states."""

import threading
from datetime import timedelta

from coordination.clock import database_now
from coordination.models import JobRun, JobState
from coordination.registry import JobRegistry, make_job
from coordination.scheduler import Scheduler
from coordination.schedules import every

GROUP = "enginetest"


class Recorder:
    """A job function that records the slots it ran, optionally failing or blocking."""

    def __init__(self, *, fail: bool = False, block: threading.Event | None = None):
        self.slots = []
        self.fail = fail
        self.block = block
        self.contexts = []

    def __call__(self, ctx):
        self.slots.append(ctx.slot)
        self.contexts.append(ctx)
        if self.block is not None:
            self.block.wait(10)
        if self.fail:
            raise RuntimeError("boom from the job")


def declare(func, name="enginetest.job", **options):
    # Hourly by default: a test's own slot cannot be joined by the next one mid-test.
    options.setdefault("schedule", every(timedelta(hours=1)))
    reg = JobRegistry()
    job = reg.register(make_job(func, name=name, group=GROUP, **options))
    return reg, job


def tick(reg: JobRegistry, node_name: str = "engine-node") -> Scheduler:
    scheduler = Scheduler(groups=[GROUP], node_name=node_name, once=True, registry=reg)
    scheduler.run()
    return scheduler


def make_due(job, *, ago: timedelta, **extra) -> None:
    """Create the job's state as if the cluster had been down for ``ago``."""
    then = database_now() - ago
    # The latest slot at or before ``then``: due now, with every later slot missed.
    next_due = job.schedule.slots_between(then - timedelta(days=2), then, limit=1)[-1]
    JobState.objects.update_or_create(
        name=job.name,
        defaults={
            "group": GROUP,
            "schedule": job.schedule.describe(),
            "fingerprint": job.fingerprint,
            "next_due": next_due,
            **extra,
        },
    )


def ran(job) -> JobRun:
    """Return the one run of ``job`` that was not recorded as missed."""
    return JobRun.objects.exclude(status=JobRun.Status.MISSED).get(job=job.name)
