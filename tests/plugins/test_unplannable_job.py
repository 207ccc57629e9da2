"""A job whose planning raises is paused with its reason; its group's other jobs go on.

A real ``runscheduler --group plugins`` with the test-only ``unplannable`` plugin: its
``unplannable.broken`` declares fine but raises when the leader plans a due slot, next to
``unplannable.steady`` and the example plugin's ``example.beat`` (both every second).
"""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import transaction

from coordination.models import Alert, JobRun, JobState
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

BAD = "unplannable.broken"
REASON = (
    "the scheduler could not plan it (RuntimeError: the schedule's arithmetic broke); fix its "
    "schedule, deploy, then resume it"
)


def succeeded(job: str, **filters):
    return JobRun.objects.filter(job=job, status=JobRun.Status.SUCCEEDED, **filters)


def runs_on(job: str, *, after) -> bool:
    """Whether ``job`` has succeeded in three slots after ``after``."""
    return succeeded(job, slot__gt=after).count() >= 3


def jobs(*args) -> str:
    out = StringIO()
    call_command("jobs", *args, stdout=out)
    return out.getvalue()


def test_a_job_whose_planning_raises_is_paused_and_the_group_goes_on(schedulers):
    proc = schedulers(
        "unplannable-1",
        "plugins",
        env={"INSTATIC_MAX_TICK": "1", "INSTATIC_TEST_EXTRA_APPS": "tests.plugins.unplannable"},
    )
    paused = wait_until(
        lambda: JobState.objects.filter(name=BAD, paused=True).first(),
        timeout=30,
        message=f"{BAD} was not paused:\n{proc.log()[-3000:]}",
    )
    assert paused.paused_reason == REASON
    # Its neighbours in the group run slot after slot from then on (the same ticks).
    for good in ("unplannable.steady", "example.beat"):
        wait_until(lambda good=good: runs_on(good, after=paused.next_due), timeout=30)
    assert not JobRun.objects.filter(job=BAD).exclude(status=JobRun.Status.MISSED).exists()

    log = proc.log()
    assert "loop crashed" not in log, log[-3000:]
    said = f"[plugin-scheduler] job {BAD} paused: the scheduler could not plan it"
    assert log.count(said) == 1, log[-3000:]  # once, however many ticks followed
    assert "RuntimeError: the schedule's arithmetic broke" in log
    alert = Alert.objects.get(kind=Alert.Kind.JOB_UNPLANNABLE, subject=BAD)
    assert alert.sent == 1

    # Operators see the reason where they look.
    listed = {row["name"]: row for row in json.loads(jobs("list", "--json"))}
    assert listed[BAD]["paused"] and listed[BAD]["paused_reason"] == REASON
    assert f"paused ({REASON})" in jobs("list")

    # Resuming clears the reason. The running scheduler may pause the job again the moment
    # the resume commits, so what the resume wrote is read back before it commits.
    with transaction.atomic():
        assert jobs("resume", BAD) == f"resumed {BAD}\n"
        resumed = JobState.objects.get(name=BAD)
    assert (resumed.paused, resumed.paused_reason) == (False, "")
    # Still broken, the scheduler pauses it again at its next slot: a pause of its own, which
    # it makes (and says) only of a job that is not paused.
    wait_until(
        lambda: (
            proc.log().count(said) == 2
            and JobState.objects.filter(name=BAD, paused=True, paused_reason=REASON).exists()
        ),
        timeout=30,
        message=f"{BAD} was not paused again after the resume",
    )
    since = JobState.objects.get(name=BAD).next_due or paused.next_due
    wait_until(lambda: runs_on("unplannable.steady", after=since - timedelta(seconds=1)))
    log = proc.log()
    assert "loop crashed" not in log
    assert log.count(said) == 2, log[-3000:]  # once after the resume, however many ticks followed
    assert proc.stop() == 0
