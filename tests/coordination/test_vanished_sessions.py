"""When the server's sessions prove a node process gone before its lease ran out."""

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection
from django.test import override_settings

from coordination import nodesessions
from coordination.clock import database_now
from coordination.liveness import (
    SessionEvidence,
    Vanished,
    vanish_verdict,
    vanished_instances,
    work_application_name,
)
from coordination.locks.postgresql import lock_application_name
from coordination.models import NodeSession
from tests.support.polling import wait_until

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=6)


def evidence(**changes) -> SessionEvidence:
    values = {
        "server_started": NOW - timedelta(hours=1),
        "now": NOW,
        "last_heartbeat": NOW - timedelta(seconds=1),
        "identified": True,
        "recorded": True,
        "lock_sessions": False,
        "any_sessions": False,
    }
    return SessionEvidence(**{**values, **changes})


@pytest.mark.parametrize(
    ("changes", "verdict"),
    [
        ({}, Vanished.GONE),  # killed: no session left, heartbeat a second old
        ({"any_sessions": True}, Vanished.ENDING),  # its last work session is still exiting
        ({"lock_sessions": True, "any_sessions": True}, Vanished.UNPROVEN),  # alive, following
        ({"identified": False}, Vanished.UNPROVEN),  # behind a transaction pooler
        ({"recorded": False}, Vanished.UNPROVEN),  # MySQL: it recorded no connection
        # The server restarted after its last heartbeat: everyone is reconnecting.
        ({"server_started": NOW - timedelta(seconds=0.5)}, Vanished.UNPROVEN),
        # Half a lease without a heartbeat: its own probes may have cut a live process off.
        ({"last_heartbeat": NOW - timedelta(seconds=3)}, Vanished.UNPROVEN),
        ({"last_heartbeat": NOW - timedelta(seconds=2.9)}, Vanished.GONE),
    ],
)
def test_only_no_session_at_all_of_a_recently_heartbeating_process_proves_it_gone(changes, verdict):
    assert vanish_verdict(evidence(**changes), LEASE) == verdict


def fresh() -> datetime:
    return database_now() - timedelta(seconds=0.2)


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_postgresql_sees_a_node_gone_only_when_none_of_its_named_sessions_is_left():
    dsn = connection.get_connection_params()
    dsn.pop("cursor_factory", None)
    dsn.pop("context", None)
    candidates = {"dead": ("vn-dead", fresh()), "live": ("vn-live", fresh())}
    with psycopg.connect(**{**dsn, "application_name": work_application_name("vn-live")}):
        assert vanished_instances(candidates) == {"dead"}
        with override_settings(INSTATIC_LOCK_MODE="transaction"):
            assert vanished_instances(candidates) == set()
    with psycopg.connect(**{**dsn, "application_name": lock_application_name("vn-live")}):
        assert vanished_instances(candidates) == {"dead"}
    # The server ends a closed connection's session a moment later.
    wait_until(lambda: vanished_instances(candidates) == {"dead", "live"}, timeout=10)


@pytest.mark.mysql
@pytest.mark.django_db(transaction=True)
def test_mysql_sees_a_node_gone_only_when_none_of_its_recorded_connections_is_left():
    # Another connection than the test's (the checks leave the asking connection out).
    other = connection.get_new_connection(connection.get_connection_params())
    with other.cursor() as cursor:
        cursor.execute(
            "SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()"
        )
        own_id, own_host = cursor.fetchone()

    def record(instance, connection_id, client, role="work"):
        NodeSession.objects.create(
            node=f"vn-{instance}",
            instance=instance,
            role=role,
            connection_id=connection_id,
            client=client,
            opened_at=database_now(),
        )

    record("dead", own_id + 100000, own_host, role="lock")
    record("dead", own_id + 100001, own_host)
    record("moved", own_id, "elsewhere:1")  # the id is live, but for another client
    record("live", own_id, own_host)
    candidates = {name: (f"vn-{name}", fresh()) for name in ("dead", "moved", "live", "silent")}
    # "silent" recorded nothing: nothing proves it gone.
    assert vanished_instances(candidates) == {"dead", "moved"}
    assert nodesessions.live_sessions(["live"]) == {"live": (True, False, True)}
    other.close()
