"""Slots that will not run, recorded as missed with their reason, however many."""

from datetime import datetime
from itertools import islice

from django.db import transaction
from django.db.models import F

from coordination.ledger.states import advance
from coordination.metrics import count_missed_slots
from coordination.models import JobRun, JobState
from coordination.registry import Job
from coordination.schedules import CALENDAR_END

#: Missed slots written per statement (and per transaction) when a long gap is recorded.
MISSED_BATCH = 5_000


def record_missed(job: Job, slots: list[datetime], *, reason: str) -> None:
    """Record slots that will not run, with why, so nothing is silently lost."""
    if not slots:
        return
    JobRun.objects.bulk_create(
        [
            JobRun(job=job.name, slot=slot, status=JobRun.Status.MISSED, reason=reason)
            for slot in slots
        ],
        ignore_conflicts=True,
    )
    JobState.objects.filter(name=job.name).update(missed_count=F("missed_count") + len(slots))
    count_missed_slots(job, reason, len(slots))


def skip_slots(job: Job, start: datetime, *, before: datetime | None, reason: str) -> int:
    """Record every slot in ``[start, before)`` as missed and move the job's next slot past it
    (``before=None``: to the end of the calendar).

    However long the gap (an every-second job down for a day has 86,400 slots), it is written
    in batches of ``MISSED_BATCH`` rows, each committed together with the job's next slot, so
    memory stays bounded and a crash half-way loses nothing: the next leader carries on from
    the last committed batch. Return how many slots were recorded.
    """
    slots = job.schedule.iter_slots(start, before or CALENDAR_END)
    total = 0
    while batch := list(islice(slots, MISSED_BATCH)):
        with transaction.atomic():
            record_missed(job, batch, reason=reason)
            advance(job, job.schedule.next_after(batch[-1]))
        total += len(batch)
    return total
