"""Worker processes take work in batches: many tasks in one claim, runs on threads.

The deciding (:func:`claiming.decide_batch`, :mod:`workers.sizing`) is tested with
tables; the doing against the real database, in one process, as ``test_workers.py`` does.
"""

import sys
import threading
import uuid
from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tasks_db.models import DBTaskResult, get_date_max

from coordination import ledger, loop, quoting
from coordination.models import JobRun, JobState, Node
from coordination.registry import JobRegistry, make_job
from coordination.workers import queueing
from coordination.workers.claiming import (
    FOREIGN_TASK,
    TakenTask,
    decide_batch,
    parse_run,
    read_runs,
)
from coordination.workers.execution import Delivery
from coordination.workers.meeting import (
    BACKEND_ALIAS,
    QUEUE_NAME,
    RUN_TASK_PATH,
)
from coordination.workers.postgresql_take import take_and_start, take_statement
from coordination.workers.process import WorkerProcess
from coordination.workers.sizing import MAX_HELD, first_share, refill, take_ahead, worker_threads
from coordination.workers.tasks import run_queued
from coordination.workers.waiting import WorkWaiter
from tests.coordination.enginekit import GROUP, Recorder, centered_every, make_due, tick
from tests.support.polling import wait_until

PATH = "coordination.workers.tasks.run_queued"


def _task(run=(1, 1), path=PATH) -> TakenTask:
    return TakenTask(id=uuid.uuid4(), run=run, task_path=path)


def _run(pk=1, attempt=1, status=JobRun.Status.QUEUED, job="a", trigger="schedule") -> JobRun:
    return JobRun(pk=pk, attempt=attempt, status=status, job=job, trigger=trigger)


DECLARED = {"a": False, "t": True}


@pytest.mark.parametrize(
    ("task", "runs", "states", "where"),
    [
        (_task(), {1: _run()}, {}, "start"),
        (_task(), {1: _run(job="t")}, {}, "transactional"),
        (_task(path="os.system"), {1: _run()}, {}, "refused"),
        (_task(run=None), {}, {}, "refused"),
        (_task(), {}, {}, Delivery.TAKEN),  # not queued any more
        (_task(run=(1, 2)), {1: _run(attempt=1)}, {}, Delivery.TAKEN),  # another attempt
        (_task(), {1: _run(status=JobRun.Status.RUNNING)}, {}, Delivery.TAKEN),
        (_task(), {1: _run(job="gone")}, {}, Delivery.UNKNOWN),
        (_task(), {1: _run()}, {"a": JobState(name="a", paused=False)}, "start"),
        (_task(), {1: _run()}, {"a": JobState(name="a", paused=True)}, "skipped"),
        # A run-now request runs a paused job, as on the leader.
        (_task(), {1: _run(trigger="manual")}, {"a": JobState(name="a", paused=True)}, "start"),
    ],
    ids=[
        "claim-first",
        "transactional",
        "foreign-path",
        "bad-args",
        "gone",
        "other-attempt",
        "running",
        "undeclared",
        "not-paused",
        "paused",
        "paused-manual",
    ],
)
def test_decide_batch_says_what_becomes_of_each_task(task, runs, states, where):
    plan = decide_batch([task], runs, states, expected_path=PATH, transactional=DECLARED.get)
    found = {
        "start": [t for t, _ in plan.start],
        "transactional": [t for t, _ in plan.transactional],
        "refused": [t for t, _ in plan.refused],
        "skipped": [t for t, _, _ in plan.skipped],
        **{
            outcome: [t for t, o in plan.done if o == outcome]
            for outcome in (Delivery.TAKEN, Delivery.UNKNOWN)
        },
    }
    assert {k: v for k, v in found.items() if v} == {where: [task]}


def test_the_task_path_workers_accept_is_the_run_task():
    assert run_queued.module_path == RUN_TASK_PATH == PATH


