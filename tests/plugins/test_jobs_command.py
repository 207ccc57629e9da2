"""``manage.py jobs``: the admin's job controls from the command line, audited as the OS user."""

import getpass
import json
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from coordination.models import JobRun, JobState
from plugins.models import ControlEvent
from tests.support.polling import wait_until
from tests.support.processes import BASE_DIR, process_env

JOB = "hatest.manual"


def jobs(*args) -> str:
    out = StringIO()
    call_command("jobs", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def states(db):
    JobState.objects.create(name="example.digest", group="plugins", schedule="daily")
    JobState.objects.create(name="reports.weekly", group="reports", schedule="weekly")


def test_list_shows_every_group_and_json_is_machine_readable(states):
    assert "reports.weekly" in jobs("list") and "example.digest" in jobs("list")
    rows = {row["name"]: row for row in json.loads(jobs("list", "--json"))}
    assert rows["reports.weekly"]["group"] == "reports"
    assert rows["reports.weekly"]["paused"] is False


def test_pause_and_resume_a_job_of_any_group_recorded_under_the_os_user(states):
    jobs("pause", "reports.weekly", "--reason", "report server down")
    state = JobState.objects.get(name="reports.weekly")
    assert state.paused and state.paused_reason == "report server down"
    assert "paused (report server down)" in jobs("list")
    jobs("resume", "reports.weekly")
    assert not JobState.objects.get(name="reports.weekly").paused
    events = list(ControlEvent.objects.filter(target="reports.weekly").order_by("at", "id"))
    assert [e.action for e in events] == ["job_paused", "job_resumed"]
    assert all(e.user is None and e.username.startswith(f"{getpass.getuser()}@") for e in events)


def test_an_unknown_job_is_one_clear_error(states):
    with pytest.raises(CommandError, match="not a job the scheduler knows.*jobs list"):
        jobs("pause", "nope.nothing")


def run_and_wait(timeout: str = "60") -> subprocess.CompletedProcess:
    """``manage.py jobs run hatest.manual --wait`` in its own process."""
    return subprocess.run(
        [sys.executable, "manage.py", "jobs", "run", JOB, "--wait", "--timeout", timeout],
        cwd=BASE_DIR,
        env=process_env(),
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("fail", [False, True], ids=["succeeds", "fails"])
def test_run_wait_follows_the_manual_run_to_its_outcome_and_exit_code(schedulers, fail):
    scheduler = schedulers("cli-1", "hatest_cli", env={"HATEST_FAIL": "1" if fail else "0"})
    wait_until(lambda: JobState.objects.filter(name=JOB).exists(), timeout=20)
    scheduler.wait_for_log("acquired advisory lock")
    done = run_and_wait()
    run = JobRun.objects.get(job=JOB, trigger="manual")
    assert run.requested_by.startswith(f"{getpass.getuser()}@")
    if fail:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "failed on cli-1" in done.stderr and "the report server said no" in done.stderr
        assert run.status == "failed"
    else:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "hatest.manual succeeded on cli-1" in done.stdout
        assert run.status == "succeeded"
    assert ControlEvent.objects.filter(target=JOB, action="job_run_requested").count() == 1


@pytest.mark.django_db(transaction=True)
def test_run_wait_without_a_scheduler_says_so_and_gives_up_at_its_timeout(states):
    JobState.objects.create(name=JOB, group="hatest_cli", schedule="hourly")
    done = run_and_wait(timeout="0.5")
    assert done.returncode == 2
    assert "no live scheduler leads" in done.stderr
    assert "no outcome within 0.5s" in done.stderr
