"""Liveness of the engine in one process: no stuck job, no busy loop, no silently lost slot."""

import json
import threading
import time
from datetime import timedelta
from io import StringIO

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from coordination import services
from coordination.checks import check_lock_mode
from coordination.clock import database_now
from coordination.conf import settings
from coordination.models import JobRun, JobState
from coordination.registry import Missed
from coordination.scheduler import Scheduler
from coordination.schedules import every
from tests.coordination.enginekit import (
    GROUP,
    Recorder,
    centered_every,
    declare,
    ledger_slots,
    make_due,
    tick,
)
from tests.support.polling import wait_until
from tests.support.processes import database_url

pytestmark = pytest.mark.django_db(transaction=True)

SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)


def test_a_catch_up_of_more_than_a_thousand_slots_records_every_slot():
    recorder = Recorder()
    reg, job = declare(recorder, schedule=centered_every(MINUTE), missed=Missed.LATEST)
    make_due(job, ago=1800 * MINUTE)
    tick(reg)
    # The oldest slots of the gap are in the ledger too, with no gaps.
    assert ledger_slots(job) == job.schedule.slot_range(-1800, 0)
    missed = JobRun.objects.filter(job=job.name, status=JobRun.Status.MISSED)
    assert ledger_slots(job, JobRun.Status.MISSED) == job.schedule.slot_range(-1800, -1)
    assert set(missed.values_list("reason", flat=True)) == {JobRun.MissedReason.DOWNTIME}
    assert recorder.slots == [job.schedule.slot(0)]
    assert JobState.objects.get(name=job.name).next_due == job.schedule.slot(1)
    status = StringIO()
    call_command("schedulerstatus", "--json", stdout=status)
    (shown,) = [j for j in json.loads(status.getvalue())["jobs"] if j["name"] == job.name]
    assert shown["missed"] == {"downtime": 1800}


def test_a_run_now_whose_slot_is_already_in_the_ledger_is_served_not_planned_again():
    """A claim-first manual run whose node died leaves its slot in the ledger: no spin."""
    recorder = Recorder()
    reg, job = declare(recorder)
    make_due(job, ago=timedelta(0))
    requested = database_now() - SECOND
    JobState.objects.filter(name=job.name).update(
        next_due=database_now() + timedelta(hours=1),
        run_requested_at=requested,
        run_requested_by="editor",
    )
    JobRun.objects.create(
        job=job.name,
        slot=requested,
        status=JobRun.Status.ABANDONED,
        trigger=JobRun.Trigger.MANUAL,
        node="gone",
        node_instance="gone",
    )
    tick(reg)
    state = JobState.objects.get(name=job.name)
    assert state.run_requested_at is None, "the request is served by the run already claimed"
    assert recorder.slots == []
    tick(reg)
    assert JobRun.objects.filter(job=job.name).count() == 1


def test_run_now_goes_ahead_of_a_catch_up_backlog():
    """A backlog runs one slot per tick, so a run-now request is next, not last."""
    started, release = threading.Event(), threading.Event()
    triggers = []

    def job_func(ctx):
        triggers.append(ctx.trigger)
        started.set()
        release.wait(10)

    reg, job = declare(
        job_func, schedule=every(SECOND), missed=Missed.ALL, missed_window=timedelta(minutes=1)
    )
    make_due(job, ago=timedelta(seconds=20))
    scheduler = Scheduler(groups=[GROUP], node_name="engine-node", registry=reg)
    scheduler.start()
    try:
        assert started.wait(10)
        services.request_run(job.name, requested_by="editor")
        release.set()
        wait_until(lambda: len(triggers) >= 3, timeout=10)
    finally:
        release.set()
        scheduler.stop()
        scheduler.wait()
        scheduler.finish()
    assert triggers[:2] == [JobRun.Trigger.SCHEDULE, JobRun.Trigger.MANUAL]


def test_resuming_a_paused_job_records_the_slots_it_let_pass_and_does_not_run_them():
    recorder = Recorder()
    reg, job = declare(recorder, schedule=centered_every(MINUTE))
    make_due(job, ago=10 * MINUTE, paused=True, paused_reason="plugin disabled")
    with services.registry.temporary(job, replace=True):
        assert services.set_paused(job.name, False)
    assert JobState.objects.get(name=job.name).next_due == job.schedule.slot(1)
    assert ledger_slots(job) == job.schedule.slot_range(-10, 0)
    reasons = set(JobRun.objects.filter(job=job.name).values_list("reason", flat=True))
    assert reasons == {JobRun.MissedReason.PLUGIN_DISABLED}
    tick(reg)
    assert recorder.slots == []


def test_slots_that_pass_while_paused_are_recorded_as_they_go():
    recorder = Recorder()
    reg, job = declare(recorder, schedule=centered_every(MINUTE))
    make_due(job, ago=5 * MINUTE, paused=True, paused_reason="paused by ann")
    tick(reg)
    assert recorder.slots == []
    missed = JobRun.objects.filter(job=job.name, status=JobRun.Status.MISSED)
    assert ledger_slots(job, JobRun.Status.MISSED) == job.schedule.slot_range(-5, 0)
    assert set(missed.values_list("reason", flat=True)) == {JobRun.MissedReason.PAUSED}


@pytest.mark.postgresql
def test_an_outcome_is_recorded_when_the_server_dropped_the_connection_during_the_run():
    """Bookkeeping retries on a new connection instead of leaving the run 'running'."""
    url = database_url()

    def job_func(ctx):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        with psycopg.connect(url, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))

    reg, job = declare(job_func)
    make_due(job, ago=timedelta(0))
    tick(reg)
    run = JobRun.objects.get(job=job.name)
    assert run.status == JobRun.Status.SUCCEEDED and run.finished_at is not None
    assert JobState.objects.get(name=job.name).last_status == "succeeded"


