"""Runs on worker processes: the leader queues, a worker executes, the ledger decides.

In one process against the real database: the leader's tick (``runscheduler --once``'s
scheduler) queues a job declared ``run_on="workers"``, and a :class:`WorkerProcess` takes its
task and runs it as a worker process does. The worker processes themselves, their signals
and their faults are in ``test_workers_ha.py``.
"""

import select
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django_tasks_db.models import DBTaskResult

from coordination.clock import database_now
from coordination.cluster_metrics import queue_families
from coordination.joblist import listed_jobs
from coordination.liveness import NodeNameInUse
from coordination.maintenance import WATCH_INTERVAL
from coordination.models import JobRun, JobState, Node, WakeUp
from coordination.runhost import RunHost
from coordination.scheduler import Scheduler
from coordination.schedules import WhenDue
from coordination.selectors import job_summaries, live_nodes_q
from coordination.services import request_wakeup
from coordination.workers import process
from coordination.workers.execution import Delivery
from coordination.workers.process import WorkerProcess
from tests.coordination.enginekit import (
    GROUP,
    Recorder,
    centered_every,
    declare,
    keep_a_session,
    make_due,
    tick,
)
from tests.support import twice_backend
from tests.support.polling import wait_until
from tests.support.schedules import ON_REQUEST_ONLY

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def registry_of(reg):
    """Run the tasks another backend delivers in this process with ``reg``'s jobs."""
    process.install(worker(reg, "engine-node/tasks"))
    try:
        yield
    finally:
        process.current_process().close()
        process.install(None)


#: The in-process workers of the running test, each with the session it keeps open
#: (``keep_a_session``): closed when the test ends.
_workers: list = []


@pytest.fixture(autouse=True)
def _close_workers():
    yield
    while _workers:
        process, session = _workers.pop()
        process.close()
        if session is not None:
            session.close()


def worker(reg, name="engine-node/worker-1") -> WorkerProcess:
    """A worker process in this process that keeps a session of its own open, as a serving
    one does, so that the ticks between its batches never take it for a killed one."""
    process = WorkerProcess(name, stop=threading.Event(), registry=reg)
    _workers.append((process, keep_a_session(process)))
    return process


def queued_task_args() -> list[list[int]]:
    return [task.args_kwargs["args"] for task in DBTaskResult.objects.order_by("enqueued_at")]


@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
def test_the_leader_queues_a_slot_with_its_task_and_a_worker_runs_it(transactional):
    recorder = Recorder()
    reg, job = declare(recorder, transactional=transactional, run_on="workers")
    slot = make_due(job, ago=timedelta(0))

    tick(reg)

    run = JobRun.objects.get(job=job.name, slot=slot)
    assert (run.status, run.node, run.started_at) == (JobRun.Status.QUEUED, "engine-node", None)
    assert run.queued_at is not None
    assert queued_task_args() == [[run.pk, 1]]
    assert recorder.slots == []  # the leader ran nothing itself
    assert JobState.objects.get(name=job.name).next_due == job.schedule.next_after(slot)

    process = worker(reg)
    assert process.work()

    run.refresh_from_db()
    assert (run.status, run.node, run.node_instance) == (
        JobRun.Status.SUCCEEDED,
        "engine-node/worker-1",
        process.node.instance,
    )
    assert run.queue_wait is not None and run.queue_wait >= 0
    assert recorder.slots == [slot]
    task = DBTaskResult.objects.get()
    assert (task.status, task.return_value, task.worker_ids) == (
        "SUCCESSFUL",
        Delivery.RAN,
        [process.node.instance],
    )
    state = JobState.objects.get(name=job.name)
    assert (state.last_status, state.last_node) == (JobRun.Status.SUCCEEDED, run.node)
    assert not process.work()  # nothing left


@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
def test_a_task_delivered_twice_runs_its_slot_once(transactional):
    recorder = Recorder()
    reg, job = declare(recorder, transactional=transactional, run_on="workers")
    slot = make_due(job, ago=timedelta(0))
    tick(reg)
    run = JobRun.objects.get(job=job.name, slot=slot)

    first, second = worker(reg, "a/worker-1"), worker(reg, "b/worker-1")
    outcomes = [first.execute(run.pk, 1).outcome, second.execute(run.pk, 1).outcome]

    assert outcomes == [Delivery.RAN, Delivery.TAKEN]
    assert recorder.slots == [slot]
    run.refresh_from_db()
    assert (run.status, run.node) == (JobRun.Status.SUCCEEDED, "a/worker-1")


