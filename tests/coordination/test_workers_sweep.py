"""The leader's sweep of runs on workers: its decisions as tables, its effect on the ledger.

The worker processes that die here are stood in for by a worker whose heartbeat is moved
back past the lease; the real SIGKILL and SIGSTOP of worker processes are in
``test_workers_ha.py``.
"""

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from coordination import ledger, liveness
from coordination.models import JobRun, Node
from coordination.workers import sweep
from coordination.workers.process import WorkerProcess
from coordination.workers.sweep import (
    Task,
    departed,
    lost_tasks,
    stranded_runs,
    workers_to_fence,
)
from tests.coordination.enginekit import Recorder, declare, make_due, tick
from tests.support.polling import wait_until

A, B, C = (uuid.UUID(int=n) for n in (1, 2, 3))


@pytest.mark.parametrize(
    ("tasks", "live", "lost"),
    [
        ([], set(), []),
        ([Task(A, "READY", (1, 1), "")], set(), []),
        ([Task(A, "RUNNING", (1, 1), "w1")], {"w1"}, []),
        ([Task(A, "RUNNING", (1, 1), "w1")], {"w2"}, [A]),
        ([Task(A, "RUNNING", (1, 1), "w1"), Task(B, "RUNNING", (2, 1), "w2")], {"w2"}, [A]),
    ],
    ids=["none", "ready", "live-worker", "dead-worker", "one-of-two"],
)
def test_lost_tasks_are_the_running_ones_of_workers_not_live(tasks, live, lost):
    assert lost_tasks(tasks, live) == lost


@pytest.mark.parametrize(
    ("queued", "tasks", "lost", "stranded"),
    [
        ([(1, 1)], [Task(A, "READY", (1, 1), "")], set(), []),
        ([(1, 1)], [], set(), [(1, 1)]),
        ([(1, 1)], [Task(A, "RUNNING", (1, 1), "w1")], {A}, [(1, 1)]),
        ([(1, 2)], [Task(A, "READY", (1, 1), "")], set(), [(1, 2)]),  # an older attempt's
        ([(1, 1), (2, 1)], [Task(B, "READY", (2, 1), "")], set(), [(1, 1)]),
    ],
    ids=["has-task", "no-task", "task-lost", "other-attempt", "one-of-two"],
)
def test_stranded_runs_are_the_queued_ones_no_live_task_executes(queued, tasks, lost, stranded):
    assert stranded_runs(queued, tasks, lost) == stranded


@pytest.mark.parametrize(
    ("stale", "tasks", "running", "fenced"),
    [
        ({"w1": "n/worker-1"}, [], set(), {}),  # idle: stale by design
        ({"w1": "n/worker-1"}, [Task(A, "RUNNING", (1, 1), "w1")], set(), {"w1": "n/worker-1"}),
        ({"w1": "n/worker-1"}, [], {"w1"}, {"w1": "n/worker-1"}),
        ({}, [Task(A, "RUNNING", (1, 1), "w1")], {"w1"}, {}),  # live: not stale
    ],
    ids=["idle", "task-in-hand", "run-in-progress", "live"],
)
def test_a_stale_worker_is_fenced_only_with_work_in_hand(stale, tasks, running, fenced):
    assert workers_to_fence(stale, tasks, running) == fenced


@pytest.mark.parametrize(
    ("others", "rows", "replaced", "stopped"),
    [
        (set(), {}, set(), set()),
        ({"w1"}, {}, {"w1"}, set()),  # its pool started another under its name
        ({"w1"}, {"w1": True}, set(), {"w1"}),  # found gone or fenced by another leader
        ({"w1"}, {"w1": False}, set(), set()),  # its heartbeat ran out: the sweep fences it
        ({"w1", "w2", "w3"}, {"w2": True, "w3": False}, {"w1"}, {"w2"}),
    ],
    ids=["none", "replaced", "stopped", "stale", "mixed"],
)
def test_a_watch_releases_the_runs_of_processes_replaced_or_marked_stopped(
    others, rows, replaced, stopped
):
    assert departed(others, rows) == {"replaced": replaced, "stopped": stopped}


def _die(process: WorkerProcess) -> None:
    """Stand in for a worker process that died: its heartbeat stops and lies past the lease."""
    process.heartbeat.stop()
    Node.objects.filter(instance=process.node.instance).update(
        last_heartbeat=F("last_heartbeat") - timedelta(hours=1)
    )


