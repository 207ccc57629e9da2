"""Plugin jobs in real ``runscheduler --group plugins`` processes.

The example plugin's ``example.beat`` runs every second, transactionally, writing a ``Beat``
row (no unique constraint) with its run: a slot run twice would show as two beats. Test-only
plugin apps are added to one process through ``INSTATIC_TEST_EXTRA_APPS`` (read by
``tests/settings.py``): ``extra`` (a node that declares one job more) and ``misbehaving`` (a
job that hangs far past its max duration).
"""

import json
import signal
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from coordination.models import JobRun, JobState, Leadership, Node
from plugins.contrib.example.models import Beat
from plugins.models import ControlEvent
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

BEAT = "example.beat"
JOBS_URL = reverse("admin:plugins_pluginjob_changelist")


@pytest.fixture
def nodes(schedulers):
    def start(name: str, *, extra_apps=(), **env):
        settings = {"INSTATIC_MAX_TICK": "1", "INSTATIC_TEST_EXTRA_APPS": ",".join(extra_apps)}
        return schedulers(name, "plugins", env={**settings, **env})

    return start


def succeeded(job: str, **filters):
    return JobRun.objects.filter(job=job, status=JobRun.Status.SUCCEEDED, **filters)


def leader() -> str | None:
    row = Leadership.objects.filter(group="plugins").first()
    return row.node if row else None


def assert_beats_once_per_slot(*, no_gaps: bool) -> list:
    slots = list(succeeded(BEAT).order_by("slot").values_list("slot", flat=True))
    beats = Counter(Beat.objects.values_list("slot", flat=True))
    assert not {s: n for s, n in beats.items() if n > 1}, "a slot ran more than once"
    assert set(beats) == set(slots), "every beat belongs to exactly one successful run"
    if no_gaps:
        steps = {b - a for a, b in zip(slots, slots[1:], strict=False)}
        assert steps <= {timedelta(seconds=1)}, f"gaps between slots: {sorted(steps)}"
    return slots


@pytest.mark.postgresql
def test_three_processes_run_each_slot_of_a_plugin_job_exactly_once(nodes):
    procs = [nodes(f"plug-{i}") for i in range(3)]
    wait_until(lambda: succeeded(BEAT).exists(), timeout=20)
    first = succeeded(BEAT).order_by("slot").first().slot
    wait_until(lambda: succeeded(BEAT, slot__gte=first + timedelta(seconds=8)).exists(), timeout=20)
    leaders = [p.name for p in procs if "[plugin-scheduler] acquired advisory lock" in p.log()]
    assert leaders == [leader()], "one process led the plugins group the whole time"
    slots = assert_beats_once_per_slot(no_gaps=True)
    assert len(slots) >= 9
    assert set(succeeded(BEAT).values_list("node", flat=True)) == set(leaders)
    for proc in procs:
        assert proc.stop() == 0
    assert_beats_once_per_slot(no_gaps=True)


def test_a_hanging_job_times_out_without_holding_up_other_jobs_or_shutdown(nodes):
    grace = 1.0
    proc = nodes(
        "hang-node", extra_apps=["tests.plugins.misbehaving"], INSTATIC_SHUTDOWN_GRACE=grace
    )
    hung = wait_until(
        lambda: JobRun.objects.filter(job="misbehaving.hang", status="timed_out").first(),
        timeout=20,
    )
    assert "max_duration" in hung.error
    proc.wait_for_log(r"job misbehaving\.hang timed out")
    # The other plugin job keeps its schedule, slot after slot, while the hung one runs on.
    wait_until(lambda: succeeded(BEAT, slot__gte=hung.slot + timedelta(seconds=4)).exists())
    assert_beats_once_per_slot(no_gaps=True)
    started = JobRun.objects.filter(job="misbehaving.hang").exclude(status=JobRun.Status.MISSED)
    assert list(started.values_list("slot", flat=True)) == [hung.slot], "not started again"
    assert JobState.objects.get(name="misbehaving.hang").last_status == "timed_out"

    proc.signal(signal.SIGTERM)
    stopping = time.monotonic()
    assert proc.wait(timeout=grace + 10) == 0
    took = time.monotonic() - stopping
    assert took < grace + 2.5, f"shutdown took {took:.1f}s with a {grace}s grace period"
    assert "still running after the grace period: misbehaving.hang" in proc.log()
    assert Node.objects.get(name="hang-node").stopped_at is not None


def test_nodes_with_different_jobs_are_reported_and_a_job_no_node_declares_is_retired(
    nodes, admin_client, capsys
):
    new = nodes("node-new", extra_apps=["tests.plugins.extra_plugin"])
    wait_until(lambda: succeeded("extra.ping").exists(), timeout=20)
    old = nodes("node-old")
    wait_until(lambda: Node.objects.filter(name="node-old").exists(), timeout=20)

    call_command("schedulerstatus", "--json")
    status = json.loads(capsys.readouterr().out)
    differ = {n["name"]: n["jobs_differ"] for n in status["nodes"] if n["alive"]}
    assert differ == {"node-new": True, "node-old": True}
    page = admin_client.get(JOBS_URL).content.decode()
    assert "node-new" in page and "also declares extra.ping" in page
    assert "node-old" in page and "lacks extra.ping" in page

    assert new.stop() == 0
    wait_until(lambda: leader() == "node-old", timeout=15)
    retired = wait_until(
        lambda: JobState.objects.filter(name="extra.ping", retired_at__isnull=False).first(),
        timeout=15,
    )
    assert succeeded("extra.ping").exists(), "a retired job keeps its history"
    assert not succeeded("extra.ping", node="node-old").exists()
    assert retired.retired_at is not None
    assert "retired 1 job(s) no live node declares" in old.log()
    assert "declare different jobs" not in admin_client.get(JOBS_URL).content.decode()


def test_run_now_reaches_the_leader_quickly_and_runs_a_paused_job(nodes, admin_client):
    max_tick = 5.0
    proc = nodes("runner", INSTATIC_MAX_TICK=max_tick)
    proc.wait_for_log(r"\[plugin-scheduler\] acquired advisory lock")
    wait_until(lambda: JobState.objects.filter(name="example.digest").exists(), timeout=20)

    def act(action: str, job: str):
        response = admin_client.post(JOBS_URL, {"action": action, "_selected_action": [job]})
        assert response.status_code == 302

    # Only the daily digest is left to wake the leader: without a wake-up it sleeps max_tick.
    act("pause_jobs", BEAT)
    act("pause_jobs", "example.digest")
    requested = time.monotonic()
    act("run_jobs_now", "example.digest")
    run = wait_until(
        lambda: succeeded("example.digest", trigger=JobRun.Trigger.MANUAL).first(), timeout=15
    )
    latency = time.monotonic() - requested
    limit = 2.0 if connection.vendor == "postgresql" else max_tick + 1
    assert latency < limit, f"the manual run started {latency:.2f}s after the request"
    assert run.requested_by == "admin" and run.node == "runner"
    assert JobState.objects.get(name="example.digest").paused, "still paused afterwards"
    assert list(
        ControlEvent.objects.filter(target="example.digest").order_by("id").values_list("action")
    ) == [("job_paused",), ("job_run_requested",)]
