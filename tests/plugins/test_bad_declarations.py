"""Bad job declarations in a plugin's ``jobs.py``, as real processes.

A bad schedule (``cron("61 * * * *")``, an unknown time zone, ``daily(at="25:99")``, an interval
whose slots would fall after the year 9999) must become
one ``coordination.E001`` line naming the file and line, never a traceback; the web process
keeps importing and serving (the good jobs of the same file are still declared), and
``runscheduler`` refuses to start with one line.
"""

import json
import subprocess
import sys
import textwrap

import pytest

import plugins.sdk as sdk
from coordination.registry import JobRegistry
from coordination.schedules import InvalidSchedule
from tests.support.processes import BASE_DIR, process_env

pytestmark = pytest.mark.multiprocess

BAD_APPS = "tests.plugins.bad_declarations,tests.plugins.broken_jobs"
BAD_FILE = "tests/plugins/bad_declarations/jobs.py"
BROKEN_FILE = "tests/plugins/broken_jobs/jobs.py"


def run(args: list[str], **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=BASE_DIR,
        env=process_env(INSTATIC_TEST_EXTRA_APPS=BAD_APPS, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def manage(*args: str) -> subprocess.CompletedProcess:
    return run([str(BASE_DIR / "manage.py"), *args])


def test_check_reports_every_bad_declaration_as_one_line_naming_the_file():
    result = manage("check")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if "(coordination.E001)" in line]
    assert len(lines) == 5, output
    expected = [
        (f"{BAD_FILE}:8: ", "minute field value 61 is out of range"),
        (f"{BAD_FILE}:13: ", "unknown time zone 'Mars/Olympus_Mons'"),
        (f"{BAD_FILE}:18: ", "daily(at='25:99')"),
        (f"{BAD_FILE}:23: ", "no slot falls before the end of the calendar (9999-12-31)"),
        (f"{BROKEN_FILE}:7: ", "unknown time zone 'Atlantis/Capital'"),
    ]
    for where, what in expected:
        [line] = [line for line in lines if where in line]
        assert what in line, line
    # No hint line or wrapped continuation: each problem is the one line above.
    assert "HINT" not in output


def test_runscheduler_refuses_to_start_with_one_line():
    result = manage("runscheduler", "--once")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    [line] = lines
    assert line.startswith("CommandError: runscheduler refuses to start: 5 invalid job")
    assert "coordination.E001" in line and "manage.py check" in line
    assert f"{BAD_FILE}:8:" in line and f"{BROKEN_FILE}:7:" in line


def test_runscheduler_refuses_even_when_checks_are_skipped():
    result = manage("runscheduler", "--once", "--skip-checks")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    assert "runscheduler refuses to start" in result.stderr


def test_the_web_process_imports_and_serves_and_keeps_the_good_jobs():
    script = textwrap.dedent(
        """
        import json
        from wsgiref.util import setup_testing_defaults
        from instatic.wsgi import application
        from coordination.registry import registry

        environ = {"PATH_INFO": "/healthz", "HTTP_HOST": "localhost"}
        setup_testing_defaults(environ)
        statuses = []
        body = b"".join(application(environ, lambda status, headers: statuses.append(status)))
        print(json.dumps({
            "status": statuses[0],
            "body": body.decode(),
            "fine": registry.get("bad_declarations.fine") is not None,
            "bad": [n for n in (j.name for j in registry.all()) if n.startswith("bad_")],
        }))
        """
    )
    result = run(["-c", script], DJANGO_SETTINGS_MODULE="tests.settings")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr

    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["status"].startswith("200"), answer
    assert answer["fine"] and answer["bad"] == ["bad_declarations.fine"], answer
    # The web process says once, in its log, that some jobs were not scheduled.
    errors = [line for line in result.stderr.splitlines() if "invalid job declaration" in line]
    assert len(errors) == 1, result.stderr


def test_outside_discovery_a_bad_schedule_still_raises_at_once():
    with pytest.raises(InvalidSchedule, match="out of range"):
        sdk.cron("61 * * * *")


def test_during_discovery_the_sdk_records_the_error_and_skips_the_job():
    from coordination.registry import discovering

    reg = JobRegistry()

    def send(ctx):
        return None

    send.__module__ = "plugins.contrib.example.jobs"
    with discovering():
        schedule = sdk.daily(at="25:99")
        returned = sdk.plugin_job(schedule=schedule, registry=reg)(send)
    assert returned is send
    assert reg.all() == []
    [error] = reg.errors
    assert "example.send" in error and "daily(at='25:99')" in error
    assert __file__.rsplit("/tests/", 1)[1] in error, "names the file of the declaration"
