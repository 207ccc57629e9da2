"""The leader lock on PostgreSQL: its own unpooled session, visible in pg_stat_activity.

Django's psycopg pool, ``close_old_connections()`` and ``connection.close()`` must neither
release nor leak a session advisory lock, the holder is found through ``pg_locks`` joined to
``pg_stat_activity`` under ``<node>/lock``, and a server that stops means "not leader".
"""

import json
import logging
import select
import time
from datetime import datetime

import psycopg
import pytest
from django.db import connection

from coordination.keys import normalize_key
from coordination.locks import LockHolder, list_holders, make_lock
from coordination.waker import Waker
from devtools.pgcluster import PostgresCluster
from tests.coordination.lockholder import temporary_alias

pytestmark = [pytest.mark.postgresql, pytest.mark.django_db(transaction=True)]


def scalar(sql: str, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def test_pooled_borrowers_never_find_the_key_held_by_their_own_session(holders, key):
    (holder,) = holders.start(key, acquire=True, pool=True, nodes=["pooled"])
    session = int(holder.wait_ready().split()[1])

    answer = holder.ask("probe 8")
    probes = json.loads(answer.removeprefix("PROBE "))
    pooled_sessions = {pid for pid, _ in probes}
    assert session not in pooled_sessions
    assert [got for _, got in probes] == [False] * 8, probes  # held, and not by them

    # Recycling the pooled connections keeps the lock where it is.
    assert holder.ask("recycle").startswith("RECYCLED ")
    assert holder.held()
    mine = [h for h in list_holders() if h.key == normalize_key(key)]
    assert [(h.pid, h.application_name) for h in mine] == [(session, "pooled/lock")]
    # One lock session, opened for the lock: not a pool of them.
    lock_sessions = scalar(
        "SELECT array_agg(pid) FROM pg_stat_activity WHERE application_name = 'pooled/lock'"
    )
    assert lock_sessions == [session]

    # And closing the lock leaves nothing behind on any pooled session.
    assert holder.release()
    probes = json.loads(holder.ask("probe 4").removeprefix("PROBE "))
    assert [got for _, got in probes] == [True] * 4
    assert not [h for h in list_holders() if h.key == normalize_key(key)]


def test_the_pool_probe_sees_a_lock_taken_on_a_pooled_session(holders, key):
    """The control for the test above: the mistake it guards against is visible to it."""
    (holder,) = holders.start(key, pool=True, nodes=["leaky"])
    leaked_on = int(holder.ask("leak").removeprefix("LEAKED "))
    probes = json.loads(holder.ask("probe 4").removeprefix("PROBE "))
    assert [leaked_on, True] in probes, probes


def test_lock_session_is_named_after_the_node_and_listed(holders, key):
    negative = normalize_key(key) | -(2**63)  # a key with the top bit set
    first, second = holders.start(
        0xDEADBEEF, str(negative), acquire=True, nodes=["node-a", "node-b"]
    )
    sessions = {int(h.wait_ready().split()[1]) for h in (first, second)}
    now = scalar("SELECT now()")

    found = {h.key: h for h in list_holders() if h.key in (0xDEADBEEF, negative)}
    assert set(found) == {0xDEADBEEF, negative}
    for held_key, node in ((0xDEADBEEF, "node-a"), (negative, "node-b")):
        holder = found[held_key]
        assert isinstance(holder, LockHolder)
        assert holder.pid in sessions
        assert holder.application_name == f"{node}/lock"
        assert holder.client_addr == "127.0.0.1"
        assert isinstance(holder.since, datetime) and holder.since <= now
        assert scalar(
            "SELECT application_name FROM pg_stat_activity WHERE pid = %s", [holder.pid]
        ) == (f"{node}/lock")
    # 0xdeadbeef is the plain bigint advisory key 3735928559, as other tools would take it.
    assert scalar("SELECT pg_try_advisory_lock(3735928559)") is False
    assert scalar("SELECT pg_try_advisory_lock(%s)", [negative]) is False


def test_a_long_node_name_keeps_the_lock_suffix(key):
    lock = make_lock(key, node_name="n" * 80)
    try:
        assert lock.acquire()
        name = scalar(
            "SELECT application_name FROM pg_stat_activity WHERE pid = %s", [lock.session_id()]
        )
        assert name == "n" * 58 + "/lock"
    finally:
        lock.close()


def test_a_stopped_server_means_not_leader(key, caplog):
    with PostgresCluster() as cluster:
        with psycopg.connect(cluster.url("postgres"), autocommit=True) as admin:
            admin.execute("CREATE DATABASE lockdown")
        with temporary_alias(
            "stopping", HOST="127.0.0.1", PORT=cluster.port, NAME="lockdown", USER="postgres"
        ):
            lock = make_lock(key, using="stopping", label="stoptest")
            try:
                assert lock.acquire()
                assert lock.still_held()
                cluster.stop()
                with caplog.at_level(logging.WARNING, logger="coordination.locks"):
                    assert lock.still_held() is False
                    assert lock.acquire() is False
                assert not lock.acquired
                messages = [r.getMessage() for r in caplog.records]
                assert messages[0].startswith(f"[stoptest] lost advisory lock key {lock.key_text}")
                assert messages[1].startswith(
                    f"[stoptest] could not take advisory lock key {lock.key_text}: "
                )
                assert messages[1].endswith("; not leader")
            finally:
                lock.close()


def test_a_notify_read_during_another_threads_query_still_wakes_the_leader(key):
    """A ``NOTIFY`` that lands while a job thread's ``still_held()`` runs on the lock session
    is read by that query into psycopg's backlog, leaving the socket quiet: the leader's sleep
    must still end at once, not at its timeout (up to ``INSTATIC_NOTIFY_MAX_TICK``)."""
    lock = make_lock(key, node_name="listener")
    try:
        assert lock.acquire()
        lock.listen("instatic_wakeup_test")
        with connection.cursor() as cursor:
            cursor.execute("NOTIFY instatic_wakeup_test")
        # The notification has reached the lock session's socket ...
        ready, _, _ = select.select([lock._conn.fileno()], [], [], 10)
        assert ready, "the NOTIFY never arrived"
        # ... and another thread's query on that session reads it with its own answer.
        assert lock.still_held()
        started = time.monotonic()
        lock.wait_for_wakeup(20, Waker())
        assert time.monotonic() - started < 10, "the sleep ran to its timeout"
    finally:
        lock.close()


def test_a_notify_a_job_threads_check_reads_wakes_the_sleeping_leader(key):
    """The same, while the leader sleeps: the check passes the wake-up on to its waker."""
    lock = make_lock(key, node_name="listener")
    waker = Waker()
    try:
        assert lock.acquire()
        lock.listen("instatic_wakeup_test")
        lock.wait_for_wakeup(0, waker)  # the leader has slept on this waker
        with connection.cursor() as cursor:
            cursor.execute("NOTIFY instatic_wakeup_test")
        ready, _, _ = select.select([lock._conn.fileno()], [], [], 10)
        assert ready, "the NOTIFY never arrived"
        assert lock.still_held()
        assert waker.is_set()
    finally:
        lock.close()