def test_a_run_delivered_twice_in_one_batch_starts_once():
    first, second = _task(), _task()
    plan = decide_batch(
        [first, second], {1: _run()}, {}, expected_path=PATH, transactional=DECLARED.get
    )
    assert [t for t, _ in plan.start] == [first]
    assert plan.done == [(second, Delivery.TAKEN)]


def test_a_foreign_task_path_is_refused_with_both_paths_in_words():
    plan = decide_batch(
        [_task(path="evil.mod.f")], {}, {}, expected_path=PATH, transactional=DECLARED.get
    )
    assert plan.refused[0][1] == FOREIGN_TASK.format(path="evil.mod.f", expected=PATH)


@pytest.mark.parametrize(
    ("stored", "run"),
    [
        ({"args": [7, 2], "kwargs": {}}, (7, 2)),
        ({"args": [7], "kwargs": {}}, None),
        ({"args": ["7", 2]}, None),
        ({}, None),
        (None, None),
        ([1, 2], None),
        ({"args": [True, 2]}, None),
        ({"args": [-7, 2]}, None),
        ({"args": [0, 2]}, None),
        ({"args": [2**63, 2]}, None),
        ({"args": [7, 2**31]}, None),
        ({"args": [7.0, 2]}, None),
    ],
)
def test_parse_run_reads_a_run_id_and_attempt_or_nothing(stored, run):
    assert parse_run(stored) == run


@pytest.mark.parametrize(
    ("configured", "vendor", "threads"),
    [
        (8, "postgresql", 8),
        (8, "mysql", 8),
        (8, "sqlite", 1),
        (0, "postgresql", 1),
        (3, "mysql", 3),
    ],
)
def test_worker_threads(configured, vendor, threads):
    assert worker_threads(configured, vendor) == threads


@pytest.mark.parametrize(
    ("free", "capacity", "look"),
    [
        (0, 8, False),
        (1, 8, False),
        (3, 8, False),
        (4, 8, True),
        (8, 8, True),
        (1, 1, True),
        (0, 1, False),
        (1, 2, True),
        (1, 3, True),
    ],
)
def test_a_worker_looks_for_more_once_half_of_what_it_may_hold_is_free(free, capacity, look):
    assert refill(free, capacity) is look


def _declare_many(count: int, func, **options) -> tuple[JobRegistry, list]:
    reg = JobRegistry()
    jobs = [
        reg.register(
            make_job(
                func,
                name=f"batchtest.job_{i}",
                group=GROUP,
                schedule=centered_every(timedelta(hours=1)),
                run_on="workers",
                **options,
            )
        )
        for i in range(count)
    ]
    return reg, jobs


def _queued_many(count: int, func, **options) -> tuple[JobRegistry, list]:
    """Declare ``count`` jobs on workers (:func:`_declare_many`), each due now, and tick once:
    one queued run each."""
    reg, jobs = _declare_many(count, func, **options)
    for job in jobs:
        make_due(job, ago=timedelta(0))
    tick(reg)
    return reg, jobs


#: A run as a batch finds it: (job, status, trigger, its job paused, the task's attempt).
STARTABLE_CASES = {
    "queued": ("a", JobRun.Status.QUEUED, "schedule", False, 1),
    "no-state": ("nostate", JobRun.Status.QUEUED, "schedule", None, 1),
    "paused": ("a", JobRun.Status.QUEUED, "schedule", True, 1),
    "paused-manual": ("a", JobRun.Status.QUEUED, "manual", True, 1),
    "paused-retry": ("a", JobRun.Status.QUEUED, "retry", True, 1),
    "transactional": ("t", JobRun.Status.QUEUED, "schedule", False, 1),
    "undeclared": ("gone", JobRun.Status.QUEUED, "schedule", False, 1),
    "running": ("a", JobRun.Status.RUNNING, "schedule", False, 1),
    "other-attempt": ("a", JobRun.Status.QUEUED, "schedule", False, 2),
}


