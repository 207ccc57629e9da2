"""Editors' and operators' job controls at their edges (``coordination.services``).

A run-now, pause or wake-up for a job the scheduler has not created a state for yet changes
nothing and says so; a wake-up only ever brings a job's wake-up instant closer; resuming a job
records as missed only the slots that really passed, and leaves that to the leader when this
process does not declare the job.
"""

from datetime import timedelta

import pytest
from django.db import connection

from coordination import services
from coordination.clock import database_now
from coordination.models import JobRun, JobState, WakeUp
from coordination.registry import group as group_named
from coordination.registry import registry
from tests.coordination.enginekit import GROUP, Recorder, declare, make_due
from tests.support.databases import separate_postgresql_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_controls_for_a_job_without_state_change_nothing():
    assert services.request_run("nobody.declared", requested_by="editor") is False
    assert services.set_paused("nobody.declared", True, reason="why not") is False
    services.request_wakeup("nobody.declared", database_now())
    assert not JobState.objects.exists()


def test_a_wakeup_brings_the_wakeup_closer_and_never_puts_it_off():
    reg, job = declare(Recorder())
    make_due(job, ago=timedelta(0))
    now = database_now()
    soon, later = now + timedelta(minutes=5), now + timedelta(minutes=50)
    services.request_wakeup(job.name, later)
    assert JobState.objects.get(name=job.name).wake_at == later
    services.request_wakeup(job.name, soon)
    services.request_wakeup(job.name, later)
    assert JobState.objects.get(name=job.name).wake_at == soon


def test_resuming_before_the_next_slot_records_nothing_missed():
    reg, job = declare(Recorder())
    slot = make_due(job, ago=timedelta(0))
    JobState.objects.filter(name=job.name).update(next_due=slot + timedelta(hours=1))
    with registry.temporary(job):
        assert services.set_paused(job.name, True, reason="investigating")
        assert services.set_paused(job.name, False)
    state = JobState.objects.get(name=job.name)
    assert (state.paused, state.paused_reason, state.next_due) == (
        False,
        "",
        slot + timedelta(hours=1),
    )
    assert not JobRun.objects.filter(job=job.name).exists()


def test_resuming_a_job_this_process_does_not_declare_leaves_the_gap_to_the_leader():
    """Only the leader knows the job's schedule; the web process records no guess."""
    reg, job = declare(Recorder())
    make_due(job, ago=timedelta(hours=3))
    assert registry.get(job.name) is None
    assert services.set_paused(job.name, True, reason="plugin disabled")
    assert services.set_paused(job.name, False)
    state = JobState.objects.get(name=job.name)
    assert not state.paused and state.group == GROUP
    assert not JobRun.objects.filter(job=job.name).exists()


def test_while_paused_for_a_disabled_plugin_slots_are_missed_for_that_reason():
    reg, job = declare(Recorder())
    due = make_due(job, ago=timedelta(hours=2))
    with registry.temporary(job):
        assert services.set_paused(job.name, True, reason=JobRun.MissedReason.PLUGIN_DISABLED)
        assert services.set_paused(job.name, False)
    missed = JobRun.objects.filter(job=job.name, status=JobRun.Status.MISSED).order_by("slot")
    assert missed.first().slot == due
    assert {run.reason for run in missed} == {JobRun.MissedReason.PLUGIN_DISABLED}


def _leader_signals(group_name: str):
    """Return a function that counts the signals sent to ``group_name``'s leader since this
    call: ``NOTIFY``s on PostgreSQL, bumps of its wake-up counter on MySQL."""
    if connection.vendor == "mysql":

        def seq() -> int:
            row = WakeUp.objects.filter(group=group_name).values_list("seq", flat=True)
            return row.first() or 0

        start = seq()
        return lambda: seq() - start, lambda: None
    listener = separate_postgresql_session()
    channel = group_named(group_name).channel
    listener.execute(f"LISTEN {channel}")

    def count() -> int:
        # Notifications arrive in commit order: once this one, sent last, is here, every
        # one sent before it is too.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, 'counted')", [channel])
        received = []
        for notify in listener.notifies(timeout=10):
            if notify.payload == "counted":
                return len(received)
            received.append(notify)
        raise AssertionError("the closing NOTIFY never arrived")

    return count, listener.close


@pytest.mark.skipif(connection.vendor == "sqlite", reason="the SQLite leader polls: no signal")
def test_a_wakeup_that_does_not_bring_the_instant_closer_writes_nothing_and_wakes_no_leader():
    reg, job = declare(Recorder())
    make_due(job, ago=timedelta(0))
    now = database_now()
    soon, later, sooner = (now + timedelta(minutes=m) for m in (5, 50, 1))
    signals, close = _leader_signals(GROUP)
    try:
        with registry.temporary(job):
            assert services.request_wakeup(job.name, soon)
            assert services.request_wakeup(job.name, later), "the row is there, not held"
            assert services.request_wakeup(job.name, sooner)
        assert signals() == 2, "the wake-up that moved nothing did not wake the leader"
    finally:
        close()
    assert JobState.objects.get(name=job.name).wake_at == sooner
