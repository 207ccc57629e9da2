"""Operator commands work while a release's ``jobs.py`` has bad declarations, and on a fresh
database: real ``manage.py`` processes against the test database.

``jobs`` and ``schedulerstatus`` print the declaration errors first (stderr) and then do their
work, so an operator can pause jobs while a bad release is out; ``check`` and ``runscheduler``
keep refusing (tests/plugins/test_bad_declarations.py). ``jobs list`` shows every declared job
even before a scheduler has run.
"""

import json
import re
import subprocess
import sys

import pytest

from coordination.models import JobState
from plugins.models import ControlEvent
from tests.support.processes import BASE_DIR, process_env

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

BAD_APPS = "tests.plugins.bad_declarations,tests.plugins.broken_jobs"
BAD_FILE = "tests/plugins/bad_declarations/jobs.py"
FINE = "bad_declarations.fine"
HEADLINE = (
    "5 invalid job declarations (coordination.E001): these jobs are not scheduled, and "
    "runscheduler refuses to start until they are fixed:"
)
ZONED = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


def manage(*args: str, apps: str = BAD_APPS) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), *args],
        cwd=BASE_DIR,
        env=process_env(INSTATIC_TEST_EXTRA_APPS=apps),
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_declaration_errors_first(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "SystemCheckError" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == HEADLINE, result.stderr
    assert lines[1].startswith(f"  {BAD_FILE}:8: ") and "out of range" in lines[1]
    assert len([line for line in lines[1:6] if line.startswith("  tests/plugins/")]) == 5


def test_jobs_list_pause_and_resume_work_with_declaration_errors_printed_first():
    JobState.objects.create(name=FINE, group="plugins", schedule="hourly at :05 (UTC)")
    listed = manage("jobs", "list")
    assert_declaration_errors_first(listed)
    assert FINE in listed.stdout

    paused = manage("jobs", "pause", FINE, "--reason", "bad release out")
    assert_declaration_errors_first(paused)
    assert paused.stdout.strip() == f"paused {FINE}"
    state = JobState.objects.get(name=FINE)
    assert state.paused and state.paused_reason == "bad release out"

    resumed = manage("jobs", "resume", FINE)
    assert_declaration_errors_first(resumed)
    assert not JobState.objects.get(name=FINE).paused
    assert ControlEvent.objects.filter(target=FINE).count() == 2


def test_schedulerstatus_works_with_declaration_errors_and_its_json_stays_clean():
    table = manage("schedulerstatus")
    assert_declaration_errors_first(table)
    assert "Nodes (0)" in table.stdout
    machine = manage("schedulerstatus", "--json")
    assert_declaration_errors_first(machine)
    assert set(json.loads(machine.stdout)) >= {"nodes", "leaders", "jobs"}


def test_jobs_list_on_a_fresh_database_shows_every_declared_job_not_started_yet():
    assert not JobState.objects.exists()
    result = manage("jobs", "list", apps="")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    for name in ("example.beat", "publishing.publish_due", "run_retention.prune"):
        assert name in rows, result.stdout
    beat = rows["example.beat"]
    assert "not started yet" in beat and re.search(ZONED, beat), beat
    machine = {row["name"]: row for row in json.loads(manage("jobs", "list", "--json").stdout)}
    assert machine["example.beat"]["state"] == "not started yet"
    assert machine["example.beat"]["next_due"].endswith("+00:00")