def _task_row(args_kwargs, path: str = PATH) -> DBTaskResult:
    """A ready task row of Instatic's queue carrying ``args_kwargs`` (as stored)."""
    return DBTaskResult.objects.create(
        args_kwargs=args_kwargs,
        task_path=path,
        queue_name=QUEUE_NAME,
        backend_name=BACKEND_ALIAS,
        run_after=get_date_max(),
    )


def _take_options(jobs: list[str]) -> dict:
    """What worker process b/worker-1 (instance i1, its node row made here) takes every ready
    task with on PostgreSQL, declaring the claim-first ``jobs``."""
    now = timezone.now()
    node, _ = Node.objects.get_or_create(
        name="b/worker-1",
        defaults={
            "role": Node.Role.WORKER,
            "instance": "i1",
            "host": "test",
            "pid": 1,
            "started_at": now,
            "last_heartbeat": now,
        },
    )
    return {
        "queue_name": QUEUE_NAME,
        "backend": BACKEND_ALIAS,
        "limit": 100,
        "worker_id": "i1",
        "beat": quoting.update_sql(Node.objects.filter(pk=node.pk), {"last_heartbeat": Now()}),
        "jobs": jobs,
        "node": "b/worker-1",
        "instance": "i1",
        "expected_path": PATH,
    }


def _take_in_one_statement(jobs: list[str]) -> list[TakenTask]:
    """Take every ready task as worker process b/worker-1 does on PostgreSQL: its heartbeat,
    the take and the start in one statement."""
    take = take_and_start(**_take_options(jobs))
    assert take.ready and take.written
    return take.tasks


@pytest.mark.postgresql  # elsewhere every batch is read before its runs start
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", list(STARTABLE_CASES))
def test_the_runs_started_unread_are_those_a_read_batch_would_start(case):
    job, status, trigger, paused, attempt = STARTABLE_CASES[case]
    now = timezone.now()
    if paused is not None:
        JobState.objects.create(name=f"startable.{job}", group=GROUP, paused=paused, next_due=now)
    run = JobRun.objects.create(job=f"startable.{job}", slot=now, status=status, trigger=trigger)
    _task_row({"args": [run.pk, attempt], "kwargs": {}})
    declared = {"startable.a": False, "startable.nostate": False, "startable.t": True}
    # What a batch reads of the run before its take moves it.
    runs, states = read_runs([_task(run=(run.pk, attempt))])

    [task] = _take_in_one_statement(
        [name for name, transactional in declared.items() if not transactional]
    )

    plan = decide_batch([task], runs, states, expected_path=PATH, transactional=declared.get)
    assert (task.started is not None) == bool(plan.start)
    if task.started is not None:
        started = task.started
        assert (started.pk, started.status, started.node_instance) == (
            run.pk,
            JobRun.Status.RUNNING,
            "i1",
        )
        assert started.next_due == (now if paused is not None else None)


