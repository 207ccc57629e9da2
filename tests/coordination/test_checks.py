"""The system checks an operator meets when the scheduler is misconfigured.

Each check is run as ``manage.py check`` runs it (the check functions, or ``manage.py check``
itself where the misconfiguration is in ``DATABASES``) and must name the problem, so a
misconfigured replica is refused before it runs anything.
"""

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from coordination import checks
from coordination.checks import (
    check_database_vendor,
    check_lock_keys,
    check_lock_mode,
    check_timing,
    task_backend_warnings,
)
from coordination.registry import make_job
from coordination.workers.queueing import uses_database_queue
from tests.support.processes import BASE_DIR, process_env


def ids(messages) -> list[str]:
    return [message.id for message in messages]


#: For a ``manage.py check`` with settings of its own (tests/coordination/checksettings.py),
#: the same whatever the run's vendor: once per `make test`.
OWN_SETTINGS = pytest.mark.sqlite


def manage_check(database: str) -> subprocess.CompletedProcess:
    """Run ``manage.py check --database default`` on a misconfigured ``DATABASES``."""
    env = process_env(
        DJANGO_SETTINGS_MODULE="tests.coordination.checksettings",
        INSTATIC_CHECKS_DATABASE=database,
    )
    return subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "check", "--database", "default"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# --- lock keys -------------------------------------------------------------------------------
def test_the_default_lock_keys_pass():
    assert check_lock_keys() == []


@override_settings(INSTATIC_LOCK_KEYS={"publishing": 2**64, "plugins": True})
def test_a_lock_key_that_is_not_a_64_bit_key_is_an_error_naming_its_group():
    errors = check_lock_keys()
    assert ids(errors) == ["coordination.E002", "coordination.E002"]
    texts = " | ".join(error.msg for error in errors)
    assert "'plugins' is invalid" in texts and "bool" in texts
    assert "'publishing' is invalid" in texts and "does not fit in 64 bits" in texts


@override_settings(INSTATIC_LOCK_KEYS={"plugins": 0xDEADBEEF})
def test_two_groups_on_one_lock_key_are_an_error():
    """plugins given publishing's built-in key: one group's leader would block the other's."""
    errors = check_lock_keys()
    assert ids(errors) == ["coordination.E003"]
    assert "'plugins' and 'publishing'" in errors[0].msg
    assert "3735928559 (0xdeadbeef)" in errors[0].msg


@override_settings(INSTATIC_LOCK_KEYS={"plugins": -1, "publishing": 0xFFFFFFFFFFFFFFFF})
def test_a_key_written_signed_and_unsigned_is_one_key():
    """-1 and 0xffffffffffffffff are the same advisory lock: the check compares normalized keys."""
    assert ids(check_lock_keys()) == ["coordination.E003"]


@override_settings(INSTATIC_LOCK_KEYS={"plugins": "shared-name", "publishing": "shared-name"})
def test_two_groups_on_one_key_name_are_an_error():
    assert ids(check_lock_keys()) == ["coordination.E003"]


# --- timing ----------------------------------------------------------------------------------
def test_the_default_timing_passes():
    assert check_timing() == []


@pytest.mark.parametrize(
    "setting", ["INSTATIC_HEARTBEAT_INTERVAL", "INSTATIC_LEASE", "INSTATIC_MAX_TICK"]
)
def test_a_timing_that_is_not_positive_is_an_error(setting):
    with override_settings(**{setting: 0}):
        assert ids(check_timing()) == ["coordination.E005"]


@override_settings(INSTATIC_HEARTBEAT_INTERVAL=2, INSTATIC_LEASE=3)
def test_a_lease_under_two_heartbeats_is_an_error():
    """One late heartbeat would let a follower take a healthy leader for dead."""
    errors = check_timing()
    assert ids(errors) == ["coordination.E006"]
    assert "INSTATIC_LEASE (3.0s)" in errors[0].msg


@override_settings(INSTATIC_HEARTBEAT_INTERVAL=2, INSTATIC_LEASE=4)
def test_a_lease_of_exactly_two_heartbeats_passes():
    assert check_timing() == []


