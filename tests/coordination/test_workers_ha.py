"""Runs on workers with real processes: schedulers with worker processes, worker-only nodes.

The jobs are in ``tests/coordination/workersapp`` (group ``hatest_workers``); each writes an
``Effect`` that names the worker process that ran it. The faults are real: a worker-only node
killed with SIGKILL, a worker process frozen with SIGSTOP past the lease, a worker's session
ended by the server, a database server restarted with runs queued. After each, the ledger
must account for every slot once (``settle`` and ``assert_ledger_settled``) and no slot of a
transactional job may have its effect committed twice.
"""

import os
import re
import signal

import pytest
from django.db import connection, transaction
from django.db.models import Count

from coordination import services
from coordination.clock import database_now
from coordination.ledger import VANISHED_REASON
from coordination.models import JobRun, JobState, Node
from coordination.workers.tasks import QUEUE_NAME
from devtools.freezing import freeze
from tests.coordination.test_worker_pool import children
from tests.jobsapp.models import Effect
from tests.support.databases import suite_server
from tests.support.gates import AdvisoryGate
from tests.support.polling import wait_until
from tests.support.processes import ManagedProcess

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

GROUP = "hatest_workers"
ENV = {"INSTATIC_TEST_EXTRA_APPS": "tests.coordination.workersapp", "HATEST_SLOW_SECONDS": "0.2"}
SLOW = "workers.slow"  # transactional, every 2 s, works HATEST_SLOW_SECONDS, missed="all"
CLAIMED = "workers.claimed"  # claim first, every 2 s, works HATEST_SLOW_SECONDS, retried
RETRIED = "workers.retried"  # claim first, run on request, retried
JOBS = ("workers.tick", SLOW, CLAIMED, RETRIED)
TRANSACTIONAL = ("workers.tick", SLOW)
#: Statuses a run ends in, and the ones that must say why.
ENDED = {"succeeded", "failed", "timed_out", "abandoned", "missed"}
IN_FLIGHT = r"run of {job} slot (\S+) in flight"
#: Why a dead worker's claim-first run is abandoned: its heartbeat went stale (the sweep, or the
#: leader's maintenance, whichever comes first), or, sooner, the server shows none of its
#: sessions (the leader's check for vanished nodes).
ABANDONED_REASONS = {
    "its worker process stopped heartbeating",
    "its node stopped heartbeating during the run",
    VANISHED_REASON,
}


def no_slot_twice(job: str) -> None:
    doubled = Effect.objects.filter(job=job).values("slot").annotate(n=Count("id")).filter(n__gt=1)
    assert not doubled.exists(), list(doubled)


def in_flight(proc: ManagedProcess, job: str, *, timeout: float = 30.0) -> JobRun:
    """Wait until ``proc`` logs a run of ``job`` in flight; return that slot's ledger row."""
    pattern = IN_FLIGHT.format(job=re.escape(job))
    proc.wait_for_log(pattern, timeout=timeout)
    slot = re.search(pattern, proc.log())[1]
    return next(r for r in JobRun.objects.filter(job=job) if r.slot.isoformat() == slot)


def run_becomes(run: JobRun, *, timeout: float = 30.0, **wanted) -> JobRun:
    """Wait until ``run``'s ledger row matches ``wanted``; return it (fail showing the row)."""
    found = wait_until(
        lambda: JobRun.objects.filter(pk=run.pk, **wanted).first(), timeout=timeout, fail=False
    )
    assert found, f"not {wanted} within {timeout}s: {JobRun.objects.filter(pk=run.pk).values()}"
    return found


def open_tasks():
    from django_tasks_db.models import DBTaskResult

    return DBTaskResult.objects.filter(queue_name=QUEUE_NAME, status__in=["READY", "RUNNING"])


