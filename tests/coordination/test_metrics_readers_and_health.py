"""Who may read the metrics, and what a node's health says when it is not healthy.

The web process's ``/metrics`` is for staff or the metrics token; a node's health is
unavailable with the reason when the process reports a problem, when its heartbeat is older
than the lease, or when it is not registered; a metrics port already taken is one clear error.
"""

import os
import socket
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError
from django.test import override_settings

from coordination.access import bearer_matches
from coordination.clock import database_now
from coordination.metrics_server import SchedulerMetrics
from coordination.models import Node
from coordination.nodehealth import node_health

pytestmark = pytest.mark.django_db(transaction=True)


def register_node(name: str, *, heartbeat_ago: timedelta, host=None, pid=None) -> Node:
    now = database_now()
    return Node.objects.create(
        name=name,
        instance="i-" + name,
        host=host or "elsewhere",
        pid=pid or 1,
        started_at=now - heartbeat_ago,
        last_heartbeat=now - heartbeat_ago,
    )


@override_settings(INSTATIC_METRICS_TOKEN="metrics-secret")
def test_the_web_metrics_are_for_staff_or_the_token(client):
    refused = client.get("/metrics")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == 'Bearer realm="instatic"'
    assert b"INSTATIC_METRICS_TOKEN" in refused.content
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic metrics-secret").status_code == 401

    scraped = client.get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-secret")
    assert scraped.status_code == 200 and b"instatic_job_runs" in scraped.content

    editor = User.objects.create_user("editor", password="pw", is_staff=False)
    client.force_login(editor)
    assert client.get("/metrics").status_code == 401
    editor.is_staff = True
    editor.save()
    assert client.get("/metrics").status_code == 200


def test_a_bearer_value_is_only_a_bearer_value():
    assert bearer_matches("Bearer  t0ken ", "t0ken")
    assert not bearer_matches("Basic t0ken", "t0ken")
    assert not bearer_matches("Bearer ", "")
    assert not bearer_matches(None, "t0ken")


def test_a_node_reporting_a_problem_is_unavailable_with_it():
    register_node("healthy", heartbeat_ago=timedelta(0))
    healthy, details = node_health(node_name="healthy", problems=["the plugins loop crashed"])
    assert (healthy, details) == (
        False,
        {"status": "unavailable", "reason": "the plugins loop crashed"},
    )


@override_settings(INSTATIC_LEASE=10)
def test_a_node_whose_heartbeat_is_older_than_the_lease_is_unavailable():
    register_node("frozen", heartbeat_ago=timedelta(seconds=60))
    healthy, details = node_health(node_name="frozen")
    assert not healthy
    assert details["status"] == "unavailable" and details["node"] == "frozen"
    assert details["heartbeat_age"] >= 60
    assert details["reason"].startswith("node frozen last heartbeated ")
    assert details["reason"].endswith("s ago (lease 10s)")


def test_without_a_name_the_node_is_found_by_this_host_and_pid():
    register_node("someone-else", heartbeat_ago=timedelta(0))
    assert node_health()[0] is False
    register_node("this-process", heartbeat_ago=timedelta(0), host=socket.gethostname(),
                  pid=os.getpid())  # fmt: skip
    healthy, details = node_health()
    assert healthy and details["node"] == "this-process"


def test_a_metrics_port_already_taken_is_one_clear_error():
    first = SchedulerMetrics.serve("127.0.0.1", 0)
    try:
        with pytest.raises(CommandError, match=rf"cannot serve metrics on 127.0.0.1:{first.port} "):
            SchedulerMetrics.serve("127.0.0.1", first.port)
    finally:
        first.shutdown()
    first.shutdown()  # a second shutdown is harmless
    assert first.port is None
