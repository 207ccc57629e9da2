"""When the server's sessions prove a node process gone before its lease ran out."""

import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection
from django.test import override_settings

from coordination import nodesessions
from coordination.clock import database_now
from coordination.liveness import (
    LockSessionWaits,
    SessionEvidence,
    Vanished,
    vanish_verdict,
    vanish_wait,
    vanished_instances,
    work_application_name,
)
from coordination.locks import make_lock, mysql, postgresql
from coordination.locks.postgresql import lock_application_name
from coordination.models import NodeSession
from tests.coordination.lockholder import LockHolderProcess
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


LOCK = {"lock_sessions": True, "any_sessions": True}


@pytest.mark.parametrize(
    ("changes", "verdict"),
    [
        ({}, Vanished.GONE),  # killed: no session left, heartbeat a second old
        ({"any_sessions": True}, Vanished.ENDING),  # its last work session is still exiting
        # Killed while it waited for another group's lock, or alive and following: look again.
        (LOCK, Vanished.ENDING),
        # A lock session of it outlasted a wait since this heartbeat: it may well be alive.
        ({**LOCK, "lock_outlasted": True}, Vanished.UNPROVEN),
        ({"any_sessions": True, "lock_outlasted": True}, Vanished.ENDING),  # work sessions only
        ({"lock_outlasted": True}, Vanished.GONE),
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
    outlasted = changes.pop("lock_outlasted", False)
    assert vanish_verdict(evidence(**changes), LEASE, lock_outlasted=outlasted) == verdict


def test_a_lock_session_is_waited_for_once_per_heartbeat_of_its_process():
    waits = LockSessionWaits()
    waits.record("a", NOW)
    assert waits.outlasted("a", NOW)
    assert not waits.outlasted("a", NOW + timedelta(seconds=1))  # it heartbeated since
    assert not waits.outlasted("b", NOW)
    for index in range(LockSessionWaits.LIMIT):
        waits.record(f"other-{index}", NOW)
    assert not waits.outlasted("a", NOW), "the oldest process is forgotten past the limit"
    assert waits.outlasted(f"other-{LockSessionWaits.LIMIT - 1}", NOW)


@pytest.mark.parametrize(
    ("vendor", "check"),
    [
        ("postgresql", postgresql.CLIENT_CHECK_INTERVAL_MS / 1000),
        ("mysql", mysql.CLIENT_CHECK_INTERVAL),
    ],
)
def test_the_wait_for_a_killed_nodes_sessions_outlasts_its_servers_check_of_a_waiting_client(
    vendor, check
):
    """A killed follower's lock wait ends at the server's next check of its client."""
    assert check < vanish_wait(vendor) <= check + 0.5


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


def _dsn() -> dict:
    dsn = connection.get_connection_params()
    dsn.pop("cursor_factory", None)
    dsn.pop("context", None)
    return dsn


def open_lock_session(node: str, instance: str, role: str = "lock"):
    """Open a real connection that the server attributes to ``node``'s process ``instance``
    as one of its lock (or, with ``role="work"``, work) sessions (PostgreSQL: by name; MySQL:
    by a recorded connection)."""
    if connection.vendor == "postgresql":
        name = lock_application_name(node) if role == "lock" else work_application_name(node)
        return psycopg.connect(**{**_dsn(), "application_name": name})
    other = connection.get_new_connection(connection.get_connection_params())
    with other.cursor() as cursor:
        cursor.execute(
            "SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()"
        )
        connection_id, client = cursor.fetchone()
    NodeSession.objects.create(
        node=node,
        instance=instance,
        role=role,
        connection_id=connection_id,
        client=client,
        opened_at=database_now(),
    )
    return other


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_a_lock_session_that_ends_just_after_the_check_starts_still_proves_the_node_gone():
    """The server ends a killed node's sessions one by one, its lock sessions among them."""
    candidates = {"ending": ("vn-ending", fresh())}
    session = open_lock_session("vn-ending", "ending")
    closed = threading.Event()

    def close():
        session.close()
        closed.set()

    closer = threading.Timer(0.1, close)
    started = time.monotonic()
    closer.start()
    try:
        assert vanished_instances(candidates) == {"ending"}
    finally:
        closer.cancel()
        closer.join()
        if not closed.is_set():
            session.close()
    assert time.monotonic() - started < vanish_wait(connection.vendor) + 0.5


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_a_node_proven_gone_is_not_held_up_by_a_live_worker_whose_sessions_stay():
    """A new leader's first look: the killed node is gone, a worker is mid-run beside it."""
    session = open_lock_session("vn-busy", "busy", role="work")
    if connection.vendor == "mysql":  # the killed node recorded its connection, now gone
        busy = NodeSession.objects.get(instance="busy")
        NodeSession.objects.create(
            node="vn-dead",
            instance="dead",
            role="lock",
            connection_id=busy.connection_id + 100000,
            client=busy.client,
            opened_at=database_now(),
        )
    try:
        candidates = {"dead": ("vn-dead", fresh()), "busy": ("vn-busy", fresh())}
        started = time.monotonic()
        assert vanished_instances(candidates) == {"dead"}
        assert time.monotonic() - started < vanish_wait(connection.vendor) / 2
    finally:
        session.close()


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_a_lock_session_that_stays_costs_one_wait_per_heartbeat_of_its_node():
    """A live ex-leader follows: its lock session stays, and maintenance may ask often."""
    session = open_lock_session("vn-following", "following")
    wait = vanish_wait(connection.vendor)
    try:
        candidates = {"following": ("vn-following", fresh())}
        started = time.monotonic()
        assert vanished_instances(candidates) == set()
        assert time.monotonic() - started >= wait  # it looked again for the wait
        started = time.monotonic()
        assert vanished_instances(candidates) == set()
        assert time.monotonic() - started < wait / 2, "waited again, same heartbeat"
        # A new heartbeat: the node may have been killed since, so it is waited for again.
        started = time.monotonic()
        assert vanished_instances({"following": ("vn-following", fresh())}) == set()
        assert time.monotonic() - started >= wait
    finally:
        session.close()


def lock_waits(node: str) -> int:
    """Return how many of ``node``'s lock sessions wait for a lock on the server right now."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                " AND wait_event_type = 'Lock'",
                (lock_application_name(node),),
            )
        else:
            cursor.execute(
                "SELECT count(*) FROM information_schema.PROCESSLIST p"
                " JOIN coordination_nodesession s ON s.connection_id = p.ID"
                " WHERE s.node = %s AND s.role = 'lock' AND p.STATE = 'User lock'",
                (node,),
            )
        return cursor.fetchone()[0]


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_a_node_killed_while_it_waits_for_another_groups_lock_is_gone_at_the_first_look():
    """SIGKILLed while leading one group and following another: a session waiting for a lock
    reads nothing from its client, so the server ends that lock session only at its check of
    the client, a moment after the process; the new leader's first look still proves it gone.

    It is killed just after its wait began, the worst moment: MariaDB's first check of a
    waiting ``GET_LOCK``'s client comes a second after the wait began.
    """
    plugins, publishing = 0x5A1100, 0x5A1101
    publishing_leader = make_lock(publishing, node_name="vk-publisher", label="test")
    new_leader = make_lock(plugins, node_name="vk-new", label="test")
    holder = LockHolderProcess(plugins, node="vk-killed", acquire=True, instance="killed")
    try:
        assert publishing_leader.acquire(wait=0)
        assert holder.wait_ready().startswith("ACQUIRED")
        assert holder.ask(f"follow {publishing} 30") == "FOLLOWING"
        wait_until(lambda: lock_waits("vk-killed") == 1, timeout=10)
        heartbeat = fresh()
        holder.kill()
        assert new_leader.acquire(wait=5), "the killed leader's lock session ended"
        started = time.monotonic()
        assert vanished_instances({"killed": ("vk-killed", heartbeat)}) == {"killed"}
        assert time.monotonic() - started < vanish_wait(connection.vendor) + 0.5
    finally:
        holder.stop()
        new_leader.close()
        publishing_leader.close()
