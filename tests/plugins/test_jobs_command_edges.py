"""``manage.py jobs pause`` and ``resume`` at their edges, in-process with real ticks.

Pausing a declared job that no scheduler has started yet (a fresh database, a new release)
creates its state paused, and the first tick keeps it paused; resuming a job whose schedule
raises while the slots it let pass are worked out is one line that says what to do, and the
job stays paused as it was.
"""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from coordination.models import JobRun, JobState
from coordination.registry import registry
from plugins.models import ControlEvent
from tests.coordination.enginekit import CenteredEvery, Recorder, declare, make_due, tick

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = timedelta(hours=1)


def jobs(*args) -> str:
    out = StringIO()
    call_command("jobs", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_pausing_a_declared_job_no_scheduler_started_creates_it_paused_and_the_tick_keeps_it():
    recorder = Recorder()
    reg, job = declare(recorder, name="enginetest.fresh")
    assert not JobState.objects.exists()
    with registry.temporary(job):
        assert jobs("pause", job.name, "--reason", "not before the launch").strip() == (
            f"paused {job.name}"
        )
    state = JobState.objects.get(name=job.name)
    assert (state.paused, state.paused_reason) == (True, "not before the launch")
    assert state.next_due == job.schedule.slot(1), "its first slot, as the scheduler plans it"
    assert state.fingerprint == job.fingerprint
    event = ControlEvent.objects.get(target=job.name)
    assert (event.action, event.detail) == ("job_paused", "not before the launch")

    # Its first slots come due; the scheduler's first tick keeps the operator's pause.
    JobState.objects.filter(name=job.name).update(next_due=job.schedule.slot(-1))
    tick(reg)
    state = JobState.objects.get(name=job.name)
    assert (state.paused, state.paused_reason) == (True, "not before the launch")
    assert recorder.slots == []
    assert not JobRun.objects.filter(job=job.name).exclude(reason="paused").exists()


def test_pausing_a_job_nobody_declares_is_still_one_clear_error():
    with pytest.raises(CommandError, match="not a job the scheduler knows.*jobs list"):
        jobs("pause", "nobody.declares_this")


class BreaksOnResume(CenteredEvery):
    """Hourly around now; raises once ``broken`` is set."""

    broken = False

    def next_after(self, instant):
        if self.broken:
            raise ArithmeticError("no slot for you")
        return super().next_after(instant)


def test_resuming_a_job_whose_schedule_raises_is_one_line_and_it_stays_paused():
    reg, job = declare(Recorder(), name="enginetest.breaks", schedule=BreaksOnResume(HOUR))
    make_due(job, ago=3 * HOUR, paused=True, paused_reason="maintenance window")
    before = JobState.objects.get(name=job.name)
    job.schedule.broken = True
    with registry.temporary(job), pytest.raises(CommandError) as raised:
        jobs("resume", job.name)
    message = str(raised.value)
    assert "\n" not in message
    assert message == (
        f"{job.name} stays paused: the scheduler could not plan it (ArithmeticError: no slot "
        "for you); fix its schedule, deploy, then resume it"
    )
    after = JobState.objects.get(name=job.name)
    assert (after.paused, after.paused_reason, after.next_due) == (
        True,
        "maintenance window",
        before.next_due,
    )
    assert not JobRun.objects.filter(job=job.name).exists()
    assert not ControlEvent.objects.filter(target=job.name).exists()