#: A task's stored arguments, and whether its run starts in the take (the rest are read and
#: decided on at dispatch, where any but a run's id and attempt are refused).
ARGUMENTS = {
    "a-run": (lambda run: {"args": [run.pk, run.attempt], "kwargs": {}}, PATH, True),
    "more-arguments": (lambda run: {"args": [run.pk, run.attempt, 7], "kwargs": {}}, PATH, True),
    "id-as-text": (lambda run: {"args": [str(run.pk), run.attempt], "kwargs": {}}, PATH, False),
    "fraction": (lambda run: {"args": [run.pk + 0.5, run.attempt], "kwargs": {}}, PATH, False),
    "negative": (lambda run: {"args": [-run.pk, run.attempt], "kwargs": {}}, PATH, False),
    "past-bigint": (lambda run: {"args": [10**30, run.attempt], "kwargs": {}}, PATH, False),
    "past-integer": (lambda run: {"args": [run.pk, 10**12], "kwargs": {}}, PATH, False),
    "one-argument": (lambda run: {"args": [run.pk], "kwargs": {}}, PATH, False),
    "args-not-a-list": (lambda run: {"args": "run", "kwargs": {}}, PATH, False),
    "not-an-object": (lambda run: [run.pk, run.attempt], PATH, False),
    "a-number": (lambda run: run.pk, PATH, False),
    "foreign-path": (lambda run: {"args": [run.pk, run.attempt], "kwargs": {}}, "os.system", False),
}


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", list(ARGUMENTS))
def test_a_take_starts_only_runs_its_tasks_name_as_two_whole_numbers_and_fails_on_none(case):
    arguments, path, starts = ARGUMENTS[case]
    run = JobRun.objects.create(job="startable.a", slot=timezone.now(), status="queued")
    _task_row(arguments(run), path)

    [task] = _take_in_one_statement(["startable.a"])

    assert (task.started is not None) is starts
    # The run as the statement read it: a task whose run it could not read is refused at
    # dispatch without reading anything (``decide_batch``).
    assert (task.run is not None) is starts
    assert JobRun.objects.get().status == ("running" if starts else "queued")
    assert DBTaskResult.objects.get().status == "RUNNING", "taken, to be decided at dispatch"


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_a_take_finds_its_runs_by_primary_key_however_many_runs_are_queued():
    # A CTE's rows are not counted by the planner, and the ledger's statistics lag a burst
    # (analyzed before its runs were queued, as here): joined to the tasks as they are, the
    # queued runs were scanned once for each task taken (770 ms for a burst's 165 tasks).
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE coordination_jobrun")
    slot = timezone.now()
    runs = JobRun.objects.bulk_create(
        JobRun(job=f"startable.j{n}", slot=slot, status="queued") for n in range(2000)
    )
    for run in runs[:50]:
        _task_row({"args": [run.pk, run.attempt], "kwargs": {}})
    sql, params = take_statement(**_take_options([f"startable.j{n}" for n in range(2000)]))
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        [[plan]] = cursor.fetchone()

    def scans(node: dict):
        yield node
        for child in node.get("Plans", []):
            yield from scans(child)

    on_runs = [
        (n["Node Type"], n.get("Index Name"))
        for n in scans(plan["Plan"])
        if n.get("Relation Name") == "coordination_jobrun"
    ]
    assert sorted(on_runs) == [("Index Scan", "coordination_jobrun_pkey"), ("ModifyTable", None)]


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("paced", "statements", "taken"),
    [
        # Before it knows its pace it counts, for its share of the three (one worker process).
        (False, ["SELECT", "WITH"], 3),
        (True, ["WITH"], 2),
    ],
    ids=["first-burst", "paced"],
)
def test_on_postgresql_a_paced_look_is_the_take_alone(paced, statements, taken):
    reg, jobs = _queued_many(3, Recorder())
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=1)
    if paced:
        process.run_seconds = 0.001

    with CaptureQueriesContext(connection) as captured:
        tasks = process.take_tasks(2)
    process.close()

    assert [q["sql"].split()[0] for q in captured.captured_queries] == statements
    assert len(tasks) == taken


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_paced_look_that_finds_no_task_writes_nothing():
    reg, _ = _declare_many(1, Recorder())
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=1)
    process.run_seconds = 0.001
    beaten = Node.objects.get(name="b/worker-1").last_heartbeat

    with CaptureQueriesContext(connection) as captured:
        assert process.take_tasks(2) == []
    assert [q["sql"].split()[0] for q in captured.captured_queries] == ["WITH"]
    assert Node.objects.get(name="b/worker-1").last_heartbeat == beaten
    process.close()


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_a_waiting_worker_hears_that_the_leader_queued_runs():
    reg, jobs = _declare_many(3, Recorder())
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=1)
    waiter = WorkWaiter(process)
    try:
        wait_until(lambda: waiter.listening and process.changed.is_set(), timeout=10)
        process.changed.clear()  # rung as the LISTEN began, for work queued before it
        for job in jobs:
            make_due(job, ago=timedelta(0))
        tick(reg)
        wait_until(process.changed.is_set, timeout=10)
    finally:
        waiter.close()
        process.close()


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_a_run_delivered_twice_in_one_take_starts_once():
    run = JobRun.objects.create(job="startable.a", slot=timezone.now(), status="queued")
    for _ in range(2):
        _task_row({"args": [run.pk, run.attempt], "kwargs": {}})

    tasks = _take_in_one_statement(["startable.a"])

    assert len(tasks) == 2
    assert [task.started.pk for task in tasks if task.started is not None] == [run.pk]


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_take_heartbeats_takes_and_starts_its_runs_in_one_statement():
    reg, _ = _queued_many(3, Recorder())
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=3)
    process.heartbeat.beaten_at -= 3600  # a beat is due: it goes with the take

    with CaptureQueriesContext(connection) as statements:
        tasks = process.take_tasks(3)
    process.close()

    # The look, then one statement: no transaction of several round trips.
    assert [q["sql"].split()[0] for q in statements.captured_queries] == ["SELECT", "WITH"]
    assert all(task.started is not None for task in tasks) and len(tasks) == 3
    assert set(JobRun.objects.values_list("status", flat=True)) == {JobRun.Status.RUNNING}
    beaten = Node.objects.get(name="b/worker-1").last_heartbeat
    assert beaten >= max(JobRun.objects.values_list("started_at", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_batch_is_taken_in_one_claim_and_every_run_starts_once():
    recorder = Recorder()
    reg, jobs = _queued_many(5, recorder)
    # The same run delivered twice inside one batch: the ledger starts it once.
    first = JobRun.objects.order_by("pk").first()
    DBTaskResult.objects.create(
        args_kwargs={"args": [first.pk, first.attempt], "kwargs": {}},
        task_path=run_queued.module_path,
        queue_name=QUEUE_NAME,
        backend_name=BACKEND_ALIAS,
        run_after=get_date_max(),
    )
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=6)

    with CaptureQueriesContext(connection) as claims:
        tasks = process.take_tasks(10)
    assert len(tasks) == 6
    on_tasks = [q for q in claims.captured_queries if "dbtaskresult" in q["sql"]]
    # The look, then the take: on PostgreSQL one UPDATE ... RETURNING of the rows it locked,
    # elsewhere the locking SELECT and the UPDATE marking them running.
    assert len(on_tasks) == (2 if connection.vendor == "postgresql" else 3)
    process.dispatch(tasks)
    assert process.wait_for_runs(10)
    process.flush()
    process.close()

    assert sorted(recorder.slots) == sorted(JobRun.objects.values_list("slot", flat=True))
    assert len(recorder.slots) == 5
    assert set(JobRun.objects.values_list("status", "node")) == {
        (JobRun.Status.SUCCEEDED, "b/worker-1")
    }
    outcomes = sorted(DBTaskResult.objects.values_list("status", "return_value"))
    assert outcomes == [("SUCCESSFUL", Delivery.RAN)] * 5 + [("SUCCESSFUL", Delivery.TAKEN)]


@pytest.mark.django_db(transaction=True)
def test_the_runs_of_a_batch_run_side_by_side_on_the_process_threads():
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has one writer: a worker process runs one run at a time there")
    together = threading.Barrier(3, timeout=10)

    def meet(ctx):
        together.wait()  # raises BrokenBarrierError unless all three run at once

    reg, jobs = _queued_many(3, meet)
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=3)
    assert process.capacity == 6  # three running, three taken ahead

    assert process.work()
    process.close()

    assert set(JobRun.objects.values_list("status", flat=True)) == {JobRun.Status.SUCCEEDED}