def settle(*, timeout: float = 30.0) -> None:
    """Pause the group's jobs and wait until no run is queued or running and no task is
    left open: what was queued is run, or recorded missed, by the workers still up.

    A leader's tick that read the jobs' states just before the pause can still claim a slot
    as it lands, so quiet counts only once a later tick has seen the pause: the tick job,
    paused last and due every second, has a slot recorded missed as paused. A leader does
    not wake for a paused job's slots (a later tick records them), and with every job
    paused it may sleep its longest: the wait wakes it, as any change would.
    """
    for name in (RETRIED, CLAIMED, SLOW, "workers.tick"):
        services.set_paused(name, True, reason="the test is settling the cluster")

    def a_tick_saw_the_pause() -> bool:
        with transaction.atomic():
            services.notify_group(GROUP)
        return JobRun.objects.filter(
            job="workers.tick", status=JobRun.Status.MISSED, reason=JobRun.MissedReason.PAUSED
        ).exists()

    planned = wait_until(a_tick_saw_the_pause, timeout=timeout, interval=0.5, fail=False)
    assert planned, f"the leader did not plan the paused jobs: {cluster_state()}"
    quiet = wait_until(
        lambda: (
            not JobRun.objects.filter(JobRun.outstanding(), job__in=JOBS).exists()
            and not open_tasks().exists()
        ),
        timeout=timeout,
        fail=False,
    )
    assert quiet, f"not settled: {cluster_state()}"


def cluster_state() -> str:
    """The runs not ended, the open tasks and the jobs' states, as a failing wait found them."""
    runs = JobRun.objects.filter(JobRun.outstanding()).values(
        "job", "slot", "status", "trigger", "node", "attempt", "queued_at", "started_at"
    )
    states = JobState.objects.filter(name__in=JOBS).values(
        "name", "paused", "next_due", "wake_at", "last_status", "last_finished_at"
    )
    tasks = open_tasks().values("status", "args_kwargs")
    return f"runs {list(runs)}; tasks {list(tasks)}; states {list(states)}"


def assert_ledger_settled() -> None:
    """Every claimed slot ended, and the ones that did not succeed say why."""
    for run in JobRun.objects.filter(job__in=JOBS):
        assert run.status in ENDED, (run.job, run.slot, run.status)
        if run.status == JobRun.Status.MISSED:
            assert run.reason, (run.job, run.slot)
        elif run.status != JobRun.Status.SUCCEEDED:
            assert run.error, (run.job, run.slot, run.status)
    assert not open_tasks().filter(status="RUNNING").exists()
    for job in TRANSACTIONAL:
        no_slot_twice(job)


def test_a_scheduler_with_workers_runs_its_jobs_on_its_worker_processes(schedulers):
    schedulers("wk-1", GROUP, env=ENV, extra_args=["--workers", "2"])

    wait_until(lambda: Effect.objects.filter(job="workers.tick").count() >= 5, timeout=60)
    wait_until(lambda: Effect.objects.filter(job="workers.claimed").count() >= 2, timeout=60)

    ran_on = set(
        JobRun.objects.filter(status=JobRun.Status.SUCCEEDED).values_list("node", flat=True)
    )
    assert ran_on and ran_on <= {"wk-1/worker-1", "wk-1/worker-2"}, ran_on
    assert set(Effect.objects.values_list("node", flat=True)) <= {"wk-1/worker-1", "wk-1/worker-2"}
    assert set(Node.objects.filter(role=Node.Role.WORKER).values_list("name", flat=True)) == {
        "wk-1/worker-1",
        "wk-1/worker-2",
    }
    for job in ("workers.tick", "workers.claimed"):
        no_slot_twice(job)


# --- a worker-only node killed with SIGKILL mid-run ---------------------------------------------
#: The slow jobs work 1 s (long enough to be killed mid-run, shorter than the lease: on SQLite a
#: transactional run's write lock holds off its own worker's heartbeat), on three worker
#: processes (two beside the scheduler, one killed), so a retry finds its job free.
KILL_ENV = {**ENV, "HATEST_SLOW_SECONDS": "1"}