def test_a_paused_jobs_queued_run_does_not_start_and_is_recorded_missed():
    recorder = Recorder()
    reg, job = declare(recorder, run_on="workers")
    slot = make_due(job, ago=timedelta(0))
    tick(reg)
    JobState.objects.filter(name=job.name).update(paused=True)

    assert worker(reg).work()

    run = JobRun.objects.get(job=job.name, slot=slot)
    assert (run.status, run.reason) == (JobRun.Status.MISSED, JobRun.MissedReason.PAUSED)
    assert recorder.slots == []
    assert JobState.objects.get(name=job.name).missed_count == 1


def test_a_queued_run_keeps_its_job_busy_so_the_next_slot_waits():
    recorder = Recorder()
    reg, job = declare(recorder, run_on="workers", missed="all", missed_window=timedelta(hours=5))
    first = make_due(job, ago=timedelta(hours=2))  # three slots due, run one at a time

    tick(reg)
    tick(reg)

    assert list(JobRun.objects.filter(job=job.name).values_list("slot", "status")) == [
        (first, JobRun.Status.QUEUED)
    ]
    assert worker(reg).work()
    tick(reg)
    assert JobRun.objects.filter(job=job.name, status=JobRun.Status.QUEUED).count() == 1
    assert recorder.slots == [first]


@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
def test_a_failed_run_on_a_worker_is_queued_again_for_its_retry(transactional):
    recorder = Recorder(fail=True)
    reg, job = declare(
        recorder, transactional=transactional, run_on="workers", retries=1, retry_backoff=0.01
    )
    slot = make_due(job, ago=timedelta(0))
    tick(reg)
    process = worker(reg)
    assert process.work()
    run = JobRun.objects.get(job=job.name, slot=slot)
    assert (run.status, run.attempt) == (JobRun.Status.FAILED, 1)
    assert run.retry_at is not None

    JobRun.objects.filter(pk=run.pk).update(retry_at=run.retry_at - timedelta(minutes=1))
    tick(reg)

    run.refresh_from_db()
    assert (run.status, run.attempt, run.trigger) == (
        JobRun.Status.QUEUED,
        2,
        JobRun.Trigger.RETRY,
    )
    assert queued_task_args()[-1] == [run.pk, 2]
    recorder.fail = False
    assert process.work()
    run.refresh_from_db()
    assert (run.status, run.attempt) == (JobRun.Status.SUCCEEDED, 2)
    assert recorder.slots == [slot, slot]


def test_a_worker_process_is_a_node_of_its_own_that_is_idle_between_runs():
    reg, _ = declare(Recorder(), run_on="workers")
    process = worker(reg)

    node = Node.objects.get(name="engine-node/worker-1")
    assert (node.role, node.groups, node.instance) == (
        Node.Role.WORKER,
        [],
        process.node.instance,
    )
    process.close()
    assert Node.objects.get(pk=node.pk).stopped_at is not None


def test_the_queue_of_runs_on_workers_is_in_the_cluster_metrics():
    reg, job = declare(Recorder(), run_on="workers")
    make_due(job, ago=timedelta(0))

    def samples() -> dict:
        return {
            (sample.name, tuple(sample.labels.items())): sample.value
            for family in queue_families()
            for sample in family.samples
        }

    assert samples() == {("instatic_run_queue_oldest_wait_seconds", ()): 0.0}
    tick(reg)
    queued = samples()
    assert queued[("instatic_runs_queued", (("job", job.name),))] == 1
    assert queued[("instatic_run_queue_oldest_wait_seconds", ())] >= 0
    assert worker(reg).work()
    assert samples() == {("instatic_run_queue_oldest_wait_seconds", ()): 0.0}