@pytest.mark.django_db(transaction=True)
def test_every_job_function_of_a_batch_begins_before_the_threads_write_their_outcomes():
    # As on the leader's job threads: a burst's runs all start before their bookkeeping,
    # instead of each start waiting for the outcome writes of the runs before it.
    written_at_start = []

    def count_written(ctx):
        written_at_start.append(JobRun.objects.filter(status=JobRun.Status.SUCCEEDED).count())

    reg, jobs = _queued_many(4, count_written)
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=1)
    # However late the claiming thread gets to the batch's second run (a busy machine), the
    # first run's outcome must not be written before the second run begins. The claiming
    # thread waits here, after handing on the first run, for that outcome; it must not come.
    first_outcome = threading.Event()
    run_ended, submit = process._run_ended, process._submit

    def note_ended(**kwargs):
        run_ended(**kwargs)
        first_outcome.set()

    def submit_then_linger(task, *args, **kwargs):
        submit(task, *args, **kwargs)
        if not handed_on:
            first_outcome.wait(0.5)
        handed_on.append(task)

    handed_on = []
    process._run_ended, process._submit = note_ended, submit_then_linger

    assert process.work()
    process.close()

    assert written_at_start == [0, 0, 0, 0]
    assert JobRun.objects.filter(status=JobRun.Status.SUCCEEDED).count() == 4
    assert (
        sorted(DBTaskResult.objects.values_list("status", "return_value"))
        == [("SUCCESSFUL", Delivery.RAN)] * 4
    )


