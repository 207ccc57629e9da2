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
from datetime import timedelta

import pytest

from coordination import services
from coordination.clock import database_now
from coordination.models import JobRun, JobState
from coordination.registry import JobRegistry, make_job
from coordination.scheduler import Scheduler
from tests.coordination.enginekit import centered_every, make_due
from tests.support.polling import wait_until
from tests.support.statements import StatementCount

pytestmark = pytest.mark.django_db(transaction=True)

GROUP = "bursttest"
JOBS = 8


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
        job = make_job(
            gates.func(name), name=name, group=GROUP, schedule=centered_every(timedelta(hours=1))
        )
        jobs.append(registry.register(job))
    return registry, jobs


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
        make_due(job, ago=timedelta(0), group=GROUP)
    with StatementCount('"busy_elsewhere"') as reads:
        scheduler = started_scheduler(registry)
        try:
            wait_until(lambda: len(gates.started) == JOBS, timeout=15)
            [loop] = scheduler.loops
            reads_while_running = reads.count
            for job in jobs:
                gates.gates[job.name].set()
                wait_until(lambda job=job: succeeded(job) == 1, timeout=15)
            wait_until(lambda: not loop.workers, timeout=15)  # the loop saw every run end
            assert reads.count == reads_while_running, "no tick after runs that ended as planned"
        finally:
            stopped(scheduler, gates)
    for job in jobs:
        assert JobState.objects.get(name=job.name).next_due > database_now()


def test_a_run_now_request_behind_a_busy_job_runs_as_soon_as_its_run_ends(listening_leader):
    gates = Gates()
    registry, [busy, other] = declare(gates, 2)
    make_due(busy, ago=timedelta(0), group=GROUP)
    make_due(other, ago=timedelta(0), group=GROUP)
    scheduler = started_scheduler(registry)
    try:
        wait_until(lambda: len(gates.started) == 2, timeout=15)
        assert services.request_run(busy.name, requested_by="editor")
        # The request's NOTIFY makes a tick, which finds the job busy and notes it.
        [loop] = scheduler.loops
        wait_until(lambda: busy.name in loop.last_tick.due_behind, timeout=15)
        gates.gates[other.name].set()
        gates.gates[busy.name].set()
        wait_until(lambda: gates.triggers(busy.name) == ["schedule", "manual"], timeout=15)
    finally:
        stopped(scheduler, gates)
    [manual] = JobRun.objects.filter(job=busy.name, trigger=JobRun.Trigger.MANUAL)
    assert manual.status == JobRun.Status.SUCCEEDED
