"""Helpers for engine tests: a recording job, one-registry declarations, ticks, due states.

No engine test may depend on where the wall clock falls. A schedule anchored at the Unix
epoch puts a slot boundary wherever the clock happens to be: a test that makes a slot due a
second ago and ticks just after the next boundary finds two slots due (a missed one and a
run) instead of one, once an hour for an hourly job, once a second for an every-second one.
:func:`centered_every` places the slots around the moment the test declares its job instead,
so the test's slots are fixed unless it stalls for half an interval.
"""

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.db import connection

from coordination.clock import database_now
from coordination.models import JobRun, JobState
from coordination.registry import JobRegistry, make_job
from coordination.scheduler import Scheduler
from coordination.schedules import CALENDAR_END, Every, Schedule

GROUP = "enginetest"


class CenteredEvery(Schedule):
    """Every ``interval``, on a grid placed so that ``now`` falls in the middle of an interval.

    The slot at or before ``now`` (:meth:`slot` ``(0)``) is half an interval back and the next
    one half an interval ahead; ``make_due(job, ago=k * interval)`` lands mid-interval too, so
    a test knows exactly which slots are due (``slot(-k)`` to ``slot(0)``) and can assert on
    them rather than on counts that shift with the clock. To the engine it is an ordinary
    periodic schedule: an :class:`Every` grid shifted by a constant, used only through the
    :class:`Schedule` interface, like any schedule a job declares.
    """

    def __init__(self, interval: timedelta, *, now: datetime | None = None):
        """Place the grid around ``now`` (default: the database's time, the engine's clock)."""
        self._grid = Every(interval)
        now = database_now() if now is None else now
        self._current = now - interval / 2
        # How far the epoch grid's slot at or before ``_current`` lies behind it.
        self._shift = self._current - self._grid.next_after(self._current - interval)

    @property
    def interval(self) -> timedelta:
        """Return the interval between slots."""
        return self._grid.interval

    def slot(self, n: int) -> datetime:
        """Return the slot ``n`` intervals after the one at or before the grid's ``now``."""
        return self._current + n * self.interval

    def slot_range(self, first: int, last: int) -> list[datetime]:
        """Return ``slot(first)`` to ``slot(last)``, both included."""
        return [self.slot(n) for n in range(first, last + 1)]

    def next_after(self, instant: datetime) -> datetime | None:
        """Return the first slot strictly after ``instant`` (None past the calendar's end)."""
        slot = self._grid.next_after(instant - self._shift)
        if slot is None or slot > CALENDAR_END - self._shift:
            return None
        return slot + self._shift

    def slots_between(
        self, start: datetime, end: datetime, *, limit: int | None = None
    ) -> list[datetime]:
        """Return the slots in ``[start, end]`` (the last ``limit``), by the grid's arithmetic."""
        shifted = self._grid.slots_between(start - self._shift, end - self._shift, limit=limit)
        return [slot + self._shift for slot in shifted]

    def iter_slots(self, start: datetime, before: datetime) -> Iterator[datetime]:
        """Yield the slots in ``[start, before)``, ascending."""
        for slot in self._grid.iter_slots(start - self._shift, before - self._shift):
            yield slot + self._shift

    def describe(self) -> str:
        """Return text such as ``every 1h from 2026-12-01T10:30:00.250000+00:00``."""
        return f"{self._grid.describe()} from {self._current.isoformat()}"

    def fingerprint(self) -> str:
        """Return the grid's fingerprint and its shift: another grid is another schedule."""
        return f"{self._grid.fingerprint()}+{self._shift.total_seconds()!r}"

    def __repr__(self) -> str:
        return f"CenteredEvery({self.interval!r}, now={self._current + self.interval / 2!r})"


def centered_every(interval: timedelta) -> CenteredEvery:
    """Return a schedule every ``interval`` whose slots are centred on the database's now."""
    return CenteredEvery(interval)


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
    """Declare one job in a registry of its own; return (registry, job).

    Hourly on a grid centred on now by default: a test's own slot cannot be joined by the next
    one unless the test stalls for half an hour, wherever the wall clock falls.
    """
    options.setdefault("schedule", centered_every(timedelta(hours=1)))
    reg = JobRegistry()
    job = reg.register(make_job(func, name=name, group=GROUP, **options))
    return reg, job


def tick(reg: JobRegistry, node_name: str = "engine-node") -> Scheduler:
    scheduler = Scheduler(groups=[GROUP], node_name=node_name, once=True, registry=reg)
    scheduler.run()
    return scheduler


def make_due(job, *, ago: timedelta, **extra) -> datetime:
    """Create the job's state as if the cluster had been down for ``ago``; return its due slot.

    With a :class:`CenteredEvery` schedule and ``ago`` a whole number of intervals ``k``, the
    due slot is ``slot(-k)`` and every slot up to ``slot(0)`` is due, whatever the clock says.
    """
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
    return next_due


def ran(job) -> JobRun:
    """Return the one run of ``job`` that was not recorded as missed."""
    return JobRun.objects.exclude(status=JobRun.Status.MISSED).get(job=job.name)


def ledger_slots(job, status: str | None = None) -> list[datetime]:
    """Return the slots of the job's ledger rows (only those with ``status`` if given), oldest
    first: what tests compare with the slots they expect, instead of counting rows."""
    runs = JobRun.objects.filter(job=job.name).order_by("slot")
    if status is not None:
        runs = runs.filter(status=status)
    return list(runs.values_list("slot", flat=True))


def keep_a_session(process):
    """Open a database session that counts as worker ``process``'s own (named after it on
    PostgreSQL, recorded for it on MySQL) and return it, open, for the caller to close.

    A worker process that serves keeps its threads' sessions (and its listening one) open;
    the leader's watch takes a live worker whose sessions it saw and now sees none of for a
    killed one. A worker in the test process has none of its own between batches (a tick's
    scheduler closes this thread's connection, which the worker's registering recorded as
    its own), so a test that ticks between its batches keeps this one open instead.
    """
    from coordination import nodesessions
    from coordination.liveness.sessions import listen_application_name
    from coordination.models import NodeSession

    params = connection.get_connection_params()
    if connection.vendor == "postgresql":
        params["application_name"] = listen_application_name(process.node.name)
        return connection.get_new_connection(params)
    if connection.vendor == "mysql":
        session = connection.get_new_connection(params)
        session.autocommit(True)
        nodesessions.record_raw(session, role=NodeSession.Role.WORK, identity=process.node)
        return session
    return None  # SQLite: no sessions to look at
