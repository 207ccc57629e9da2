"""A when-due job's next look after a run, up to the end of the calendar.

Its next look is the earlier of the instant the job answered and its schedule's safety net;
at the end of the calendar the safety net is ``None`` (no next slot), which is no instant at
all rather than one to compare: the job's answer stands, and with no answer the job has no
next slot (its ``next_due`` is cleared, so it is not run again tick after tick).
"""

from datetime import UTC, datetime, timedelta

import pytest

from coordination.models import JobRun, JobState
from coordination.runner import when_due_next
from coordination.schedules import WhenDue
from tests.coordination.enginekit import declare, tick

T = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)
LATER = T + timedelta(hours=1)


@pytest.mark.parametrize(
    ("answer", "fallback", "expected"),
    [
        (LATER, T + timedelta(hours=2), LATER),
        (T + timedelta(hours=3), T + timedelta(hours=2), T + timedelta(hours=2)),
        (None, T + timedelta(hours=2), T + timedelta(hours=2)),
        ("not an instant", T + timedelta(hours=2), T + timedelta(hours=2)),
        (LATER, None, LATER),
        (None, None, None),
    ],
    ids=[
        "answer-sooner",
        "safety-net-sooner",
        "no-answer",
        "not-a-datetime",
        "calendar-end",
        "none",
    ],
)
def test_when_due_next(answer, fallback, expected):
    assert when_due_next(answer, fallback) == expected


class AtCalendarEnd(WhenDue):
    """A when-due schedule whose safety net has no instant left (as at 9999-12-31) once
    ``ended`` is set (after the declaration, which verifies the schedule has slots)."""

    ended = False

    def next_after(self, instant):
        return None if self.ended else super().next_after(instant)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
@pytest.mark.parametrize("answers", [True, False], ids=["answers-an-instant", "answers-nothing"])
def test_a_when_due_job_at_the_end_of_the_calendar_runs_and_keeps_its_answer(
    transactional, answers
):
    def look(ctx):
        return LATER if answers else None

    reg, job = declare(look, schedule=AtCalendarEnd(), transactional=transactional)
    job.schedule.ended = True
    tick(reg)
    run = JobRun.objects.get(job=job.name)
    assert (run.status, run.error) == (JobRun.Status.SUCCEEDED, "")
    state = JobState.objects.get(name=job.name)
    assert state.next_due == (LATER if answers else None)
