"""A job the leader cannot plan (its schedule raises) is paused with the reason, in-process.

The multi-process test (tests/plugins/test_unplannable_job.py) shows the group going on in a
real ``runscheduler``; these drive ticks through ``Scheduler(once=True)`` for the edges: the
first slot of a new job, a job an operator paused, and the alert.
"""

from datetime import timedelta

import pytest
from django.urls import reverse

from coordination import services
from coordination.models import Alert, JobRun, JobState
from coordination.registry import JobRegistry, make_job, registry
from tests.coordination.enginekit import GROUP, CenteredEvery, Recorder, make_due, tick

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = timedelta(hours=1)
REASON = (
    "the scheduler could not plan it (ArithmeticError: no slot for you); fix its schedule, "
    "deploy, then resume it"
)


class BreaksLater(CenteredEvery):
    """Hourly on a grid centred on now; raises once ``broken`` is set (after declaring), and
    has no more slots once ``ended`` is."""

    broken = False
    ended = False

    def next_after(self, instant):
        if self.broken:
            raise ArithmeticError("no slot for you")
        return None if self.ended else super().next_after(instant)


def declare_two():
    """Declare a breakable job and a good one in one group; return (registry, bad, good)."""
    reg = JobRegistry()
    bad = reg.register(
        make_job(Recorder(), name="enginetest.bad", group=GROUP, schedule=BreaksLater(HOUR))
    )
    good_recorder = Recorder()
    good = reg.register(
        make_job(good_recorder, name="enginetest.good", group=GROUP, schedule=CenteredEvery(HOUR))
    )
    bad.schedule.broken = True
    return reg, bad, good, good_recorder


def test_a_new_job_whose_first_slot_raises_gets_a_paused_state_and_the_others_run():
    reg, bad, good, recorder = declare_two()
    make_due(good, ago=timedelta(0))
    tick(reg)
    state = JobState.objects.get(name=bad.name)
    assert (state.paused, state.paused_reason, state.next_due) == (True, REASON, None)
    assert recorder.slots == [good.schedule.slot(0)]
    assert Alert.objects.get(kind=Alert.Kind.JOB_UNPLANNABLE, subject=bad.name).sent == 1


def test_a_due_job_whose_planning_raises_is_paused_in_the_tick_the_others_run_in():
    reg, bad, good, recorder = declare_two()
    bad.schedule.broken = False
    make_due(bad, ago=HOUR)
    make_due(good, ago=HOUR)
    bad.schedule.broken = True
    tick(reg)
    state = JobState.objects.get(name=bad.name)
    assert (state.paused, state.paused_reason) == (True, REASON)
    assert recorder.slots == [good.schedule.slot(0)]
    assert not JobRun.objects.filter(job=bad.name).exists()
    # Paused for that reason it is left alone: the next tick neither fails nor alerts again.
    tick(reg)
    assert Alert.objects.get(kind=Alert.Kind.JOB_UNPLANNABLE, subject=bad.name).sent == 1
    # Resuming clears the reason.
    bad.schedule.broken = False
    services.set_paused(bad.name, False)
    assert JobState.objects.get(name=bad.name).paused_reason == ""


def test_an_operator_paused_job_keeps_its_reason_when_its_planning_raises():
    reg, bad, good, recorder = declare_two()
    bad.schedule.broken = False
    make_due(bad, ago=HOUR, paused=True, paused_reason="maintenance window")
    make_due(good, ago=HOUR)
    bad.schedule.broken = True
    tick(reg)
    state = JobState.objects.get(name=bad.name)
    assert (state.paused, state.paused_reason) == (True, "maintenance window")
    assert recorder.slots == [good.schedule.slot(0)]
    assert not Alert.objects.filter(kind=Alert.Kind.JOB_UNPLANNABLE).exists()


def test_the_admin_job_pages_show_the_reason_and_a_job_without_a_next_slot(admin_client):
    reg, bad, good, _ = declare_two()
    tick(reg)
    # The admin reads the schedules this process declares (the web process's registry).
    with registry.temporary(bad, good):
        states = admin_client.get(reverse("admin:coordination_jobstate_changelist"))
        group_jobs = admin_client.get(reverse("admin:plugins_groupjob_changelist"))
        bad_page = admin_client.get(reverse("admin:coordination_jobstate_change", args=[bad.name]))
        bad.schedule.broken, bad.schedule.ended = False, True
        JobState.objects.filter(name=bad.name).update(next_due=None)
        last_page = admin_client.get(reverse("admin:coordination_jobstate_change", args=[bad.name]))
    assert REASON in states.content.decode()
    assert "cannot be planned" in group_jobs.content.decode()
    assert "its slots cannot be computed (ArithmeticError: no slot for you)" in (
        bad_page.content.decode()
    )
    assert "none: the calendar ends before its next slot" in last_page.content.decode()


class MissedSlotsBreak(CenteredEvery):
    """Plans like any hourly job, but listing the slots to record as missed raises."""

    def iter_slots(self, start, before):
        raise ArithmeticError("no slot for you")


def test_a_job_whose_missed_slots_cannot_be_recorded_is_paused_and_does_not_run():
    """The planner decides the missed slots; the loop's record of them raising pauses the job
    like its planning raising, and the slot planned behind them does not start."""
    reg = JobRegistry()
    recorder = Recorder()
    bad = reg.register(
        make_job(recorder, name="enginetest.bad", group=GROUP, schedule=MissedSlotsBreak(HOUR))
    )
    good_recorder = Recorder()
    good = reg.register(
        make_job(good_recorder, name="enginetest.good", group=GROUP, schedule=CenteredEvery(HOUR))
    )
    make_due(bad, ago=3 * HOUR)  # downtime: the older slots are missed, the newest runs
    make_due(good, ago=timedelta(0))
    tick(reg)
    state = JobState.objects.get(name=bad.name)
    assert (state.paused, state.paused_reason) == (True, REASON)
    assert recorder.slots == []
    assert good_recorder.slots == [good.schedule.slot(0)]