def test_a_killed_worker_nodes_transactional_slot_runs_once_on_another_worker(schedulers, workers):
    # The victim is the only worker until its run is in flight, so the run is surely its.
    survivor = schedulers("ws", GROUP, env=KILL_ENV, extra_args=["--workers", "0"])
    victim = workers("wv", env=KILL_ENV)
    run = in_flight(victim, SLOW)

    victim.signal(signal.SIGKILL)
    assert victim.wait(timeout=10) == -signal.SIGKILL
    workers("wo", env=KILL_ENV)

    done = run_becomes(run, status="succeeded")
    assert done.node == "wo/worker-1" and done.attempt == run.attempt
    effects = list(Effect.objects.filter(job=SLOW, slot=run.slot).values_list("node", flat=True))
    assert effects == [done.node], effects  # the killed run's effect rolled back with it
    # The killed process may have held more than this run (a batch, on its threads).
    assert re.search(r"queued \d+ run\(s\) again whose task was lost", survivor.log())
    settle()
    assert_ledger_settled()


def test_a_killed_worker_nodes_claim_first_run_is_abandoned_and_retried_on_another(
    schedulers, workers
):
    schedulers("ws", GROUP, env=KILL_ENV, extra_args=["--workers", "0"])
    victim = workers("wv", env=KILL_ENV)
    victim.wait_for_log(r"\[worker wv/worker-1\] waiting for runs")
    wait_until(lambda: JobState.objects.filter(name=RETRIED).exists(), timeout=15)
    assert services.request_run(RETRIED, requested_by="editor")
    run = in_flight(victim, RETRIED)
    assert run.status == JobRun.Status.RUNNING and run.node == "wv/worker-1"

    victim.signal(signal.SIGKILL)
    assert victim.wait(timeout=10) == -signal.SIGKILL
    # Abandoned, and queued again at once for a worker (none is up until the next line).
    queued = run_becomes(run, trigger="retry", status="queued")
    assert queued.error in ABANDONED_REASONS, queued.error
    workers("wo", env=KILL_ENV)

    retry = run_becomes(run, trigger="retry", status="succeeded")
    assert retry.node == "wo/worker-1" and retry.attempt == run.attempt + 1
    effects = Effect.objects.filter(job=RETRIED, slot=run.slot).values_list("node", flat=True)
    assert sorted(effects) == ["wo/worker-1", "wv/worker-1"]  # once per attempt
    settle()
    assert_ledger_settled()


def test_a_busy_jobs_abandoned_run_on_a_killed_worker_is_retried(schedulers, workers):
    # The victim is the only worker until its run is in flight, so the run is surely its.
    schedulers("ws", GROUP, env=KILL_ENV, extra_args=["--workers", "0"])
    victim = workers("wv", env=KILL_ENV)
    run = in_flight(victim, CLAIMED)

    victim.signal(signal.SIGKILL)
    other = workers("wo", processes=2, env=KILL_ENV)
    assert run_becomes(run, error__gt="").error in ABANDONED_REASONS

    # Its job keeps a slot due every 2 s that takes 1 s: the retry still gets its turn, once
    # the other node's workers are up (starting them takes seconds on a busy machine).
    for index in (1, 2):
        other.wait_for_log(rf"\[worker wo/worker-{index}\] waiting for runs", timeout=60)
    retry = run_becomes(run, trigger="retry", status="succeeded")
    assert retry.node.startswith("wo/worker-")


