"""``runscheduler`` refuses to start, in one line, when it could only run wrongly.

A node name too long to record, invalid job declarations (checked before Django's own check
report, and again with ``--skip-checks``), a database it cannot reach within
``INSTATIC_STARTUP_DB_WAIT``: each is an exit with the reason, before anything is scheduled.
"""

import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from coordination.models import Node
from coordination.registry import registry
from devtools.servers import free_port
from tests.support.processes import BASE_DIR, process_env

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_node_name_longer_than_its_column_is_refused():
    with pytest.raises(CommandError, match="--node-name is longer than 200 characters"):
        call_command("runscheduler", "--once", "--node-name", "n" * 201)
    assert not Node.objects.exists()


@pytest.mark.parametrize("skip_checks", [False, True], ids=["checked", "skip-checks"])
def test_invalid_job_declarations_are_refused_in_one_line(skip_checks):
    problems = [
        "plugins/contrib/x/jobs.py:3: job 'x.a': every(...) must be >= 1 second",
        "plugins/contrib/x/jobs.py:9: job 'x.b': unknown time zone 'Mars/Base'",
    ]
    args = ["--skip-checks"] if skip_checks else []
    with registry.temporary():
        registry.errors.extend(problems)
        with pytest.raises(CommandError) as refused:
            call_command("runscheduler", "--once", *args)
    message = str(refused.value)
    assert message.startswith(
        "runscheduler refuses to start: 2 invalid job declarations (coordination.E001): "
    )
    assert "; ".join(problems) in message
    assert not Node.objects.exists()


def test_one_invalid_declaration_is_named_in_the_singular():
    with registry.temporary():
        registry.errors.append("a/jobs.py:1: job 'a.b': bad")
        with pytest.raises(CommandError, match=r"start: 1 invalid job declaration \("):
            call_command("runscheduler", "--once")


@pytest.mark.sqlite  # once per `make test`: the unreachable database is its own
def test_a_database_that_stays_unreachable_at_start_is_an_exit_with_the_reason():
    """It waits ``INSTATIC_STARTUP_DB_WAIT`` (saying so), then gives the one-line reason."""
    port = free_port()
    env = process_env(
        DATABASE_URL=f"postgres://instatic@127.0.0.1:{port}/instatic",
        INSTATIC_STARTUP_DB_WAIT="1.5",
    )
    result = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "runscheduler", "--once"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert "Trying again in" in result.stderr and "INSTATIC_STARTUP_DB_WAIT" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"CommandError: cannot connect to the database at postgresql://127.0.0.1:{port}/instatic"
    ), result.stderr
    assert "that DATABASE_URL is right" in last
    assert not Node.objects.exists()
