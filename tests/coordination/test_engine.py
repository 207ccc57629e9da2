"""The scheduler engine in one process: policies, outcomes, controls, declarations.

Each test drives real ticks through ``Scheduler(once=True)`` against the real test database
(threads use their own connections, hence ``transaction=True``); due times are set relative to
the database clock, never the test machine's, and periodic jobs whose runs are counted are on
a grid centred on the test's start (``centered_every``), so where the clock falls (just
before a whole second, minute or hour) changes no count.
"""

import threading
from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import override_settings

from coordination import services
from coordination.checks import check_job_declarations
from coordination.clock import database_now
from coordination.liveness import work_application_name
from coordination.models import JobRun, JobState, Node, NodeSession
from coordination.registry import JobDeclarationError, JobRegistry, Missed, make_job
from coordination.scheduler import Scheduler
from coordination.schedules import Every, WhenDue, every, hourly
from tests.coordination.enginekit import (
    GROUP,
    Recorder,
    centered_every,
    declare,
    ledger_slots,
    make_due,
    ran,
    tick,
)
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

MINUTE = timedelta(minutes=1)


def running_on_a_dead_node(job) -> datetime:
    """Record a run of ``job`` in progress, for the slot five minutes ago, on a node that
    stopped heartbeating then; return that moment."""
    stale = database_now() - timedelta(minutes=5)
    Node.objects.create(
        name="dead", instance="dead0", host="h", pid=1, started_at=stale, last_heartbeat=stale
    )
    JobRun.objects.create(
        job=job.name,
        slot=stale,
        status=JobRun.Status.RUNNING,
        node="dead",
        node_instance="dead0",
    )
    return stale


def test_first_tick_creates_state_at_the_next_slot_without_running():
    recorder = Recorder()
    reg, job = declare(recorder)
    tick(reg)
    assert JobState.objects.get(name=job.name).next_due == job.schedule.slot(1)
    assert recorder.slots == []


def test_latest_policy_runs_the_newest_missed_slot_once_and_records_the_rest():
    recorder = Recorder()
    reg, job = declare(recorder, schedule=centered_every(MINUTE), missed=Missed.LATEST)
    make_due(job, ago=5 * MINUTE)
    tick(reg)
    assert recorder.slots == [job.schedule.slot(0)]
    assert ledger_slots(job, JobRun.Status.MISSED) == job.schedule.slot_range(-5, -1)
    assert ledger_slots(job, JobRun.Status.SUCCEEDED) == [job.schedule.slot(0)]
    state = JobState.objects.get(name=job.name)
    assert state.next_due == job.schedule.slot(1)
    assert state.missed_count == 5


@override_settings(INSTATIC_MISFIRE_GRACE=0.001)
def test_skip_policy_runs_nothing_late_and_records_every_missed_slot():
    recorder = Recorder()
    reg, job = declare(recorder, missed=Missed.SKIP)
    make_due(job, ago=timedelta(hours=3))
    tick(reg)
    assert recorder.slots == []
    assert ledger_slots(job, JobRun.Status.MISSED) == job.schedule.slot_range(-3, 0)
    assert JobState.objects.get(name=job.name).next_due == job.schedule.slot(1)


def test_all_policy_catches_up_within_the_window_oldest_first():
    recorder = Recorder()
    reg, job = declare(
        recorder, schedule=centered_every(MINUTE), missed=Missed.ALL, missed_window=5 * MINUTE
    )
    make_due(job, ago=20 * MINUTE)
    tick(reg)
    # The window reaches back 5 minutes, to halfway between slot(-5) and slot(-4).
    assert recorder.slots == job.schedule.slot_range(-4, 0)
    assert ledger_slots(job, JobRun.Status.SUCCEEDED) == job.schedule.slot_range(-4, 0)
    assert ledger_slots(job, JobRun.Status.MISSED) == job.schedule.slot_range(-20, -5)


def test_a_claimed_slot_is_not_run_again():
    recorder = Recorder()
    reg, job = declare(recorder)
    slot = make_due(job, ago=timedelta(seconds=1))
    JobRun.objects.create(job=job.name, slot=slot, status=JobRun.Status.SUCCEEDED, node="other")
    tick(reg)
    assert recorder.slots == []
    assert JobState.objects.get(name=job.name).next_due == slot + timedelta(hours=1)