# --- a worker process frozen past the lease mid-run --------------------------------------------
# A database server: on SQLite a frozen worker's run holds the only write lock, and nothing
# can fence it (docs/ha.md, "Workers").
@pytest.mark.server
def test_a_frozen_worker_is_fenced_its_slot_runs_once_elsewhere_and_its_pool_restarts_it(
    schedulers, workers
):
    schedulers("ws", GROUP, env=KILL_ENV, extra_args=["--workers", "0"])
    victim = workers("wv", env=KILL_ENV)
    [frozen_pid] = wait_until(lambda: children(victim.pid), timeout=15)
    run = in_flight(victim, SLOW)
    frozen = Node.objects.get(name="wv/worker-1")
    freeze(frozen_pid)
    try:
        other = workers("wo", env=KILL_ENV)
        done = run_becomes(run, status="succeeded")
        assert done.node == "wo/worker-1" and done.attempt == run.attempt
        fenced = Node.objects.get(instance=frozen.instance)
        assert fenced.stopped_at is not None  # the leader marked it fenced
    finally:
        os.kill(frozen_pid, signal.SIGCONT)

    victim.wait_for_log(r"\[worker wv/worker-1\] fenced: this worker process is no longer live")
    victim.wait_for_log(rf"worker process 1 \(pid {frozen_pid}\) of node wv exited")
    victim.wait_for_log(r"\[worker wv/worker-1\] waiting for runs", count=2)
    restarted = Node.objects.get(name="wv/worker-1")
    assert restarted.instance != frozen.instance and restarted.stopped_at is None
    effects = list(Effect.objects.filter(job=SLOW, slot=run.slot).values_list("node", flat=True))
    assert effects == ["wo/worker-1"], effects  # the frozen run committed nothing
    assert other.alive()
    settle()
    assert_ledger_settled()


# --- a worker's session ended by the server mid-run ---------------------------------------------
@pytest.mark.postgresql
def test_a_workers_session_ended_mid_run_rolls_the_run_back_and_its_slot_runs_once(
    schedulers, workers
):
    schedulers("ws", GROUP, env=KILL_ENV, extra_args=["--workers", "0"])
    victim = workers("wv", env=KILL_ENV)
    run = in_flight(victim, SLOW)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s AND state LIKE 'idle in transaction%%'",
            ["wv/worker-1/work"],
        )
        # One session per transactional run in flight on the process's threads.
        assert cursor.fetchone()[0] >= 1

    done = run_becomes(run, status="succeeded")
    assert done.attempt == run.attempt
    effects = list(Effect.objects.filter(job=SLOW, slot=run.slot).values_list("node", flat=True))
    assert effects == ["wv/worker-1"], effects
    log = victim.log()
    assert "could not confirm this worker process is live before commit" in log
    assert not re.search(r"task \S+ failed|Traceback", log), log[-3000:]
    settle()
    assert_ledger_settled()


# --- the leader stopped at the commit of its queueing transaction ------------------------------
GATE_KEY = 31032


def torn_pairs() -> list[tuple]:
    """Return committed halves without their other half, in one snapshot: a queued ledger row
    with no task row for its attempt, or a task row with no ledger row."""
    from django_tasks_db.models import DBTaskResult

    tasks, runs = DBTaskResult._meta.db_table, JobRun._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 'run', r.id FROM {runs} r WHERE r.status = 'queued' AND NOT EXISTS ("
            f" SELECT 1 FROM {tasks} t WHERE t.queue_name = %s"
            "  AND (t.args_kwargs->'args'->>0)::bigint = r.id"
            "  AND (t.args_kwargs->'args'->>1)::bigint = r.attempt)"
            f" UNION ALL SELECT 'task', (t.args_kwargs->'args'->>0)::bigint FROM {tasks} t"
            f" WHERE t.queue_name = %s AND NOT EXISTS (SELECT 1 FROM {runs} r"
            "  WHERE r.id = (t.args_kwargs->'args'->>0)::bigint)",
            [QUEUE_NAME, QUEUE_NAME],
        )
        return list(cursor.fetchall())


@pytest.fixture
def task_insert_gate():
    """Make the insert of Instatic's task rows (the last write of a leader's queueing
    transaction) wait while the test holds the advisory lock ``GATE_KEY``."""
    from django_tasks_db.models import DBTaskResult

    table = DBTaskResult._meta.db_table
    gate = AdvisoryGate(
        GATE_KEY,
        install=[
            "CREATE FUNCTION instatic_task_gate() RETURNS trigger LANGUAGE plpgsql AS"
            f" $$ BEGIN PERFORM pg_advisory_xact_lock_shared({GATE_KEY}); RETURN NEW; END $$",
            f"CREATE TRIGGER instatic_task_gate BEFORE INSERT ON {table} FOR EACH ROW"
            f" WHEN (NEW.queue_name = '{QUEUE_NAME}') EXECUTE FUNCTION instatic_task_gate()",
        ],
        drop=[
            f"DROP TRIGGER IF EXISTS instatic_task_gate ON {table}",
            "DROP FUNCTION IF EXISTS instatic_task_gate()",
        ],
    )
    try:
        yield gate
    finally:
        gate.close()