def test_jobs_list_says_a_run_is_queued_then_on_which_worker_it_runs():
    block = threading.Event()
    recorder = Recorder(block=block)
    reg, job = declare(recorder, run_on="workers")
    make_due(job, ago=timedelta(0))
    tick(reg)

    def state() -> str:
        (row,) = [
            r for r in listed_jobs(job_summaries(), [], now=database_now()) if r["name"] == job.name
        ]
        return row["state"]

    assert state() == "queued for a worker"
    process = worker(reg)
    running = threading.Thread(target=process.work)
    running.start()
    try:
        assert wait_until(lambda: state() == "running on engine-node/worker-1", timeout=10)
    finally:
        block.set()
        running.join(60)  # a busy machine may take its time: the batch must end, however slowly
    assert not running.is_alive(), "the worker's batch never ended"
    assert state() == "active"


@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
def test_a_backend_that_delivers_every_task_twice_still_runs_each_slot_once(transactional):
    recorder = Recorder()
    reg, job = declare(recorder, transactional=transactional, run_on="workers")
    slot = make_due(job, ago=timedelta(0))
    twice = {"default": {"BACKEND": "tests.support.twice_backend.TwiceBackend", "QUEUES": []}}
    twice_backend.DELIVERIES.clear()

    with override_settings(TASKS=twice), registry_of(reg):
        tick(reg)

    assert twice_backend.DELIVERIES == [Delivery.RAN, Delivery.TAKEN]
    assert recorder.slots == [slot]
    run = JobRun.objects.get(job=job.name)
    assert run.status == JobRun.Status.SUCCEEDED
    assert run.node.endswith("/tasks")
    assert not DBTaskResult.objects.exists()  # the enqueue went to the other backend


def _job_on_request(**state):
    """Declare a job on workers run on request only, its state (with ``state``) a century
    from its next slot."""
    reg, job = declare(Recorder(), run_on="workers", schedule=ON_REQUEST_ONLY)
    JobState.objects.create(
        name=job.name,
        group=GROUP,
        schedule=job.schedule.describe(),
        fingerprint=job.fingerprint,
        next_due=job.schedule.next_after(database_now()),
        **state,
    )
    return reg, job


def _lead_and_step(reg) -> float:
    """Take the lead of the group once and make one step; return the sleep it chose."""
    scheduler = Scheduler(groups=[GROUP], node_name="engine-node", registry=reg)
    scheduler.register()
    [loop] = scheduler.loops
    try:
        assert loop.supervision.try_lead(wait=0)
        return loop.step()
    finally:
        loop.lock.close()


@override_settings(INSTATIC_MAX_TICK=7200, INSTATIC_NOTIFY_MAX_TICK=7200)
def test_a_leader_that_queued_a_run_wakes_for_the_jobs_next_slot_not_after_its_longest_sleep():
    reg, job = declare(Recorder(), run_on="workers", schedule=centered_every(timedelta(seconds=4)))
    slot = make_due(job, ago=timedelta(0))
    slept = _lead_and_step(reg)
    assert JobRun.objects.get(job=job.name).status == JobRun.Status.QUEUED
    until_next = (job.schedule.next_after(slot) - database_now()).total_seconds()
    assert slept <= until_next + 1, (slept, until_next)


@override_settings(INSTATIC_MAX_TICK=7200, INSTATIC_NOTIFY_MAX_TICK=7200)
def test_a_leader_that_queued_a_run_wakes_to_watch_it_however_far_its_next_slot_is():
    """A worker killed mid-run wakes nobody, and another group's leader that found it gone
    first leaves the job looking idle: the leader that queued the run looks at it again
    within the watch interval (``maintenance.WATCH_INTERVAL``), not at the job's next slot."""
    reg, job = _job_on_request(run_requested_at=database_now(), run_requested_by="editor")
    slept = _lead_and_step(reg)
    assert JobRun.objects.get(job=job.name).status == JobRun.Status.QUEUED
    assert slept <= WATCH_INTERVAL, slept


@override_settings(INSTATIC_MAX_TICK=7200, INSTATIC_NOTIFY_MAX_TICK=7200)
def test_a_new_leader_watches_the_runs_on_workers_it_inherits_at_once():
    """A run the previous leader queued is out on workers: the new leader's first sleep ends
    at its first look at it (a worker may take it, and be killed, at any moment), not at the
    job's next slot."""
    reg, job = _job_on_request()
    JobRun.objects.create(job=job.name, slot=database_now(), status=JobRun.Status.QUEUED)
    assert _lead_and_step(reg) <= WATCH_INTERVAL