@override_settings(INSTATIC_LOCK_WAIT=0.5)
def test_a_loop_survives_a_lock_connection_error_and_a_crash_and_reports_it_meanwhile():
    recorder = Recorder()
    reg, job = declare(recorder, schedule=every(SECOND))
    make_due(job, ago=timedelta(0))
    scheduler = Scheduler(groups=[GROUP], node_name="engine-node", registry=reg)
    (loop,) = scheduler.loops
    real_listen, real_tick = loop.lock.listen, loop.tick
    faults = {"listen": 1, "tick": 1}
    crashed = threading.Event()

    def failing_listen(channel):
        if faults["listen"]:
            faults["listen"] -= 1
            raise psycopg.OperationalError("the database system is starting up")
        return real_listen(channel)

    def crashing_tick():
        if faults["tick"]:
            faults["tick"] -= 1
            crashed.set()
            raise RuntimeError("a bug in a tick")
        return real_tick()

    loop.lock.listen = failing_listen
    loop.tick = crashing_tick
    scheduler.start()
    try:
        assert crashed.wait(10)
        problems = wait_until(scheduler.problems, timeout=5)
        assert "crashed" in problems[0]
        wait_until(lambda: len(recorder.slots) >= 1, timeout=15)
        wait_until(lambda: not scheduler.problems(), timeout=5)
        assert loop.is_alive() and loop.leading
    finally:
        scheduler.stop()
        scheduler.wait()
        scheduler.finish()


@override_settings(INSTATIC_LOCK_MODE="transaction", INSTATIC_LEASE=3, INSTATIC_MAX_TICK=1)
def test_lease_mode_needs_a_tick_well_under_the_lease():
    errors = check_lock_mode()
    if connection.vendor != "postgresql":
        assert [e.id for e in errors] == ["coordination.E008"]
        return
    assert [e.id for e in errors] == ["coordination.E009"]
    with override_settings(INSTATIC_MAX_TICK=0.5):
        assert check_lock_mode() == []


def test_a_run_that_finishes_while_the_tick_reads_state_is_not_planned_again(monkeypatch, caplog):
    """The tick must see a worker as finished only if it also sees the state it wrote.

    A worker that committed (next slot moved on) between the tick's state read and its look at
    the workers made the tick plan the same slot again: a wasted claim and an "already claimed
    elsewhere" line, about one every few seconds in the soak.
    """
    from coordination import loop as loop_module

    release = threading.Event()
    recorder = Recorder(block=release)
    reg, job = declare(recorder, transactional=True)
    make_due(job, ago=timedelta(0))
    scheduler = Scheduler(groups=[GROUP], node_name="race-node", registry=reg)
    (loop,) = scheduler.loops
    scheduler.register()
    assert loop.supervision.try_lead(wait=0)
    try:
        loop.tick()
        wait_until(lambda: recorder.slots, timeout=5)
        worker = loop.workers[job.name]
        real = loop_module.group_states

        def read_then_finish(*args, **kwargs):
            result = real(*args, **kwargs)  # the state still says the slot is due...
            release.set()
            worker.join(timeout=5)  # ...and the run commits before the tick looks at workers
            return result

        monkeypatch.setattr(loop_module, "group_states", read_then_finish)
        caplog.set_level("INFO", logger="coordination")
        loop.tick()
        monkeypatch.setattr(loop_module, "group_states", real)
        for worker in list(loop.workers.values()):
            worker.join(timeout=5)
        assert "already claimed elsewhere" not in caplog.text
        assert len(recorder.slots) == 1
    finally:
        release.set()
        scheduler.stop()
        loop.supervision.shut_down()
        scheduler.finish()


def test_a_retry_planned_while_the_leaders_own_heartbeat_is_stale_starts_at_the_next_tick():
    """A tick whose node's own heartbeat is stale starts nothing, and the retry it planned is
    still waiting at the next tick: not forgotten until maintenance next reads the retries,
    minutes on."""
    recorder = Recorder()
    reg, job = declare(recorder, retries=1)
    make_due(job, ago=timedelta(0))
    JobState.objects.filter(name=job.name).update(next_due=database_now() + timedelta(hours=1))
    retry_at = database_now() + timedelta(seconds=1)
    failed = JobRun.objects.create(
        job=job.name, slot=database_now(), status=JobRun.Status.FAILED, retry_at=retry_at
    )
    scheduler = Scheduler(groups=[GROUP], node_name="stale-node", registry=reg)
    (loop,) = scheduler.loops
    scheduler.register()
    assert loop.supervision.try_lead(wait=0)
    try:
        loop.tick()  # maintenance reads the failed run: its retry waits for its time
        loop.tick()  # and the sweep a new leader makes at once reads it again
        assert recorder.slots == [] and loop.maintenance.sweep_at is None
        wait_until(lambda: database_now() > retry_at, timeout=5)
        # The tick that plans the retry finds its node's heartbeat written a lease ago.
        scheduler.heartbeat.last_ok = time.monotonic() - float(settings.LEASE)
        loop.tick()
        assert recorder.slots == []
        scheduler.heartbeat.last_ok = time.monotonic()
        loop.tick()
        for worker in list(loop.workers.values()):
            worker.join(timeout=5)
        run = JobRun.objects.get(pk=failed.pk)
        assert (run.trigger, run.attempt, run.status) == ("retry", 2, "succeeded")
        assert recorder.slots == [failed.slot]
    finally:
        scheduler.stop()
        loop.supervision.shut_down()
        scheduler.finish()