# --- lock mode -------------------------------------------------------------------------------
def test_the_default_session_lock_mode_passes():
    assert check_lock_mode() == []


@override_settings(INSTATIC_LOCK_MODE="advisory")
def test_an_unknown_lock_mode_is_an_error():
    errors = check_lock_mode()
    assert ids(errors) == ["coordination.E007"]
    assert "'advisory'" in errors[0].msg


# --- database vendor -------------------------------------------------------------------------
@pytest.mark.every_vendor  # reads the vendor, not the database
def test_the_test_database_passes_the_vendor_check():
    """A supported vendor, and on SQLite a file on a local disk: nothing to report."""
    assert check_database_vendor() == []


@pytest.mark.sqlite
def test_a_sqlite_file_on_a_network_filesystem_is_warned_about(monkeypatch):
    """flock on NFS/CIFS does not exclude schedulers on other machines.

    The filesystem type is the one thing replaced here (no NFS mount in a test machine); what
    ``/proc/mounts`` says about real paths is checked below.
    """
    seen = []

    def on_nfs(path: Path) -> str:
        seen.append(path)
        return "nfs4"

    monkeypatch.setattr(checks, "_filesystem_type", on_nfs)
    warnings = check_database_vendor()
    assert ids(warnings) == ["coordination.W002"]
    assert "network filesystem (nfs4)" in warnings[0].msg
    assert seen == [Path(connection.settings_dict["NAME"]).resolve().parent]


def test_the_filesystem_type_is_that_of_the_longest_mount_point_above_the_path():
    """/proc/self lies under both / and /proc: the type is /proc's, not the root's."""
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    proc_type = next(parts[2] for parts in mounts if parts[1] == "/proc")
    assert checks._filesystem_type(Path("/proc/self")) == proc_type
    root_type = next(parts[2] for parts in mounts if parts[1] == "/")
    if proc_type != root_type:
        assert checks._filesystem_type(Path("/")) == root_type


@OWN_SETTINGS
def test_an_in_memory_sqlite_database_is_warned_about():
    """No other process can share it, so no second scheduler can be coordinated with."""
    result = manage_check("memory")
    assert result.returncode == 0, result.stderr
    assert "coordination.W001" in result.stderr
    assert "the SQLite database is in memory" in result.stderr


@OWN_SETTINGS
def test_an_unsupported_database_vendor_fails_the_check():
    result = manage_check("unsupported")
    assert result.returncode != 0
    assert "coordination.E004" in result.stderr
    assert "does not support the 'unsupported' database backend" in result.stderr
    assert "Supported vendors: mysql, postgresql, sqlite" in result.stderr


# --- the task queue of runs on workers ---------------------------------------------------------
@OWN_SETTINGS
def test_a_tasks_backend_that_refuses_the_runs_queue_is_refused_in_one_line_saying_how_to_fix():
    env = process_env(
        DJANGO_SETTINGS_MODULE="tests.coordination.checksettings",
        INSTATIC_CHECKS_TASKS="no-runs-queue",
    )
    result = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "check"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "ImproperlyConfigured" in last
    assert "'instatic-runs'" in last and "TASKS['default']['QUEUES']" in last


def test_jobs_on_workers_through_a_backend_outside_the_database_are_warned_about():
    heavy = make_job(
        lambda ctx: None, name="checks.heavy", schedule=timedelta(hours=1), run_on="workers"
    )
    light = make_job(lambda ctx: None, name="checks.light", schedule=timedelta(hours=1))

    assert task_backend_warnings([heavy, light], database_queue=True) == []
    assert task_backend_warnings([light], database_queue=False) == []
    (warning,) = task_backend_warnings([heavy, light], database_queue=False)
    assert warning.id == "coordination.W004"
    assert "1 job(s) run on workers (checks.heavy)" in warning.msg
    assert "after the claim commits" in warning.msg


def test_the_task_backend_check_knows_the_database_queue_from_another():
    twice = {"default": {"BACKEND": "tests.support.twice_backend.TwiceBackend", "QUEUES": []}}
    assert uses_database_queue()
    with override_settings(TASKS=twice):
        assert not uses_database_queue()