@pytest.mark.django_db(transaction=True)
def test_a_foreign_task_row_is_failed_without_importing_its_path():
    sys.modules.pop("tests.coordination.foreigntask", None)
    DBTaskResult.objects.create(
        args_kwargs={"args": [1, 1], "kwargs": {}},
        task_path="tests.coordination.foreigntask.task",
        queue_name=QUEUE_NAME,
        backend_name=BACKEND_ALIAS,
        run_after=get_date_max(),
    )
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=JobRegistry())

    assert process.work()
    process.close()

    assert "tests.coordination.foreigntask" not in sys.modules
    task = DBTaskResult.objects.get()
    assert task.status == "FAILED"
    assert "tests.coordination.foreigntask.task" in task.traceback
    assert "not Instatic's run task" in task.traceback


@pytest.mark.django_db(transaction=True)
def test_a_scheduled_run_that_ends_as_planned_wakes_no_leader(monkeypatch):
    woken = []
    monkeypatch.setattr("coordination.workers.host.notify_group", woken.append)
    recorder = Recorder()
    reg, jobs = _queued_many(2, recorder)  # queues both; their next slots are an hour on
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=2)

    assert process.work()
    process.close()

    assert len(recorder.slots) == 2
    assert woken == []


@pytest.mark.django_db(transaction=True)
def test_retention_deletes_the_task_rows_of_the_runs_it_deletes():

    reg, jobs = _queued_many(2, Recorder())
    WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg).work()
    gone, kept = JobRun.objects.order_by("pk")
    assert DBTaskResult.objects.count() == 2

    assert ledger.delete_runs([gone.pk]) == 1

    assert [t.args_kwargs["args"][0] for t in DBTaskResult.objects.all()] == [kept.pk]


@pytest.mark.parametrize(
    ("threads", "run_seconds", "held"),
    [
        (8, None, 16),  # no run ended yet: one ahead per thread
        (1, None, 2),
        (8, 1.0, 10),  # slow runs: barely ahead, the other processes get their share
        (8, 0.1, 28),  # a tenth of a second: what the threads start in a quarter second
        (8, 0.001, MAX_HELD),  # trivial runs: by the hundred, at most MAX_HELD
        (8, 0.0, MAX_HELD),
        (200, None, MAX_HELD),
    ],
)
def test_take_ahead_follows_the_pace_of_the_recent_runs(threads, run_seconds, held):
    assert take_ahead(threads, run_seconds) == held