@pytest.mark.postgresql
def test_a_leader_killed_at_the_commit_of_its_queueing_leaves_no_half_and_the_next_queues(
    task_insert_gate, schedulers, workers
):
    # The gate goes last, after the frozen leader is stopped (it holds the gated table).
    old = schedulers("lq-old", GROUP, env=KILL_ENV, extra_args=["--workers", "0"])
    # The old leader's first queueing transaction has inserted its queued ledger rows and
    # waits at the insert of their task rows; once stopped there, the insert finishes and
    # the transaction sits open, at its commit.
    waiting = wait_until(
        lambda: task_insert_gate.waiting(node="lq-old"), timeout=30, message=old.log()[-3000:]
    )
    old.signal(signal.SIGSTOP)
    task_insert_gate.open()
    task_insert_gate.wait_passed(waiting, old.log()[-3000:])
    assert torn_pairs() == []
    # Nothing of the open transaction shows. (A slot the slow start of a busy machine let
    # pass may be recorded missed, in a transaction of its own: that is no half of this one.)
    shown = JobRun.objects.exclude(status=JobRun.Status.MISSED)
    assert not shown.exists(), list(shown.values("job", "slot", "status", "node"))
    assert not open_tasks().exists()
    slot = JobState.objects.get(name=SLOW).next_due  # what the old leader was queueing

    old.signal(signal.SIGKILL)
    assert old.wait(timeout=10) == -signal.SIGKILL
    schedulers("lq-new", GROUP, env=KILL_ENV, extra_args=["--workers", "0"])
    queued = wait_until(lambda: JobRun.objects.filter(job=SLOW, slot=slot).first(), timeout=30)
    assert queued.node == "lq-new" and queued.status == JobRun.Status.QUEUED
    assert torn_pairs() == []
    workers("lq-w", env=KILL_ENV)

    done = run_becomes(queued, status="succeeded")
    assert done.node == "lq-w/worker-1"
    assert Effect.objects.filter(job=SLOW, slot=slot).count() == 1
    assert torn_pairs() == []
    settle()
    assert_ledger_settled()
    assert torn_pairs() == []


# --- a database restart while runs are queued ----------------------------------------------------
@pytest.mark.server
def test_runs_queued_across_a_database_restart_each_run_once_when_a_worker_starts(
    schedulers, workers
):
    server = suite_server()
    if server is None:
        pytest.skip("the database server was not started by the test suite")
    leader = schedulers("rq", GROUP, env=ENV, extra_args=["--workers", "0"])
    # No worker: each job's run waits in the queue (its next slots are missed: overlap).
    wait_until(lambda: JobRun.objects.filter(status="queued").count() >= 3, timeout=30)
    connection.close()
    server.restart()
    connection.close()
    restarted = database_now()
    wait_until(
        lambda: Node.objects.filter(name="rq", last_heartbeat__gt=restarted).exists(),
        timeout=30,
        message=f"the leader did not heartbeat after the restart:\n{leader.log()[-3000:]}",
    )
    queued = list(JobRun.objects.filter(status="queued"))
    assert {run.job for run in queued} >= {"workers.tick", SLOW, CLAIMED}, queued
    workers("rq-w", env=ENV)

    for run in queued:
        done = run_becomes(run, status="succeeded")
        assert done.node == "rq-w/worker-1" and done.attempt == run.attempt
        assert Effect.objects.filter(job=run.job, slot=run.slot).count() == 1
    settle()
    assert_ledger_settled()
