"""The scheduler's own metrics server (``runscheduler --metrics-port``): who sees what.

``/healthz`` keeps answering 200/503 for container health checks, with the status only;
details need ``Authorization: Bearer <INSTATIC_HEALTH_TOKEN>``. When
``INSTATIC_METRICS_TOKEN`` is set, ``/metrics`` needs it too; otherwise the server's bind
address (``--metrics-address``) is what keeps it internal.
"""

import json
import os
import socket

import pytest
from django.db import connection
from django.test import override_settings
from prometheus_client import CollectorRegistry

from coordination.clock import database_now
from coordination.metrics import InstaticMetrics
from coordination.metrics_server import SchedulerMetrics
from coordination.models import Node
from tests.deploy.support import http_get

HEALTH_TOKEN = "health-token-0123456789-abcdefghijklmnopqrstuvwxyz"
METRICS_TOKEN = "metrics-token-0123456789-abcdefghijklmnopqrstuvwxyz"


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def base():
    server = SchedulerMetrics.serve(
        "127.0.0.1", 0, metrics=InstaticMetrics(CollectorRegistry()), node_name="me"
    )
    yield f"http://127.0.0.1:{server.port}"
    server.shutdown()
    connection.close()


def register_node(name="me"):
    now = database_now()
    return Node.objects.create(
        name=name,
        instance=f"i-{name}",
        host=socket.gethostname(),
        pid=os.getpid(),
        started_at=now,
        last_heartbeat=now,
    )


@pytest.mark.django_db(transaction=True)
@override_settings(INSTATIC_HEALTH_TOKEN=HEALTH_TOKEN)
def test_healthz_is_status_only_without_the_health_token(base):
    assert http_get(f"{base}/healthz") == (503, '{"status": "unavailable"}')
    status, body = http_get(f"{base}/healthz", headers=bearer(HEALTH_TOKEN))
    assert status == 503 and "not registered" in body

    register_node()
    assert http_get(f"{base}/healthz") == (200, '{"status": "ok"}')
    assert http_get(f"{base}/healthz", headers=bearer("wrong")) == (200, '{"status": "ok"}')
    status, body = http_get(f"{base}/healthz", headers=bearer(HEALTH_TOKEN))
    assert status == 200 and json.loads(body)["node"] == "me"


@pytest.mark.django_db(transaction=True)
def test_metrics_need_the_metrics_token_when_one_is_set(base):
    with override_settings(INSTATIC_METRICS_TOKEN=METRICS_TOKEN):
        status, body = http_get(f"{base}/metrics")
        assert status == 401 and "instatic_" not in body
        assert http_get(f"{base}/metrics", headers=bearer(HEALTH_TOKEN))[0] == 401
        status, body = http_get(f"{base}/metrics", headers=bearer(METRICS_TOKEN))
        assert status == 200 and "instatic_metrics_database_up" in body
    # Without a token the bind address keeps the server internal.
    with override_settings(INSTATIC_METRICS_TOKEN=""):
        assert http_get(f"{base}/metrics")[0] == 200
