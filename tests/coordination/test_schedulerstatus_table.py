"""``schedulerstatus``'s job table: every declared job, times with their zone, durations and
lateness in words, the pause reason; ``--json`` keeps every key it had and adds ``state``."""

import json
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from coordination.clock import database_now
from coordination.management.commands.schedulerstatus import heartbeat_text, node_state
from coordination.models import JobState, Leadership, Node
from coordination.registry import make_job, registry
from coordination.schedules import daily, hourly

pytestmark = pytest.mark.django_db

JSON_JOB_KEYS = {
    "name",
    "group",
    "schedule",
    "next_due",
    "last_status",
    "last_finished_at",
    "last_duration",
    "last_lateness",
    "last_node",
    "consecutive_failures",
    "paused",
    "paused_reason",
    "run_requested",
    "retired",
    "missed",
    "current_run",
}


def declared(name: str, schedule):
    def func(ctx):
        """Does nothing."""

    return make_job(func, name=name, group="reports", schedule=schedule)


def status(*args) -> str:
    out = StringIO()
    call_command("schedulerstatus", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def cluster():
    now = database_now()
    Node.objects.create(
        name="web-1:4242", instance="i1", host="web-1", pid=4242, started_at=now,
        last_heartbeat=now - timedelta(seconds=42),
    )  # fmt: skip
    Leadership.objects.create(
        group="reports", node="web-1:4242", instance="i1", key=7,
        since=now.replace(year=2026, month=12, day=1, hour=21, minute=0, second=0, microsecond=0),
    )  # fmt: skip
    JobState.objects.create(
        name="reports.weekly", group="reports", schedule="weekly",
        next_due=now.replace(year=2026, month=12, day=7, hour=5, minute=0, second=0, microsecond=0),
        last_status="succeeded", last_duration=0.006441874999950414, last_lateness=0.31,
        paused=True, paused_reason="report server down",
    )  # fmt: skip
    JobState.objects.create(
        name="reports.slow", group="reports", schedule="hourly",
        last_status="failed", last_duration=250.4, last_lateness=3.24,
    )  # fmt: skip
    fresh = declared("reports.fresh", daily(at="06:00", tz="Europe/Berlin"))
    with registry.temporary(fresh, declared("reports.weekly", hourly())):
        yield


def rows(table: str) -> dict[str, str]:
    jobs = table.split("Jobs (", 1)[1].splitlines()[2:]
    return {line.split()[0]: line for line in jobs if line.strip()}


@override_settings(TIME_ZONE="Europe/Berlin")
def test_the_job_table_reads_as_words_in_the_sites_zone(cluster):
    table = status()
    jobs = rows(table)
    assert set(jobs) >= {"reports.weekly", "reports.slow", "reports.fresh"}
    weekly = jobs["reports.weekly"]
    assert "2026-12-07 06:00:00 CET" in weekly, weekly
    assert "6 ms" in weekly and "on time" in weekly, weekly
    assert "paused (report server down)" in weekly, weekly
    slow = jobs["reports.slow"]
    assert "4 min 10 s" in slow and "3.2 s late" in slow, slow
    fresh = jobs["reports.fresh"]
    # The next 06:00 in Berlin: CET in winter, CEST in summer.
    assert "not started yet" in fresh and re.search(r" 06:00:00 CES?T", fresh), fresh
    assert "T" not in weekly.split("weekly", 2)[-1].replace("CET", ""), "no ISO times"
    assert "2026-12-01 22:00:00 CET" in table, "a leader's start, in the site's zone"
    assert "42 s ago" in table, "a heartbeat age in words"


def test_json_keeps_its_keys_and_lists_declared_jobs_not_started_yet(cluster):
    data = json.loads(status("--json"))
    assert {"now", "nodes", "leaders", "jobs"} <= set(data)
    jobs = {job["name"]: job for job in data["jobs"]}
    assert set(jobs) >= {"reports.weekly", "reports.slow", "reports.fresh"}
    for job in jobs.values():
        assert set(job) == JSON_JOB_KEYS | {"state"}, job["name"]
    assert jobs["reports.weekly"]["last_duration"] == 0.006441874999950414
    assert jobs["reports.weekly"]["state"] == "paused (report server down)"
    assert jobs["reports.fresh"]["state"] == "not started yet"
    assert data["leaders"][0]["since"].endswith("+00:00")


@pytest.mark.parametrize(
    ("role", "alive", "stopped_at", "shown"),
    [
        ("scheduler", True, None, "yes"),
        ("scheduler", False, None, "NO"),
        ("scheduler", False, "2026-12-01T00:00:00+00:00", "stopped"),
        ("worker", True, None, "working"),
        ("worker", False, None, "idle"),  # an idle worker writes no heartbeat
        ("worker", False, "2026-12-01T00:00:00+00:00", "stopped"),
    ],
)
def test_the_alive_column_tells_an_idle_worker_from_a_dead_scheduler(
    role, alive, stopped_at, shown
):
    assert node_state({"role": role, "alive": alive, "stopped_at": stopped_at}) == shown


@pytest.mark.parametrize(
    ("role", "alive", "stopped_at", "shown"),
    [
        ("scheduler", True, None, "4 min 44 s ago"),
        ("scheduler", False, None, "4 min 44 s ago"),
        ("worker", True, None, "4 min 44 s ago"),
        ("worker", False, None, "idle since 2026-12-01 10:15:00 UTC (4 min 44 s)"),
        ("worker", False, "2026-12-01T00:00:00+00:00", "4 min 44 s ago"),
    ],
)
def test_an_idle_worker_reads_idle_not_a_stale_heartbeat(role, alive, stopped_at, shown):
    node = {
        "role": role,
        "alive": alive,
        "stopped_at": stopped_at,
        "heartbeat_age": 284.0,
        "last_heartbeat": "2026-12-01T10:15:00+00:00",
    }
    assert heartbeat_text(node) == shown
