"""A worker killed mid-run: its runs released within a second, as a killed leader's are.

A SIGKILLed worker process's heartbeat stays fresh for up to a lease, so its run would keep
its job busy that long and the job's next slots would be recorded missed ("overlap"). The
server closes every session of a killed process at once; when it shows none of a worker's,
the leader abandons its runs then and there. Killed here: the worker process alone (its
pool starts another), and its whole node (``runworker`` and its processes, as a replica's
SIGKILL would). The job is in ``tests/coordination/killedrunapp``: due every second, it runs
until its process stops.
"""

import os
import signal
from datetime import timedelta

import pytest

from coordination import services
from coordination.clock import database_now
from coordination.ledger import VANISHED_REASON
from coordination.maintenance import WATCH_INTERVAL
from coordination.models import JobRun, JobState
from coordination.workers.sweep import WORKER_REPLACED, WORKER_STOPPED
from tests.coordination.test_worker_pool import children
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True), pytest.mark.server]

GROUP = "hatest_killed_workers"
BUSY = "killed.on_worker"  # every second, claim first, on workers, runs until stopped
OTHER_GROUP = "hatest_killed_workers_other"
OTHER_BUSY = "killed.on_worker_other"  # the same, in OTHER_GROUP
ON_REQUEST_GROUP = "hatest_killed_workers_on_request"
ON_REQUEST = "killed.on_worker_on_request"  # its group's only job, run when asked
ENV = {"INSTATIC_TEST_EXTRA_APPS": "tests.coordination.killedrunapp"}
#: The target: the killed run is released within this long of the kill (database clock).
RELEASED = 1.0
#: The job's next run starts within this long of the kill: the slot due after the release.
NEXT_SLOT = 2.0


def running() -> JobRun | None:
    return JobRun.objects.filter(job=BUSY, status="running").first()


@pytest.mark.parametrize("killed", ["worker process", "node"])
def test_a_killed_workers_run_is_released_within_a_second_and_its_job_goes_on(
    schedulers, workers, killed
):
    schedulers("kw-lead", GROUP, env=ENV, extra_args=["--workers", "0"])
    # The victim is the only worker until its run is in flight, so the run is surely its.
    victim = workers("kw-v", env=ENV)
    run = wait_until(running, timeout=60, message=victim.log()[-3000:])
    assert run.node == "kw-v/worker-1"
    other = workers("kw-o", env=ENV)
    other.wait_for_log(r"\[worker kw-o/worker-1\] waiting for runs", timeout=60)
    # The run outlasts its job's next slot, which waits for it.
    wait_until(lambda: JobState.objects.get(name=BUSY).next_due <= database_now(), timeout=10)

    [worker_pid] = children(victim.pid)
    killed_at = database_now()
    if killed == "node":
        victim.signal(signal.SIGKILL)  # its worker process dies with it
        assert victim.wait(timeout=10) == -signal.SIGKILL
    else:
        os.kill(worker_pid, signal.SIGKILL)

    released = wait_until(
        lambda: JobRun.objects.filter(pk=run.pk, finished_at__isnull=False).first(),
        timeout=30,
        message=str(list(JobRun.objects.filter(job=BUSY).values())),
    )
    after = (released.finished_at - killed_at).total_seconds()
    next_run = wait_until(
        lambda: (
            JobRun.objects.filter(job=BUSY, slot__gt=run.slot)
            .exclude(started_at=None)
            .order_by("slot")
            .first()
        ),
        timeout=30,
    )
    print(f"released {after:.2f}s after the kill, next run {next_run.started_at - killed_at}")
    assert released.status == JobRun.Status.ABANDONED, released.status
    # A killed worker process's pool may start another under its name before the leader
    # looks: its run is then that of a process that is no node any more, released as soon.
    assert released.error in {VANISHED_REASON, WORKER_REPLACED}, released.error
    assert after <= RELEASED, f"the killed run was released {after:.2f}s after the kill"
    started = (next_run.started_at - killed_at).total_seconds()
    assert started <= NEXT_SLOT, f"the job's next run started {started:.2f}s after the kill"