@pytest.mark.django_db(transaction=True)
def test_a_transactional_run_whose_worker_died_runs_again_on_another_worker():
    recorder = Recorder()
    reg, job = declare(recorder, transactional=True, run_on="workers")
    slot = make_due(job, ago=timedelta(0))
    tick(reg)
    dead = WorkerProcess("a/worker-1", stop=threading.Event(), registry=reg)
    taken = dead.take_task()  # taken, then the process dies before its run commits
    _die(dead)

    assert sweep.sweep([job]) == 1

    assert DBTaskResult.objects.get(pk=taken.pk).status == "FAILED"
    assert JobRun.objects.get(job=job.name).status == JobRun.Status.QUEUED
    assert DBTaskResult.objects.filter(status="READY").count() == 1
    other = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg)
    assert other.work()
    run = JobRun.objects.get(job=job.name)
    assert (run.status, run.node) == (JobRun.Status.SUCCEEDED, "b/worker-1")
    assert recorder.slots == [slot]
    assert sweep.sweep([job]) == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("retry_abandoned", [False, True], ids=["no-retry", "retry"])
def test_a_claim_first_run_whose_worker_died_is_abandoned_and_retried_by_policy(
    retry_abandoned,
):
    recorder = Recorder()
    reg, job = declare(recorder, run_on="workers", retry_abandoned=retry_abandoned)
    slot = make_due(job, ago=timedelta(0))
    tick(reg)
    dead = WorkerProcess("a/worker-1", stop=threading.Event(), registry=reg)
    run = JobRun.objects.get(job=job.name)
    dead.take_task()  # the process takes the task and starts the run, then dies mid-run
    ledger.take_queued(run.pk, 1, node=dead.node.name, instance=dead.node.instance)
    _die(dead)

    sweep.sweep([job])
    run.refresh_from_db()
    assert run.status == JobRun.Status.ABANDONED

    tick(reg)
    run.refresh_from_db()
    if retry_abandoned:
        assert (run.status, run.attempt) == (JobRun.Status.QUEUED, 2)
        assert WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg).work()
        assert recorder.slots == [slot]
    else:
        assert run.status == JobRun.Status.ABANDONED
        assert recorder.slots == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("worker_live", [False, True], ids=["no-worker", "a-live-worker"])
def test_a_queued_run_is_watched_only_while_a_worker_is_live_to_take_it(worker_live):
    reg, job = declare(Recorder(), run_on="workers")
    JobRun.objects.create(job=job.name, slot=timezone.now(), status=JobRun.Status.QUEUED)
    process = None
    if worker_live:
        process = WorkerProcess("a/worker-1", stop=threading.Event(), registry=reg)
    try:
        assert sweep.watch([job]).running is worker_live
    finally:
        if process is not None:
            process.close()


@pytest.mark.django_db(transaction=True)
def test_a_fenced_worker_takes_no_more_work_and_stops():
    reg, job = declare(Recorder(), run_on="workers")
    make_due(job, ago=timedelta(0))
    tick(reg)
    fenced = WorkerProcess("a/worker-1", stop=threading.Event(), registry=reg)
    fenced.heartbeat.beaten_at -= 3600  # its next take heartbeats first
    liveness.mark_fenced(fenced.node.instance)  # what the sweep does to a stale worker

    assert not fenced.work()

    assert fenced.stop.is_set()
    assert DBTaskResult.objects.get().status == "READY"
    assert JobRun.objects.get(job=job.name).status == JobRun.Status.QUEUED


@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_outcome_was_refused_finds_out_it_was_fenced_and_stops_while_idle():
    block = threading.Event()
    recorder = Recorder(block=block)
    reg, job = declare(recorder, run_on="workers")
    make_due(job, ago=timedelta(0))
    tick(reg)
    frozen = WorkerProcess("a/worker-1", stop=threading.Event(), registry=reg)

    def work_then_close() -> None:
        try:
            frozen.work()
        finally:
            connection.close()  # this thread's own session

    running = threading.Thread(target=work_then_close)
    running.start()
    # Its job function is running (the run row reads running a moment before that: a run
    # abandoned in between is one the process never starts, and learns nothing from).
    wait_until(lambda: recorder.slots, timeout=10)
    # Meanwhile the leader took it for dead: its run abandoned, the process fenced.
    JobRun.objects.filter(job=job.name).update(status=JobRun.Status.ABANDONED)
    liveness.mark_fenced(frozen.node.instance)
    block.set()
    running.join(60)  # a busy machine may take its time: the batch must end, however slowly
    assert not running.is_alive(), "the worker's batch never ended"
    assert not frozen.stop.is_set()  # its outcome was refused; nothing else told it yet

    assert not frozen.work()  # an idle look, with no task to take

    assert frozen.stop.is_set()
