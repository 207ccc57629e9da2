"""The scheduler's own metrics and ``/healthz`` server, scraped over HTTP from a leading node.

What an operator's Prometheus and load balancer see: the cluster gauges from the database
(reported by the leading node), this process's run counters, the node's health with details
only for the health token, the metrics only for the metrics token, and a stopped node
reported unavailable.
"""

import json
import re
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from django.test import override_settings

from coordination.metrics_server import SchedulerMetrics
from coordination.models import JobRun
from coordination.scheduler import Scheduler
from tests.coordination.enginekit import GROUP, Recorder, declare, make_due
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

NODE = "metrics-node"


def get(port: int, path: str, token: str = "") -> tuple[int, str]:
    """GET ``path`` from the scheduler's server; return (status, body) whatever the status."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def sample(text: str, name: str, **labels: str) -> float | None:
    """Return the value of the sample ``name`` with exactly ``labels`` in the exposition text."""
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match:
            found = dict(re.findall(r'(\w+)="([^"]*)"', match[1] or ""))
            if found == labels:
                return float(match[2])
    return None


@override_settings(INSTATIC_HEALTH_TOKEN="health-secret", INSTATIC_METRICS_TOKEN="metrics-secret")
def test_a_leading_scheduler_serves_its_metrics_and_health():
    reg, job = declare(Recorder())
    make_due(job, ago=timedelta(0))
    metrics = SchedulerMetrics.serve("127.0.0.1", 0, node_name=NODE)
    scheduler = Scheduler(groups=[GROUP], node_name=NODE, registry=reg, metrics=metrics)
    metrics.attach(scheduler)
    port = metrics.port
    scheduler.start()
    try:
        wait_until(
            lambda: JobRun.objects.filter(job=job.name, status="succeeded").exists(), timeout=15
        )
        status, body = get(port, "/healthz", token="health-secret")
        assert status == 200 and json.loads(body)["status"] == "ok", body
        assert json.loads(body)["node"] == NODE
        assert get(port, "/healthz/") == (200, '{"status": "ok"}'), "no details without token"

        status, body = get(port, "/metrics")
        assert status == 401 and "INSTATIC_METRICS_TOKEN" in body
        assert get(port, "/metrics", token="wrong")[0] == 401
        text = wait_until(
            lambda: (
                (page := get(port, "/metrics", token="metrics-secret")[1])
                and sample(page, "instatic_group_leader", group=GROUP, node=NODE)
                and page
            ),
            timeout=10,
        )
        assert sample(text, "instatic_metrics_database_up") == 1.0
        assert sample(text, "instatic_live_nodes") == 1.0
        assert sample(text, "instatic_group_leader", group=GROUP, node=NODE) == 1.0
        assert sample(text, "instatic_job_last_success_timestamp_seconds", job=job.name) > 0
        assert sample(text, "instatic_scheduled_posts", state="due") == 0.0
        runs = sample(text, "instatic_job_runs_total", job=job.name, group=GROUP,
                      status="succeeded")  # fmt: skip
        assert runs is not None and runs >= 1
        assert sample(text, "instatic_leader_changes_total", group=GROUP, node=NODE) >= 1
    finally:
        scheduler.stop()
        scheduler.wait()
        scheduler.finish()
    try:
        status, body = get(port, "/healthz", token="health-secret")
        assert status == 503
        assert json.loads(body) == {
            "status": "unavailable",
            "reason": "this scheduler node is not registered (starting up, or stopped)",
        }
    finally:
        metrics.shutdown()
    assert metrics.port is None


def test_a_node_that_leads_no_group_leaves_the_cluster_gauges_to_the_leader():
    """Only one node reports the cluster gauges, or Prometheus would add them up."""
    metrics = SchedulerMetrics.serve("127.0.0.1", 0, node_name="follower-node")
    try:
        status, text = get(metrics.port, "/metrics")
        assert status == 200
        assert sample(text, "instatic_metrics_database_up") == 1.0
        assert sample(text, "instatic_live_nodes") is None
        status, body = get(metrics.port, "/healthz")
        assert (status, json.loads(body)) == (503, {"status": "unavailable"})
    finally:
        metrics.shutdown()