@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
def test_a_queued_claim_lost_by_a_failover_is_written_back_as_abandoned_not_run_again(
    transactional,
):
    reg, job = declare(Recorder(), transactional=transactional, run_on="workers")
    slot = make_due(job, ago=timedelta(0))
    [loop] = tick(reg).loops
    # What a failover to a lagging standby does: the newest commits are gone, older rows stay.
    JobRun.objects.filter(job=job.name).delete()
    JobRun.objects.create(job=job.name, slot=slot - timedelta(hours=1), status="succeeded")

    loop.journal.doubt()
    loop.journal.check()

    restored = list(JobRun.objects.filter(job=job.name, slot=slot).values_list("slot", "status"))
    if transactional:
        assert restored == []  # lost with its effects: the slot runs again
    else:
        assert restored == [(slot, JobRun.Status.ABANDONED)]


def test_run_now_of_a_job_on_workers_is_queued_served_and_run_by_a_worker():
    recorder = Recorder()
    reg, job = declare(recorder, run_on="workers")
    make_due(job, ago=timedelta(hours=-1))  # next slot an hour away: only the request runs
    JobState.objects.filter(name=job.name).update(
        run_requested_at=database_now(), run_requested_by="editor"
    )

    tick(reg)

    run = JobRun.objects.get(job=job.name)
    assert (run.status, run.trigger, run.requested_by) == (
        JobRun.Status.QUEUED,
        JobRun.Trigger.MANUAL,
        "editor",
    )
    assert JobState.objects.get(name=job.name).run_requested_at is None
    assert worker(reg).work()
    assert JobRun.objects.get(pk=run.pk).status == JobRun.Status.SUCCEEDED
    assert len(recorder.slots) == 1


def test_a_run_on_a_worker_past_its_max_duration_is_told_to_stop_and_recorded_timed_out():
    stopped = []

    def until_told(ctx):
        while not ctx.should_stop():
            threading.Event().wait(0.01)
        stopped.append(ctx.slot)

    reg, job = declare(until_told, run_on="workers", max_duration=0.2)
    slot = make_due(job, ago=timedelta(0))
    tick(reg)

    assert worker(reg).work()

    run = JobRun.objects.get(job=job.name)
    assert run.status == JobRun.Status.TIMED_OUT
    assert stopped == [slot]


def test_a_worker_process_is_a_run_host_for_the_leaders_own_worker():
    reg, _ = declare(Recorder(), run_on="workers")
    host = worker(reg).host
    assert isinstance(host, RunHost)
    assert host.leading and not host.stopping