@pytest.mark.parametrize(
    ("threads", "outstanding", "workers", "share"),
    [
        (8, 1000, 6, 167),  # a burst: a sixth each, in one claim (the last looks at 167 ready)
        (8, 10, 6, 16),  # little ready: one ahead per thread, as without a share
        (8, 60, 2, 30),  # slow runs too are shared out evenly
        (8, 5000, 2, MAX_HELD),
        (8, 1000, 0, MAX_HELD),  # no worker node found (its row not yet written): itself
        (1, 3, 1, 3),
    ],
)
def test_a_worker_that_does_not_know_its_pace_takes_its_share_of_what_is_outstanding(
    threads, outstanding, workers, share
):
    assert first_share(threads, outstanding, workers) == share


@pytest.mark.django_db(transaction=True)
def test_a_burst_is_shared_out_among_the_worker_processes_in_their_first_claims():
    reg, jobs = _queued_many(40, Recorder())
    first = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=2)
    second = WorkerProcess("b/worker-2", stop=threading.Event(), registry=reg, threads=2)
    assert first.capacity == 2 * first.thread_count  # no run has ended here yet

    assert len(first.take_tasks(first.capacity)) == 20  # half of the 40 ready
    # Half of the 40 outstanding (20 ready, 20 taken by the first), not half of what is left.
    assert len(second.take_tasks(second.capacity)) == 20
    assert not DBTaskResult.objects.filter(status="READY").exists()
    for process in (first, second):
        process.close()


@pytest.mark.django_db
def test_task_rows_from_arrays_are_the_rows_bulk_create_writes():
    if connection.vendor != "postgresql":
        pytest.skip("the arrays' statement is PostgreSQL's")
    runs = [_run(pk=pk, attempt=attempt, job="batchtest.gone") for pk, attempt in ((7, 1), (8, 3))]
    queueing._insert_tasks(runs)
    by_bulk_create = list(DBTaskResult.objects.order_by("args_kwargs").values())
    DBTaskResult.objects.all().delete()
    queueing._insert_tasks_from_arrays(runs)
    from_arrays = list(DBTaskResult.objects.order_by("args_kwargs").values())

    def comparable(rows):
        assert len({row.pop("id") for row in rows}) == len(runs)
        assert all(row.pop("enqueued_at") is not None for row in rows)
        return rows

    assert comparable(from_arrays) == comparable(by_bulk_create)
    assert [row["args_kwargs"] for row in from_arrays] == [
        {"args": [7, 1], "kwargs": {}},
        {"args": [8, 3], "kwargs": {}},
    ]


@pytest.mark.django_db(transaction=True)
def test_the_pace_of_runs_counts_their_job_functions_not_the_writes_around_them(monkeypatch):
    reg, jobs = _queued_many(2, lambda ctx: None)
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=1)
    record = process.host.finish_run

    def slow_record(run, job, outcome):
        threading.Event().wait(0.3)  # a busy database: the outcome's write takes its time
        return record(run, job, outcome)

    monkeypatch.setattr(process.host, "finish_run", slow_record)
    assert process.work()
    process.close()

    assert set(JobRun.objects.values_list("status", flat=True)) == {JobRun.Status.SUCCEEDED}
    assert process.run_seconds is not None and process.run_seconds < 0.1
    assert process.capacity > 2 * process.thread_count, "quick runs are taken well ahead"


@pytest.mark.django_db(transaction=True)
def test_a_worker_process_knows_its_pace_before_its_first_outcome_is_written(monkeypatch):
    """A burst's first outcomes meet the burst's other writes: the process learns its pace
    as the job function returns, and looks for more work then, not after the write."""
    reg, jobs = _queued_many(1, lambda ctx: None)
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=1)
    writing, written = threading.Event(), threading.Event()
    record = process.host.finish_run

    def held_record(run, job, outcome):
        writing.set()
        written.wait(10)
        return record(run, job, outcome)

    def work():
        try:
            process.work()
        finally:
            connection.close()

    monkeypatch.setattr(process.host, "finish_run", held_record)
    worker = threading.Thread(target=work)
    worker.start()
    try:
        assert writing.wait(10)
        assert process.run_seconds is not None, "paced as its job function returned"
        assert process.capacity > 2 * process.thread_count
    finally:
        written.set()
        worker.join(10)
        process.close()
    assert JobRun.objects.get().status == JobRun.Status.SUCCEEDED


