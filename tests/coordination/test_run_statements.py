"""What a run costs the database: slots claimed together, an outcome in one statement.

Statements are recorded on every connection the engine opens (the loop's and the job
threads'), through ``connection_created``, with whether each ran inside a transaction; a
thread's connection set-up is not counted (threads keep their connection between runs).
"""

import threading
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection
from django.db.backends.signals import connection_created

from coordination import ledger
from coordination.clock import database_now
from coordination.models import JobRun, JobState
from coordination.registry import JobRegistry, make_job
from coordination.schedules import every
from tests.coordination.enginekit import (
    GROUP,
    Recorder,
    centered_every,
    declare,
    make_due,
    tick,
)

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def statements():
    """Yield a list that fills with (thread name, SQL, in a transaction) of engine threads."""
    seen: list[tuple[str, str, bool]] = []

    def record(execute, sql, params, many, context):
        name = threading.current_thread().name
        if name.startswith(("jobs:", "group:")):
            seen.append((name, sql, context["connection"].in_atomic_block))
        return execute(sql, params, many, context)

    def created(sender, connection, **kwargs):
        connection.execute_wrappers.append(record)

    connection_created.connect(created)
    try:
        yield seen
    finally:
        connection_created.disconnect(created)


def test_a_claim_first_run_costs_its_job_thread_one_statement_on_postgresql():
    reg, job = declare(Recorder())
    make_due(job, ago=timedelta(seconds=1))
    with statements() as seen:
        tick(reg)
    on_job_thread = [(sql, atomic) for name, sql, atomic in seen if name.startswith("jobs:")]
    assert JobRun.objects.get(job=job.name).status == JobRun.Status.SUCCEEDED
    # The claim was made by the loop; the job thread only records the outcome.
    assert not any(sql.startswith("INSERT") for sql, _ in on_job_thread)
    if connection.vendor == "postgresql":
        assert len(on_job_thread) == 1, on_job_thread
        assert on_job_thread[0][0].startswith("WITH finished AS (UPDATE")
        assert not on_job_thread[0][1], "one statement needs no transaction around it"
    else:
        updates = [(sql, atomic) for sql, atomic in on_job_thread if sql.startswith("UPDATE")]
        assert len(updates) == 2 and all(atomic for _, atomic in updates), on_job_thread


def test_slots_due_together_are_claimed_in_one_insert_committed_before_any_job_starts():
    seen_running = []

    def job_func(ctx):
        # The job thread's own connection sees the row: the loop's claim is committed.
        seen_running.append(JobRun.objects.get(job=ctx.job.name, slot=ctx.slot).status)

    reg = JobRegistry()
    schedule = centered_every(timedelta(minutes=1))
    jobs = [
        reg.register(
            make_job(job_func, name=f"enginetest.many_{n:02d}", group=GROUP, schedule=schedule)
        )
        for n in range(40)
    ]
    for job in jobs:
        make_due(job, ago=timedelta(seconds=1))
    slot = schedule.slot(0)
    with statements() as seen:
        tick(reg)
    inserts = [
        sql for _, sql, _ in seen if sql.startswith("INSERT") and "coordination_jobrun" in sql
    ]
    assert len(inserts) == 1, "one INSERT claims every slot due in the tick"
    if connection.vendor == "postgresql":
        # Two arrays, not 15 parameters a row: assembling those delayed every job's start.
        assert "unnest(" in inserts[0] and inserts[0].count("%s") < 20, inserts[0]
    assert seen_running == [JobRun.Status.RUNNING] * 40
    runs = JobRun.objects.filter(job__in=[job.name for job in jobs])
    assert runs.count() == 40
    assert set(runs.values_list("status", flat=True)) == {JobRun.Status.SUCCEEDED}
    assert set(runs.values_list("slot", flat=True)) == {slot}
    assert not runs.filter(started_at__isnull=True).exists()
    assert set(runs.values_list("attempt", "trigger", "node")) == {(1, "schedule", "engine-node")}
    states = JobState.objects.filter(name__in=[job.name for job in jobs])
    assert set(states.values_list("next_due", flat=True)) == {slot + timedelta(minutes=1)}