def test_transactional_failure_rolls_back_the_work_and_records_the_failure():
    from tests.jobsapp.models import Effect

    def failing(ctx):
        Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)
        raise ValueError("bad data in slot")

    reg, job = declare(failing, transactional=True)
    make_due(job, ago=timedelta(seconds=1))
    tick(reg)
    run = ran(job)
    assert run.status == JobRun.Status.FAILED
    assert "ValueError: bad data in slot" in run.error
    assert not Effect.objects.exists()
    state = JobState.objects.get(name=job.name)
    assert state.consecutive_failures == 1 and state.last_status == "failed"


def test_a_failed_transactional_catch_up_still_records_the_missed_slots():
    def failing(ctx):
        raise RuntimeError("fails after downtime")

    reg, job = declare(failing, schedule=centered_every(MINUTE), transactional=True)
    make_due(job, ago=5 * MINUTE)
    tick(reg)
    assert ledger_slots(job, JobRun.Status.FAILED) == [job.schedule.slot(0)]
    assert ledger_slots(job, JobRun.Status.MISSED) == job.schedule.slot_range(-5, -1), (
        "every slot is in the ledger"
    )


@pytest.mark.parametrize("transactional", [True, False])
def test_catching_up_several_slots_moves_the_job_one_slot_at_a_time(transactional):
    seen = []

    def record_next_due(ctx):
        seen.append(JobState.objects.get(name=ctx.job.name).next_due)

    reg, job = declare(
        record_next_due,
        schedule=centered_every(MINUTE),
        missed=Missed.ALL,
        missed_window=4 * MINUTE,
        transactional=transactional,
    )
    make_due(job, ago=3 * MINUTE)
    tick(reg)
    ran = ledger_slots(job, JobRun.Status.SUCCEEDED)
    assert ran == job.schedule.slot_range(-3, 0) and len(seen) == 4
    # While slot N runs, the job's durable next slot is never beyond N + 1 (a crash loses none).
    for slot, next_due in zip(ran, seen, strict=True):
        assert next_due <= slot + MINUTE


@override_settings(INSTATIC_FAILURE_PAUSE_THRESHOLD=2)
def test_failures_in_a_row_pause_the_job_and_a_success_resets_the_count():
    recorder = Recorder(fail=True)
    reg, job = declare(recorder)
    make_due(job, ago=timedelta(0))
    JobState.objects.filter(name=job.name).update(next_due=database_now() + timedelta(hours=1))
    for _ in range(2):
        services.request_run(job.name, requested_by="test")
        tick(reg)
    state = JobState.objects.get(name=job.name)
    assert state.paused and state.consecutive_failures == 2
    assert "2 failures" in state.paused_reason
    slot = make_due(job, ago=timedelta(seconds=1))
    tick(reg)
    assert len(recorder.slots) == 2, "a paused job does not run on schedule"
    skipped = JobRun.objects.get(job=job.name, status=JobRun.Status.MISSED)
    assert skipped.reason == JobRun.MissedReason.PAUSED, "its slot is recorded, not lost"
    assert skipped.slot == slot == job.schedule.slot(0)
    services.set_paused(job.name, False)
    recorder.fail = False
    services.request_run(job.name, requested_by="test")
    tick(reg)
    state = JobState.objects.get(name=job.name)
    assert not state.paused and state.consecutive_failures == 0 and state.last_status == "succeeded"


def test_run_now_runs_a_paused_job_and_records_it_as_manual():
    recorder = Recorder()
    reg, job = declare(recorder, schedule=hourly())
    make_due(job, ago=timedelta(0), paused=True)
    JobState.objects.filter(name=job.name).update(next_due=database_now() + timedelta(hours=1))
    assert services.request_run(job.name, requested_by="editor-ann")
    tick(reg)
    run = JobRun.objects.get(job=job.name)
    assert run.trigger == JobRun.Trigger.MANUAL and run.requested_by == "editor-ann"
    assert run.status == JobRun.Status.SUCCEEDED
    state = JobState.objects.get(name=job.name)
    assert state.run_requested_at is None and state.paused


def test_abandoned_runs_of_dead_nodes_are_marked_and_retried_when_asked():
    recorder = Recorder()
    reg, job = declare(recorder, schedule=hourly(), retry_abandoned=True)
    make_due(job, ago=timedelta(0))
    JobState.objects.filter(name=job.name).update(next_due=database_now() + timedelta(hours=1))
    stale = database_now() - timedelta(minutes=5)
    Node.objects.create(
        name="dead", instance="dead0", host="h", pid=1, started_at=stale, last_heartbeat=stale
    )
    slot = stale.replace(microsecond=0)
    JobRun.objects.create(
        job=job.name, slot=slot, status=JobRun.Status.RUNNING, node="dead", node_instance="dead0"
    )
    tick(reg)
    run = JobRun.objects.get(job=job.name, slot=slot)
    assert run.status == JobRun.Status.SUCCEEDED
    assert run.trigger == JobRun.Trigger.RETRY and run.attempt == 2
    assert recorder.slots == [slot]