def test_a_worker_started_again_after_a_sigkill_takes_over_its_name_at_once():
    reg, _ = declare(Recorder(), run_on="workers")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no process has any more (the SIGKILLed worker's)
    first = worker(reg)
    Node.objects.filter(pk=Node.objects.get(name=first.node.name).pk).update(pid=dead.pid)

    again = worker(reg)  # its heartbeat is fresh, but its process is gone from this host

    assert Node.objects.get(name=again.node.name).instance == again.node.instance


def test_a_worker_name_a_live_process_uses_is_still_refused():
    reg, _ = declare(Recorder(), run_on="workers")
    worker(reg)  # this test's own process: alive
    with pytest.raises(NodeNameInUse):
        worker(reg)


@pytest.mark.sqlite
@override_settings(INSTATIC_LEASE=1.0, INSTATIC_HEARTBEAT_INTERVAL=0.25)
def test_on_sqlite_a_transactional_run_longer_than_the_lease_commits():
    """Its own heartbeat waits on the write lock the run holds; the fence must not take the
    stale heartbeat for a fenced worker (the run would roll back and be queued forever)."""
    ran = []

    def long_run(ctx):
        JobState.objects.filter(name=ctx.job.name).update(last_error="")  # a write: the lock
        threading.Event().wait(1.5)
        ran.append(ctx.slot)

    reg, job = declare(long_run, transactional=True, run_on="workers")
    slot = make_due(job, ago=timedelta(0))
    tick(reg)

    assert worker(reg).work()

    assert JobRun.objects.get(job=job.name).status == JobRun.Status.SUCCEEDED
    assert ran == [slot]


@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
def test_a_wake_up_served_by_a_run_on_a_worker_is_spent_and_the_job_sleeps_again(transactional):
    """A when-due job on workers (the outbox's jobs) that was woken runs once for the wake-up:
    its run clears it as a run in the leader's threads does, so the next tick finds nothing
    due, instead of queueing a run each tick for a wake-up that never goes."""
    recorder = Recorder()
    reg, job = declare(
        recorder,
        transactional=transactional,
        run_on="workers",
        schedule=WhenDue(fallback=timedelta(hours=1)),
    )
    process = worker(reg)
    tick(reg)  # a new job runs at once; then nothing is due until a wake-up or its fallback
    assert process.work()
    request_wakeup(job.name, None)

    tick(reg)
    assert process.work()

    assert JobState.objects.get(name=job.name).wake_at is None
    tick(reg)
    assert JobRun.objects.filter(job=job.name).count() == 2
    assert len(recorder.slots) == 2


@override_settings(INSTATIC_LEASE=1.0)
def test_a_worker_idle_past_the_lease_takes_its_next_run_under_a_fresh_heartbeat():
    """Looking for work writes nothing, however often a worker looks. A run it takes after
    an idle spell longer than the lease, even a moment after its last look, is taken with a
    heartbeat, so the run's check at commit finds the process live: it commits, rather than
    rolling back and waiting for the leader's sweep to queue it again."""
    recorder = Recorder()
    reg, job = declare(recorder, transactional=True, run_on="workers")
    process = worker(reg)
    alive = Node.objects.filter(live_nodes_q(), instance=process.node.instance)

    def idle_past_the_lease() -> bool:
        assert not process.work()  # an idle look: nothing queued
        return not alive.exists()

    wait_until(idle_past_the_lease, timeout=30)
    slot = make_due(job, ago=timedelta(0))
    tick(reg)
    tasks = DBTaskResult.objects.all()
    ready_at = tasks.get().run_after
    tasks.update(run_after=database_now() + timedelta(days=1))
    assert not process.work(), "a last idle look, just before the run is ready"
    tasks.update(run_after=ready_at)
    assert process.work()

    assert JobRun.objects.get(job=job.name, slot=slot).status == JobRun.Status.SUCCEEDED
    assert recorder.slots == [slot]


def _leader_woken(loop) -> bool:
    """Return True once something woke the group's leader: a ``NOTIFY`` on its lock session
    (PostgreSQL), its wake-up counter moved (MySQL)."""
    if connection.vendor == "postgresql":
        readable, _, _ = select.select([loop.lock._conn.fileno()], [], [], 10)
        return bool(readable)
    return WakeUp.objects.filter(group=GROUP, seq__gt=0).exists()


@pytest.mark.skipif(connection.vendor == "sqlite", reason="the SQLite leader polls: no signal")
@override_settings(INSTATIC_MAX_TICK=7200, INSTATIC_NOTIFY_MAX_TICK=7200)
def test_a_run_on_a_worker_that_leaves_its_job_due_at_once_wakes_the_leader():
    """A when-due job on workers whose run says more work waits (the dispatcher after a full
    batch) is queued again when its run ends, not at the leader's next safety-net tick."""
    reg, job = declare(Recorder(), run_on="workers", schedule=WhenDue(fallback=timedelta(hours=1)))
    job = reg.register(replace(job, func=lambda ctx: database_now()))
    process = worker(reg)
    scheduler = Scheduler(groups=[GROUP], node_name="engine-node", registry=reg)
    scheduler.register()
    [loop] = scheduler.loops
    try:
        assert loop.supervision.try_lead(wait=0)
        loop.step()
        # Queued: the leader sleeps until its next look at the runs it sent out, and only a
        # wake-up has it plan the job again as soon as the run answers.
        assert JobRun.objects.get(job=job.name).status == JobRun.Status.QUEUED
        WakeUp.objects.filter(group=GROUP).delete()
        assert process.work()
        assert JobState.objects.get(name=job.name).next_due <= database_now()
        assert _leader_woken(loop), "the leader sleeps while its job is due"
    finally:
        loop.lock.close()
