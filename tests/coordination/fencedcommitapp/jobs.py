"""A transactional job of the ``hatest_fenced`` group: one effect per slot, in its transaction.

Missed slots all run (within a minute), so the slot a frozen leader held is the first one the
next leader runs.
"""

from datetime import timedelta

from coordination.registry import job
from coordination.schedules import every
from tests.jobsapp.models import Effect

GROUP = "hatest_fenced"


@job(
    name="fenced.tick",
    group=GROUP,
    schedule=every(timedelta(seconds=1)),
    transactional=True,
    missed="all",
    missed_window=timedelta(seconds=60),
)
def tick(ctx):
    """Every second: write one effect in the run's transaction."""
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