def test_abandoned_runs_stay_abandoned_without_retry():
    recorder = Recorder()
    reg, job = declare(recorder, schedule=hourly())
    make_due(job, ago=timedelta(0))
    JobState.objects.filter(name=job.name).update(next_due=database_now() + timedelta(hours=1))
    running_on_a_dead_node(job)
    tick(reg)
    assert JobRun.objects.get(job=job.name).status == JobRun.Status.ABANDONED
    assert recorder.slots == []


def test_a_job_past_its_max_duration_is_recorded_as_timed_out():
    release = threading.Event()
    recorder = Recorder(block=release)
    reg, job = declare(recorder, max_duration=timedelta(milliseconds=200))
    make_due(job, ago=timedelta(seconds=1))
    scheduler = Scheduler(groups=[GROUP], node_name="engine-node", once=True, registry=reg)
    loop = scheduler.loops[0]
    scheduler.start()
    try:
        wait_until(lambda: recorder.contexts, timeout=5)
        ctx = recorder.contexts[0]
        wait_until(ctx.should_stop, timeout=5)
        loop.check_timeouts()
        assert ran(job).status == JobRun.Status.TIMED_OUT
    finally:
        release.set()
        scheduler.wait()
        scheduler.finish()
    run = ran(job)
    assert run.status == JobRun.Status.TIMED_OUT
    assert "max_duration" in run.error


def test_when_due_jobs_sleep_until_the_instant_they_return_and_wake_up_requests():
    answers = []

    def publish(ctx):
        answers.append(ctx.slot)
        return database_now() + timedelta(hours=2)

    reg, job = declare(publish, schedule=WhenDue(fallback=timedelta(hours=5)), transactional=True)
    tick(reg)
    assert len(answers) == 1, "a when-due job checks at start-up"
    state = JobState.objects.get(name=job.name)
    assert timedelta(hours=1.9) < state.next_due - database_now() < timedelta(hours=2.1)
    soon = database_now() - timedelta(seconds=1)
    services.request_wakeup(job.name, soon)
    services.request_wakeup(job.name, soon + timedelta(hours=1))  # never raises it
    assert JobState.objects.get(name=job.name).wake_at == soon
    tick(reg)
    assert len(answers) == 2
    assert JobState.objects.get(name=job.name).wake_at is None


def test_undeclared_jobs_are_retired_not_deleted():
    recorder = Recorder()
    reg, job = declare(recorder, schedule=hourly())
    tick(reg)
    empty = JobRegistry()
    tick(empty)
    state = JobState.objects.get(name=job.name)
    assert state.retired_at is not None
    tick(reg)
    assert JobState.objects.get(name=job.name).retired_at is None


def test_a_changed_schedule_reschedules_the_job():
    reg, job = declare(Recorder(), schedule=hourly())
    tick(reg)
    reg2, job2 = declare(Recorder(), schedule=every(timedelta(seconds=7)))
    tick(reg2)
    state = JobState.objects.get(name=job.name)
    assert state.fingerprint == Every(timedelta(seconds=7)).fingerprint()
    assert state.next_due - database_now() < timedelta(seconds=8)


def test_duplicate_job_names_name_both_declarations():
    reg = JobRegistry()
    reg.register(make_job(Recorder.__call__, name="dup.job", schedule=hourly()))

    def other(ctx):
        pass

    with pytest.raises(JobDeclarationError) as excinfo:
        reg.register(make_job(other, name="dup.job", schedule=hourly()))
    message = str(excinfo.value)
    assert "Recorder.__call__" in message and "other" in message and "declared twice" in message


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"schedule": timedelta(milliseconds=10)}, "1 second"),
        ({"schedule": "hourly"}, "use every("),
        ({"schedule": hourly(), "missed": "sometimes"}, "not a policy"),
        ({"schedule": hourly(), "missed": "all"}, "missed_window"),
        ({"schedule": hourly(), "name": "NoDots"}, "dotted lower-case"),
        ({"schedule": hourly(), "transactional": True, "retry_abandoned": True}, "retry_abandoned"),
    ],
)
def test_bad_declarations_fail_with_a_message_that_says_what_is_wrong(options, fragment):
    options.setdefault("name", "bad.job")
    with pytest.raises(JobDeclarationError) as excinfo:
        make_job(lambda ctx: None, **options)
    assert fragment in str(excinfo.value)


