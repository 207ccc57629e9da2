"""The scheduler's and plugins' admin pages read as words, in the editor's zone.

Every page that shows a scheduler process names it ``Scheduler (node …)`` (the raw node name
in the title), a run less than a second late reads ``on time``, durations read ``6 ms`` or
``4 min 10 s`` (never the stored float), and every time names its zone: here the editor's own
(``Asia/Tokyo``, JST), activated by the editors app's middleware.
"""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from coordination.admin_words import outcome_notes
from coordination.models import JobRun, JobState, Leadership, LeadershipTerm, Node
from editors.models import EditorProfile
from plugins.models import ControlEvent, PluginState

pytestmark = pytest.mark.django_db

SLOT = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)  # 06:00 JST on the 2nd
NODE = "vm:11206"
RAW_FLOATS = ("0.006441874999950414", "250.4", "0.31")
# A time Django's admin would print without a zone: "Dec. 2, 2026, 6 a.m."
ZONELESS = re.compile(r"\b[A-Z][a-z]{2}\. \d{1,2}, \d{4}, \d")


@pytest.fixture
def editor_client(client, admin_user):
    EditorProfile.objects.create(user=admin_user, time_zone="Asia/Tokyo")
    client.force_login(admin_user)
    return client


@pytest.fixture
def history(db):
    Node.objects.create(
        name=NODE, instance="i1", host="vm", pid=11206, started_at=SLOT, last_heartbeat=SLOT
    )
    Leadership.objects.create(group="plugins", node=NODE, instance="i1", key=7, since=SLOT)
    LeadershipTerm.objects.create(group="plugins", node=NODE, instance="i1", started_at=SLOT)
    JobState.objects.create(
        name="example.beat", group="plugins", schedule="every 1 min", next_due=SLOT,
        last_slot=SLOT, last_status="succeeded", last_duration=0.006441874999950414,
        last_lateness=0.31, last_node=NODE, last_finished_at=SLOT,
    )  # fmt: skip
    quick = JobRun.objects.create(
        job="example.beat", slot=SLOT, status="succeeded", node=NODE,
        started_at=SLOT + timedelta(seconds=0.31), duration=0.006441874999950414,
        finished_at=SLOT + timedelta(seconds=0.32),
    )  # fmt: skip
    slow = JobRun.objects.create(
        job="example.beat", slot=SLOT - timedelta(hours=1), status="failed", node=NODE,
        started_at=SLOT - timedelta(hours=1) + timedelta(seconds=3.24), duration=250.4,
        finished_at=SLOT - timedelta(minutes=55), error="RuntimeError: upstream said no",
    )  # fmt: skip
    JobState.objects.create(name="reports.weekly", group="reports", next_due=SLOT)
    PluginState.objects.create(app_label="example", changed_at=SLOT)
    ControlEvent.objects.create(username="ops", action="job_paused", target="example.beat")
    return quick, slow


def page(client, name: str, *args, **query) -> str:
    response = client.get(reverse(f"admin:{name}", args=args), query)
    assert response.status_code == 200, name
    return response.content.decode()


def assert_words(html: str, name: str) -> None:
    # The raw node name stays on a change page, in its own field, for operators.
    html = re.sub(rf'<label>(Node|Name):</label>\s*<div class="readonly">{NODE}</div>', "", html)
    # A <time> keeps the exact instant in its datetime attribute, for machines.
    html = re.sub(r' datetime="[^"]*"', "", html)
    for raw in RAW_FLOATS:
        assert raw not in html, f"{name} shows the stored value {raw}"
    assert not ZONELESS.search(html), f"{name} shows a time without its zone"
    assert f">{NODE}<" not in html, f"{name} shows a bare node name"


SCHEDULER = f'title="{NODE}" style="white-space:nowrap">Scheduler (node {NODE})</span>'


def test_the_engines_pages(editor_client, history):
    quick, slow = history
    pages = {
        "nodes": page(editor_client, "coordination_node_changelist"),
        "node": page(editor_client, "coordination_node_change", Node.objects.get().pk),
        "leaders": page(editor_client, "coordination_leadership_changelist"),
        "terms": page(editor_client, "coordination_leadershipterm_changelist"),
        "states": page(editor_client, "coordination_jobstate_changelist"),
        "state": page(editor_client, "coordination_jobstate_change", "example.beat"),
        "runs": page(editor_client, "coordination_jobrun_changelist"),
        "run": page(editor_client, "coordination_jobrun_change", slow.pk),
    }
    for name, html in pages.items():
        assert_words(html, name)
        assert SCHEDULER in html, name
        assert "JST" in html, f"{name} names the editor's zone"
    assert (
        "2026-12-02 06:00:00 JST" in pages["nodes"]
        and "2026-12-02 06:00:00 JST" in pages["leaders"]
    )
    assert "6 ms" in pages["states"] and "on time" in pages["states"]
    assert "Scheduler (node vm:11206)" in pages["state"]
    assert "4 min 10 s" in pages["runs"] and "3.2 s late" in pages["runs"]
    assert "on time" in pages["runs"] and "6 ms" in pages["runs"]
    assert "4 min 10 s" in pages["run"] and SCHEDULER in pages["run"]
    assert "2026-12-02 05:00:00 JST" in pages["run"]


