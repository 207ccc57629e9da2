"""A leader that hears wake-ups does not read and plan every state again after each run.

A thousand runs due at the same instant finish one after another; a full tick after each
(every job state read, every job planned) cost the plugin group's leader more than the runs
themselves. Where ``NOTIFY`` reaches the leader (PostgreSQL), a run that finished as planned
(its job's next slot where the tick put it, nothing due behind it) only wakes the loop to
forget its worker; a run-now request or a slot come due behind a busy job still makes the
loop plan again as that job's run ends. Real scheduler threads on the real test database;
the state reads are counted on every connection the scheduler opens.
"""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.db.backends.signals import connection_created
from django.test import override_settings

from coordination import loop as loop_module
from coordination import services
from coordination.clock import database_now
from coordination.models import JobRun, JobState
from coordination.registry import JobRegistry, make_job
from coordination.scheduler import Scheduler
from coordination.schedules import every

pytestmark = pytest.mark.django_db(transaction=True)

GROUP = "bursttest"
JOBS = 8


def wait_until(predicate, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


class StateReads:
    """Count the ticks' reads of the group's job states, on every new connection."""

    def __init__(self):
        self.count = 0
        self._mutex = threading.Lock()

    def __enter__(self):
        connection_created.connect(self._watch, dispatch_uid=id(self))
        return self

    def __exit__(self, *exc):
        connection_created.disconnect(dispatch_uid=id(self))

    def _watch(self, sender, connection, **kwargs):
        connection.execute_wrappers.append(self._count)

    def _count(self, execute, sql, params, many, context):
        if '"busy_elsewhere"' in sql:
            with self._mutex:
                self.count += 1
        return execute(sql, params, many, context)


class Gates:
    """Job functions that each wait for their own gate, so runs end one at a time."""

    def __init__(self):
        self.gates: dict[str, threading.Event] = {}
        self.started: list[tuple[str, str]] = []
        self._mutex = threading.Lock()

    def func(self, name: str):
        gate = self.gates.setdefault(name, threading.Event())

        def run(ctx):
            with self._mutex:
                self.started.append((name, ctx.trigger))
            assert gate.wait(20), "the test never opened this run's gate"

        run.__qualname__ = f"gated_{name.replace('.', '_')}"
        return run

    def triggers(self, name: str) -> list[str]:
        with self._mutex:
            return [trigger for job, trigger in self.started if job == name]


def declare(gates: Gates, count: int) -> tuple[JobRegistry, list]:
    registry = JobRegistry()
    jobs = []
    for n in range(count):
        name = f"{GROUP}.job_{n}"
        job = make_job(gates.func(name), name=name, group=GROUP, schedule=every(timedelta(hours=1)))
        jobs.append(registry.register(job))
    return registry, jobs


def make_due(job) -> None:
    """Create the job's state with its latest slot at or before now due."""
    now = database_now()
    slot = job.schedule.slots_between(now - timedelta(days=1), now, limit=1)[-1]
    JobState.objects.update_or_create(
        name=job.name,
        defaults={
            "group": GROUP,
            "schedule": job.schedule.describe(),
            "fingerprint": job.fingerprint,
            "next_due": slot,
        },
    )


@pytest.fixture
def listening_leader(monkeypatch):
    """Only where NOTIFY reaches the leader; no safety-net tick during the test."""
    if connection.vendor != "postgresql":
        pytest.skip("needs postgresql: elsewhere every finished run makes a full tick")
    monkeypatch.setattr(loop_module, "REPLAN_WHILE_FINISHING", 3600.0)
    with override_settings(INSTATIC_NOTIFY_MAX_TICK=600):
        yield


def started_scheduler(registry: JobRegistry) -> Scheduler:
    scheduler = Scheduler(groups=[GROUP], node_name="burst-node", registry=registry)
    scheduler.start()
    return scheduler


def stopped(scheduler: Scheduler, gates: Gates) -> None:
    for gate in gates.gates.values():
        gate.set()
    scheduler.stop()
    scheduler.wait()
    scheduler.finish()


def succeeded(job) -> int:
    return JobRun.objects.filter(job=job.name, status=JobRun.Status.SUCCEEDED).count()


def test_runs_that_finish_as_planned_do_not_make_the_leader_read_its_states_again(
    listening_leader,
):
    gates = Gates()
    registry, jobs = declare(gates, JOBS)
    for job in jobs:
        make_due(job)
    with StateReads() as reads:
        scheduler = started_scheduler(registry)
        try:
            wait_until(lambda: len(gates.started) == JOBS)
            [loop] = scheduler.loops
            reads_while_running = reads.count
            for job in jobs:
                gates.gates[job.name].set()
                wait_until(lambda job=job: succeeded(job) == 1)
            wait_until(lambda: not loop.workers)  # the loop saw every run end
            assert reads.count == reads_while_running, "no tick after runs that ended as planned"
        finally:
            stopped(scheduler, gates)
    for job in jobs:
        assert JobState.objects.get(name=job.name).next_due > database_now()


def test_a_run_now_request_behind_a_busy_job_runs_as_soon_as_its_run_ends(listening_leader):
    gates = Gates()
    registry, [busy, other] = declare(gates, 2)
    make_due(busy)
    make_due(other)
    scheduler = started_scheduler(registry)
    try:
        wait_until(lambda: len(gates.started) == 2)
        assert services.request_run(busy.name, requested_by="editor")
        # The request's NOTIFY makes a tick, which finds the job busy and notes it.
        [loop] = scheduler.loops
        wait_until(lambda: busy.name in loop._due_behind)
        gates.gates[other.name].set()
        gates.gates[busy.name].set()
        wait_until(lambda: gates.triggers(busy.name) == ["schedule", "manual"])
    finally:
        stopped(scheduler, gates)
    [manual] = JobRun.objects.filter(job=busy.name, trigger=JobRun.Trigger.MANUAL)
    assert manual.status == JobRun.Status.SUCCEEDED