def test_declaration_errors_found_at_discovery_are_system_check_errors():
    from coordination.registry import registry

    with registry.temporary():
        registry.errors.append("job 'x.y' (declared by a.b): every(...) must be >= 1 second")
        errors = check_job_declarations()
    assert [e.id for e in errors] == ["coordination.E001"]
    assert "x.y" in errors[0].msg


def test_runscheduler_rejects_unknown_groups():
    with pytest.raises(CommandError, match="unknown group"):
        call_command("runscheduler", "--once", "--group", "nope")


def test_schedulerstatus_json_has_nodes_leaders_and_jobs(capsys):
    reg, job = declare(Recorder(), schedule=hourly())
    tick(reg)
    import json

    call_command("schedulerstatus", "--json")
    data = json.loads(capsys.readouterr().out)
    assert {"nodes", "leaders", "jobs"} <= set(data)
    assert any(n["name"] == "engine-node" and not n["alive"] for n in data["nodes"])
    assert any(j["name"] == job.name for j in data["jobs"])
    call_command("schedulerstatus")
    out = capsys.readouterr().out
    assert "Nodes" in out and "Leaders" in out and job.name in out


def test_database_clock_is_the_servers():
    now = database_now()
    assert now.tzinfo is not None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT now()")
            assert abs((cursor.fetchone()[0] - now).total_seconds()) < 5


def node(name: str, *, alive: bool) -> Node:
    beat = database_now() - (timedelta(0) if alive else timedelta(minutes=5))
    return Node.objects.create(
        name=name, instance=f"{name}0", host="h", pid=1, started_at=beat, last_heartbeat=beat
    )


def timed_out_run_on(name: str, *, alive: bool):
    """A due job whose earlier run timed out on node ``name`` and has not returned."""
    recorder = Recorder()
    reg, job = declare(recorder)
    make_due(job, ago=timedelta(0))
    node(name, alive=alive)
    JobRun.objects.create(
        job=job.name,
        slot=database_now() - timedelta(hours=1),
        status=JobRun.Status.TIMED_OUT,
        node=name,
        node_instance=f"{name}0",
        started_at=database_now() - timedelta(minutes=6),
    )
    return recorder, reg, job


@contextmanager
def session_of(name: str):
    """Hold a database session open for node ``name``'s process, as a live scheduler does (the
    server's sessions tell a dead node from a live one; see liveness.vanished_instances)."""
    if connection.vendor not in ("postgresql", "mysql"):
        yield
        return
    params = connection.get_connection_params()
    if connection.vendor == "postgresql":
        params["application_name"] = work_application_name(name)
    other = connection.get_new_connection(params)
    try:
        if connection.vendor == "mysql":
            with other.cursor() as cursor:
                cursor.execute(
                    "SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()"
                )
                connection_id, client = cursor.fetchone()
            NodeSession.objects.create(
                node=name,
                instance=f"{name}0",
                role="work",
                connection_id=connection_id,
                client=client,
                opened_at=database_now(),
            )
        yield
    finally:
        other.close()


def test_a_timed_out_run_still_going_on_a_live_node_holds_the_job_off():
    """A lock-only loss: the ex-leader is alive and its timed-out run has not returned yet."""
    recorder, reg, _ = timed_out_run_on("ex-leader", alive=True)
    with session_of("ex-leader"):
        tick(reg)
    assert recorder.slots == [], "it would overlap the run still going on the ex-leader"


def test_a_timed_out_run_still_going_on_a_dead_node_is_abandoned_like_a_running_one():
    recorder, reg, job = timed_out_run_on("frozen", alive=False)
    tick(reg)
    old = JobRun.objects.filter(job=job.name, node="frozen").get()
    assert old.status == JobRun.Status.ABANDONED and old.finished_at is not None
    assert len(recorder.slots) == 1


def test_a_when_due_jobs_abandoned_run_makes_the_job_due_at_once():
    """The run never said when its job is next due (a dispatcher or a sender with work
    left): its job runs at once, not at its fallback an hour later."""
    recorder = Recorder()
    reg, job = declare(recorder, schedule=WhenDue(fallback=timedelta(hours=1)))
    tick(reg)  # a when-due job checks at start-up, then waits for its fallback
    assert len(recorder.slots) == 1
    stale = running_on_a_dead_node(job)
    tick(reg)
    assert JobRun.objects.get(job=job.name, slot=stale).status == JobRun.Status.ABANDONED
    assert len(recorder.slots) == 2