def _one_taken(recorder, **options) -> tuple[WorkerProcess, list]:
    """Queue one run of a job (``options``) and take its task on a one-thread worker process."""
    reg, _ = _queued_many(1, recorder, **options)
    process = WorkerProcess("b/worker-1", stop=threading.Event(), registry=reg, threads=1)
    return process, process.take_tasks(1)


def _end_own_session() -> None:
    """End this thread's database session from another, as the leader's fence does."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    other = connection.get_new_connection(connection.get_connection_params())
    try:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))
    finally:
        other.close()


@pytest.mark.postgresql  # ends the process's own session from another, as the fence does
@pytest.mark.django_db(transaction=True)
def test_task_ends_a_lost_session_kept_from_being_written_are_written_at_the_next_flush():
    process, tasks = _one_taken(Recorder())
    process.dispatch(tasks)
    assert process.wait_for_runs(10)
    _end_own_session()

    with pytest.raises(OperationalError):
        process.flush()
    connection.close()
    process.flush()
    process.close()

    assert list(DBTaskResult.objects.values_list("status", "return_value")) == [
        ("SUCCESSFUL", Delivery.RAN)
    ]


@pytest.mark.postgresql  # ends the process's own session from another, as the fence does
@pytest.mark.django_db(transaction=True)
def test_tasks_taken_whose_runs_a_lost_session_kept_from_starting_are_ended_for_the_sweep():
    recorder = Recorder()
    # A transactional run is taken inside its own transaction, after the dispatch reads it.
    process, tasks = _one_taken(recorder, transactional=True)
    _end_own_session()

    with pytest.raises(OperationalError):
        process.dispatch(tasks)
    connection.close()
    process.flush()
    process.close()

    # The run is still queued and its task ended: the leader's sweep queues it again.
    assert recorder.slots == []
    assert JobRun.objects.get().status == JobRun.Status.QUEUED
    assert list(DBTaskResult.objects.values_list("status", "return_value")) == [
        ("SUCCESSFUL", Delivery.TAKEN)
    ]


@pytest.mark.postgresql  # ends the process's own session from another, as the fence does
@pytest.mark.django_db(transaction=True)
def test_a_claim_first_run_starts_in_the_take_so_a_session_lost_after_it_holds_nothing_back():
    recorder = Recorder()
    process, tasks = _one_taken(recorder)
    assert JobRun.objects.get().status == JobRun.Status.RUNNING  # committed with the take
    _end_own_session()

    assert process.dispatch(tasks) == 1  # no statement before its run is on a thread
    assert process.wait_for_runs(10)
    connection.close()
    process.flush()
    process.close()

    assert len(recorder.slots) == 1
    assert JobRun.objects.get().status == JobRun.Status.SUCCEEDED
    assert list(DBTaskResult.objects.values_list("status", "return_value")) == [
        ("SUCCESSFUL", Delivery.RAN)
    ]


@pytest.mark.django_db(transaction=True)
def test_a_tick_that_queues_every_run_for_workers_confirms_its_lock_once(monkeypatch):
    # The queueing transaction's fence confirms the lock; a check before it too would cost a
    # burst a round trip before its tasks are in.
    checks = []
    make_lock = loop.make_lock

    def counting_lock(*args, **kwargs):
        lock = make_lock(*args, **kwargs)
        still_held = lock.still_held

        def counted():
            checks.append(True)
            return still_held()

        lock.still_held = counted
        return lock

    monkeypatch.setattr(loop, "make_lock", counting_lock)
    _queued_many(3, Recorder())

    assert JobRun.objects.filter(status=JobRun.Status.QUEUED).count() == 3
    assert len(checks) == 1