END = (SLOT + timedelta(minutes=30)).isoformat()


def test_the_timelines(editor_client, history):
    job = page(
        editor_client,
        "coordination_jobstate_timeline",
        "example.beat",
        hours=6,
        end=END,
    )
    group = page(editor_client, "coordination_group_timeline", "plugins", hours=6, end=END)
    for name, html in (("job timeline", job), ("group timeline", group)):
        assert_words(html, name)
        lane = f'<title>node {NODE}</title><text class="lane-label"'
        assert lane in html and f'text-anchor="end">Scheduler (node {NODE})</text>' in html
        assert "times in JST" in html
        assert "From 2026-12-02 00:30:00 JST to 2026-12-02 06:30:00 JST." in html
        assert SCHEDULER in html, "the leadership table names the leader in words"
    assert "Failed on Scheduler (node vm:11206) · started 3.2 s late · took 4 min 10 s" in job


def test_the_plugin_pages(editor_client, history):
    quick, slow = history
    pages = {
        "plugins": page(editor_client, "plugins_pluginstate_changelist"),
        "jobs": page(editor_client, "plugins_pluginjob_changelist"),
        "job": page(editor_client, "plugins_pluginjob_change", "example.beat"),
        "group jobs": page(editor_client, "plugins_groupjob_changelist"),
        "runs": page(editor_client, "plugins_pluginrun_changelist"),
        "run": page(editor_client, "plugins_pluginrun_change", quick.pk),
        "events": page(editor_client, "plugins_controlevent_changelist"),
    }
    for name, html in pages.items():
        assert_words(html, name)
        assert "JST" in html, f"{name} names the editor's zone"
    assert "2026-12-02 06:00:00 JST" in pages["plugins"]
    assert "2026-12-02 06:00:00 JST" in pages["jobs"]
    job = pages["job"]
    assert "6 ms" in job and "on time" in job and SCHEDULER in job
    runs = pages["runs"]
    assert "4 min 10 s" in runs and "3.2 s late" in runs and "6 ms" in runs and "on time" in runs
    assert SCHEDULER in runs
    assert "6 ms" in pages["run"] and "on time" in pages["run"] and SCHEDULER in pages["run"]


@pytest.mark.parametrize(
    ("run", "notes"),
    [
        (JobRun(status="succeeded"), []),
        (JobRun(status="missed", reason="downtime"), ["downtime"]),
        (JobRun(status="succeeded", trigger="manual"), ["manual run"]),
        (JobRun(status="failed", trigger="retry", attempt=3), ["retry run", "attempt 3"]),
        (
            JobRun(
                status="failed", error="Traceback (most recent call last):\n  …\nKeyError: 'x'\n"
            ),
            ["KeyError: 'x'"],
        ),
    ],
    ids=["plain", "missed", "manual", "retry", "error"],
)
def test_outcome_notes(run, notes):
    assert outcome_notes(run) == notes


def test_the_run_lists_say_the_outcome_in_one_column(editor_client, history):
    for name in ("coordination_jobrun_changelist", "plugins_pluginrun_changelist"):
        html = page(editor_client, name)
        assert "RuntimeError: upstream said no" in html.split('class="field-outcome"', 2)[-1]
        assert 'class="field-reason"' not in html and 'class="field-trigger"' not in html
    engine = page(editor_client, "coordination_jobrun_changelist")
    assert '<td class="field-outcome">Failed · RuntimeError: upstream said no</td>' in engine


def test_the_nodes_page_calls_workers_workers_and_shows_an_idle_one_idle_since(editor_client, db):
    worker = f"{NODE}/worker-1"
    Node.objects.create(
        name=worker, role=Node.Role.WORKER, instance="w1", host="vm", pid=11207,
        started_at=SLOT, last_heartbeat=SLOT,
    )  # fmt: skip
    Node.objects.create(
        name="vm:2", instance="s2", host="vm", pid=2, started_at=SLOT, last_heartbeat=SLOT,
        stopped_at=SLOT,
    )  # fmt: skip
    html = page(editor_client, "coordination_node_changelist")
    assert f"Worker (node {worker})" in html
    assert "Scheduler (node vm:2)" in html
    assert "column-process" in html and "column-scheduler" not in html  # it names both
    idle = re.sub(r' datetime="[^"]*"', "", html)
    assert 'idle since <time style="white-space:nowrap">2026-12-02 06:00:00 JST' in idle
    assert idle.count("idle since") == 1  # the stopped scheduler is not idle