def test_a_slot_another_node_claimed_is_skipped_and_the_others_still_run():
    recorder = Recorder()
    reg = JobRegistry()
    schedule = centered_every(timedelta(minutes=1))
    jobs = [
        reg.register(
            make_job(recorder, name=f"enginetest.race_{n}", group=GROUP, schedule=schedule)
        )
        for n in range(3)
    ]
    for job in jobs:
        make_due(job, ago=timedelta(seconds=1))
    slot = schedule.slot(0)
    JobRun.objects.create(
        job=jobs[1].name, slot=slot, status=JobRun.Status.SUCCEEDED, node="other", node_instance="x"
    )
    tick(reg)
    assert recorder.slots == [slot, slot], "the taken slot is not run again"
    taken = JobRun.objects.get(job=jobs[1].name, slot=slot)
    assert (taken.node, taken.status) == ("other", JobRun.Status.SUCCEEDED)
    for job in (jobs[0], jobs[2]):
        assert JobRun.objects.get(job=job.name, slot=slot).status == JobRun.Status.SUCCEEDED
    next_slots = set(JobState.objects.values_list("next_due", flat=True))
    assert next_slots == {slot + timedelta(minutes=1)}, "every job moved on, the taken one too"


def test_claiming_together_returns_only_the_rows_this_node_inserted():
    job = make_job(
        Recorder(), name="enginetest.direct", group=GROUP, schedule=every(timedelta(minutes=1))
    )
    other = make_job(
        Recorder(), name="enginetest.direct2", group=GROUP, schedule=every(timedelta(minutes=1))
    )
    now = database_now().replace(microsecond=0)
    for j in (job, other):
        JobState.objects.create(name=j.name, group=GROUP, next_due=now)
    JobRun.objects.create(job=other.name, slot=now, status=JobRun.Status.SUCCEEDED, node="n")
    later = now + timedelta(minutes=1)
    claimed = ledger.claim_scheduled(
        [(job, now, later), (other, now, later)], node="me", instance="i-me"
    )
    assert list(claimed) == [job.name]
    assert claimed[job.name].pk == JobRun.objects.get(job=job.name, slot=now).pk
    assert JobRun.objects.get(job=other.name, slot=now).node == "n"
    assert set(JobState.objects.values_list("next_due", flat=True)) == {later}


@pytest.mark.parametrize("status", [JobRun.Status.RUNNING, JobRun.Status.ABANDONED])
def test_an_outcome_writes_the_run_and_the_state_both_or_neither(status):
    job = make_job(
        Recorder(), name="enginetest.finish", group=GROUP, schedule=every(timedelta(minutes=1))
    )
    now = database_now()
    JobState.objects.create(name=job.name, group=GROUP, next_due=now)
    run = JobRun.objects.create(
        job=job.name, slot=now, status=status, node="me", node_instance="i-me"
    )
    paused = ledger.finish_with_state(
        run,
        job,
        status=JobRun.Status.SUCCEEDED,
        duration=0.5,
        error="",
        instance="i-me",
        retry_at=None,
        slot=now,
        lateness=0.1,
        node="me",
        next_due=None,
    )
    state = JobState.objects.get(name=job.name)
    run.refresh_from_db()
    if status == JobRun.Status.RUNNING:
        assert paused is False
        assert run.status == JobRun.Status.SUCCEEDED and run.duration == 0.5
        assert state.last_status == JobRun.Status.SUCCEEDED and state.last_duration == 0.5
    else:
        assert paused is None, "a run abandoned meanwhile is not this node's to finish"
        assert run.status == JobRun.Status.ABANDONED
        assert state.last_status == "" and state.last_slot is None


def test_a_tick_with_nothing_due_is_one_read_of_only_the_columns_it_plans_with():
    """A thousand jobs' tick must not fetch error texts or probe the ledger once per job."""
    from django.test.utils import CaptureQueriesContext

    from coordination.scheduler import Scheduler

    reg, job = declare(Recorder())
    scheduler = Scheduler(groups=[GROUP], node_name="tick-node", registry=reg)
    scheduler.register()
    loop = scheduler.loops[0]
    try:
        assert loop.supervision.try_lead(wait=0)
        loop.tick()  # the first tick creates the state (maintenance)
        with CaptureQueriesContext(connection) as queries:
            loop.tick()
    finally:
        loop.lock.close()
        loop.job_threads.shutdown()
    (read,) = [q["sql"] for q in queries.captured_queries]
    assert "last_error" not in read
    assert "EXISTS" not in read.upper(), "one IN over the runs in progress, not a probe per job"
    assert JobState.objects.get(name=job.name).next_due == job.schedule.slot(1)