def test_a_killed_worker_holding_runs_of_two_groups_has_both_released_within_a_second(
    schedulers, workers
):
    """Each group's leader watches its own runs: the first to find the worker gone marks it
    stopped, so the other no longer asks the server about it, and releases its runs because
    their process is marked stopped (not at its next sweep, half a lease later)."""
    # A long lease: a sweep (every half lease) falls within a second of the kill rarely.
    env = {**ENV, "INSTATIC_LEASE": "20"}
    schedulers("kw2-lead", GROUP, OTHER_GROUP, env=env, extra_args=["--workers", "0"])
    victim = workers("kw2-v", env=env)
    runs = wait_until(
        lambda: (
            (found := list(JobRun.objects.filter(job__in=[BUSY, OTHER_BUSY], status="running")))
            and len({run.job for run in found}) == 2
            and found
        ),
        timeout=60,
        message=victim.log()[-3000:],
    )
    assert {run.node for run in runs} == {"kw2-v/worker-1"}
    # Each leader watches its runs on workers every WATCH_INTERVAL: let it look a few times,
    # with the worker's sessions there to see, before the kill (only a process once seen
    # with sessions can be proven gone by their absence).
    watched_from = max(run.started_at for run in runs) + timedelta(seconds=4 * WATCH_INTERVAL)
    wait_until(lambda: database_now() >= watched_from, timeout=10)

    killed_at = database_now()
    victim.signal(signal.SIGKILL)  # its worker process dies with it; no pool starts another
    assert victim.wait(timeout=10) == -signal.SIGKILL

    def released() -> list[JobRun]:
        rows = list(JobRun.objects.filter(pk__in=[run.pk for run in runs]))
        return rows if all(row.finished_at for row in rows) else []

    rows = wait_until(released, timeout=60, message=str(list(JobRun.objects.values())))
    for row in rows:
        after = (row.finished_at - killed_at).total_seconds()
        print(f"{row.job}: {row.status} {after:.2f}s after the kill: {row.error}")
        assert row.status == JobRun.Status.ABANDONED, row.status
        # Released by a watch: the server showed the worker gone, or it is marked so.
        assert row.error in {VANISHED_REASON, WORKER_STOPPED}, row.error
        assert after <= RELEASED, f"{row.job}'s run was released {after:.2f}s after the kill"


def test_a_killed_workers_run_is_released_within_a_second_while_its_leader_has_nothing_due(
    schedulers, workers
):
    """A leader whose group has nothing due sleeps long (here up to 30 s, as a leader does
    whose job's run was on a worker another group's leader just found gone), and a worker
    killed mid-run wakes nobody: the leader wakes on its own to watch the runs it sent out,
    and to sweep them."""
    env = {**ENV, "INSTATIC_MAX_TICK": "30"}
    schedulers("kw3-lead", ON_REQUEST_GROUP, env=env, extra_args=["--workers", "0"])
    victim = workers("kw3-v", env=env)
    victim.wait_for_log(r"\[worker kw3-v/worker-1\] waiting for runs", timeout=60)
    wait_until(lambda: JobState.objects.filter(name=ON_REQUEST).exists(), timeout=30)
    assert services.request_run(ON_REQUEST, requested_by="editor")
    run = wait_until(
        lambda: JobRun.objects.filter(job=ON_REQUEST, status="running").first(), timeout=30
    )
    # Let the leader look a few times, with the worker's sessions there to see.
    watched_from = run.started_at + timedelta(seconds=4 * WATCH_INTERVAL)
    wait_until(lambda: database_now() >= watched_from, timeout=10)

    killed_at = database_now()
    victim.signal(signal.SIGKILL)
    assert victim.wait(timeout=10) == -signal.SIGKILL

    released = wait_until(
        lambda: JobRun.objects.filter(pk=run.pk, finished_at__isnull=False).first(), timeout=60
    )
    after = (released.finished_at - killed_at).total_seconds()
    print(f"released {after:.2f}s after the kill: {released.error}")
    assert released.status == JobRun.Status.ABANDONED, released.status
    assert released.error == VANISHED_REASON, released.error
    assert after <= RELEASED, f"the killed run was released {after:.2f}s after the kill"
