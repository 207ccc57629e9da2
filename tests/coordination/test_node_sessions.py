"""MySQL/MariaDB connection records and the fencer's ``KILL`` (``coordination.nodesessions``).

A fencer ends a frozen leader's connections by the ids its process recorded. These tests run
against the real server with real second connections (standing in for the frozen process):
a recorded id is killed only while the server still shows it for the same client, a
connection that ends just before its ``KILL`` is no error, and a connection that cannot be
recorded is closed rather than left doing work no fencer could end.
"""

import threading
import uuid

import pytest
from django.db import DatabaseError, connection
from django.db.models.functions import Now

from coordination import nodesessions
from coordination.liveness import NodeIdentity
from coordination.locks import make_lock
from coordination.models import JobState, NodeSession
from tests.support.polling import wait_until

pytestmark = [pytest.mark.mysql, pytest.mark.django_db(transaction=True)]


def raw_connection():
    """Open a DB-API connection of its own, as another scheduler process would have."""
    conn = connection.get_new_connection(connection.get_connection_params())
    conn.autocommit(True)
    return conn


def scalar(conn, sql: str, params=()):
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def connection_id_and_client(conn) -> tuple[int, str]:
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT ID, COALESCE(HOST, '') FROM information_schema.PROCESSLIST"
            " WHERE ID = CONNECTION_ID()"
        )
        return cursor.fetchone()


def server_shows(connection_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", [connection_id]
        )
        return cursor.fetchone()[0] == 1


def record(instance: str, connection_id: int, client: str, role=NodeSession.Role.WORK):
    """Write a connection record as a scheduler process writes it when it connects."""
    return NodeSession.objects.create(
        node="frozen-node",
        instance=instance,
        role=role,
        connection_id=connection_id,
        client=client,
        opened_at=Now(),
    )


@pytest.fixture
def victims():
    """Connections standing in for a frozen process's; closed after the test if still open."""
    opened = []

    def open_one():
        opened.append(raw_connection())
        return opened[-1]

    yield open_one
    for conn in opened:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - killed by the test: nothing left to close
            pass


@pytest.fixture
def identity():
    """Register this test process as a scheduler node's; always stop recording afterwards."""
    made = NodeIdentity(name="sessions-node", instance=uuid.uuid4().hex, host="testhost", pid=1)
    yield made
    nodesessions.stop_recording()


def test_kill_ends_a_live_recorded_connection_and_its_row_locks(victims):
    """When kill() returns, the victim's transaction has rolled back and its row locks are free."""
    JobState.objects.create(name="sessions.locked", group="g", schedule="every 1h")
    victim = victims()
    victim.autocommit(False)
    with victim.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM coordination_jobstate WHERE name = %s FOR UPDATE",
            ["sessions.locked"],
        )
    victim_id, client = connection_id_and_client(victim)
    record("frozen", victim_id, client)

    assert nodesessions.kill("frozen") == 1

    assert not server_shows(victim_id)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM coordination_jobstate WHERE name = %s FOR UPDATE NOWAIT",
            ["sessions.locked"],
        )
    assert not NodeSession.objects.filter(instance="frozen").exists()
    with pytest.raises(Exception):  # noqa: B017 - the driver's "server has gone away"
        scalar(victim, "SELECT 1")


def test_an_id_the_server_gave_to_another_client_is_not_killed(victims):
    """After a server restart ids start again from 1: a stale record names someone else now."""
    bystander = victims()
    bystander_id, client = connection_id_and_client(bystander)
    host = client.rsplit(":", 1)[0]
    record("before-restart", bystander_id, f"{host}:1")  # same id, another client port

    assert nodesessions.kill("before-restart") == 0

    assert scalar(bystander, "SELECT 1") == 1
    assert not NodeSession.objects.filter(instance="before-restart").exists()


def test_only_the_roles_asked_for_are_killed(victims):
    """Fencing ends work sessions; the lock session is the lock's business."""
    work, lock = victims(), victims()
    record("frozen", *connection_id_and_client(work))
    record("frozen", *connection_id_and_client(lock), role=NodeSession.Role.LOCK)

    assert nodesessions.kill("frozen") == 1

    assert scalar(lock, "SELECT 1") == 1
    assert list(NodeSession.objects.values_list("role", flat=True)) == ["lock"]


def test_a_connection_that_ends_just_before_its_kill_is_not_an_error(victims):
    """The KILL race: the frozen process's connection ends between the look and the KILL.

    Django's execute wrapper closes the victim right before the real ``KILL`` statement
    reaches the server, which then answers "unknown thread id" (1094).
    """
    victim = victims()
    victim_id, client = connection_id_and_client(victim)
    record("racing", victim_id, client)
    kills = []

    def end_the_victim_first(execute, sql, params, many, context):
        if sql.startswith("KILL CONNECTION"):
            victim.close()
            wait_until(lambda: not server_shows_on_its_own(victim_id), timeout=10)
            try:
                return execute(sql, params, many, context)
            except DatabaseError as exc:
                kills.append(nodesessions.error_code(exc))
                raise
        return execute(sql, params, many, context)

    with connection.execute_wrapper(end_the_victim_first):
        assert nodesessions.kill("racing") == 0

    assert kills == [nodesessions.ER_NO_SUCH_THREAD]
    assert not NodeSession.objects.filter(instance="racing").exists()


def server_shows_on_its_own(connection_id: int) -> bool:
    """Look at the process list on a connection of its own (not through an execute wrapper)."""
    conn = raw_connection()
    try:
        return scalar(
            conn,
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s",
            [connection_id],
        )
    finally:
        conn.close()


def test_kill_with_nothing_recorded_kills_nothing(victims):
    bystander = victims()
    assert nodesessions.kill("never-recorded") == 0
    assert scalar(bystander, "SELECT 1") == 1


def test_a_registered_process_records_each_connection_once(identity):
    """Every work connection the process opens is recorded with the id and client it has."""
    connection.ensure_connection()
    nodesessions.record_connections(identity)
    nodesessions.record_connections(identity)  # registering again records nothing new
    main_id, main_client = connection_id_and_client(connection.connection)

    seen = {}

    def job_thread():
        from django.db import connection as thread_connection

        try:
            thread_connection.ensure_connection()
            seen["id"] = connection_id_and_client(thread_connection.connection)
        finally:
            thread_connection.close()

    thread = threading.Thread(target=job_thread)
    thread.start()
    thread.join(30)

    rows = sorted(
        NodeSession.objects.filter(instance=identity.instance).values_list(
            "node", "role", "connection_id", "client"
        )
    )
    assert rows == sorted(
        [
            ("sessions-node", "work", main_id, main_client),
            ("sessions-node", "work", *seen["id"]),
        ]
    )


def test_a_stopped_process_records_no_more_connections(identity):
    nodesessions.record_connections(identity)
    nodesessions.stop_recording()

    def job_thread():
        from django.db import connection as thread_connection

        try:
            thread_connection.ensure_connection()
        finally:
            thread_connection.close()

    before = NodeSession.objects.filter(instance=identity.instance).count()
    thread = threading.Thread(target=job_thread)
    thread.start()
    thread.join(30)
    assert NodeSession.objects.filter(instance=identity.instance).count() == before


def test_a_connection_that_cannot_be_recorded_is_closed():
    """Fail closed: a connection no fencer could find must not go on to do the node's work.

    An instance id longer than its column makes the server refuse the record (strict mode).
    """
    import MySQLdb

    identity = NodeIdentity(name="sessions-node", instance="x" * 40, host="testhost", pid=1)
    connection.ensure_connection()
    try:
        with pytest.raises(MySQLdb.DataError, match="Data too long"):
            nodesessions.record_connections(identity)
        assert connection.connection is None
    finally:
        nodesessions.stop_recording()
    assert not NodeSession.objects.exists()


def test_the_lock_connection_is_recorded_only_in_a_registered_process(identity, locks, key):
    """A lock taken by a management command or a test is nobody's node session."""
    outside = locks(key)
    assert outside.acquire()
    assert not NodeSession.objects.exists()
    outside.close()

    nodesessions.record_connections(identity)
    inside = make_lock(key)
    try:
        assert inside.acquire()
        lock_rows = NodeSession.objects.filter(instance=identity.instance, role="lock")
        assert list(lock_rows.values_list("connection_id", flat=True)) == [inside.session_id()]
    finally:
        inside.close()


def test_error_code_reads_the_driver_error_inside_another():
    try:
        with connection.cursor() as cursor:
            cursor.execute("KILL CONNECTION 4000000000")
    except DatabaseError as exc:
        driver_error = exc
    assert nodesessions.error_code(driver_error) == nodesessions.ER_NO_SUCH_THREAD
    try:
        raise RuntimeError("fencing failed") from driver_error
    except RuntimeError as exc:
        assert nodesessions.error_code(exc) == nodesessions.ER_NO_SUCH_THREAD
    assert nodesessions.error_code(RuntimeError("no server error here")) is None


def test_a_killed_connection_still_rolling_back_is_reported_and_not_waited_for(
    victims, monkeypatch, caplog
):
    """A fencer waits at most ``KILL_WAIT`` for killed connections, then says so and goes on.

    The victim has a large uncommitted insert, which the server rolls back after the ``KILL``
    before the connection is gone; with no time to wait, the fencer reports it at once.
    """
    victim = victims()
    victim.autocommit(False)
    with victim.cursor() as cursor:
        cursor.execute(
            "INSERT INTO coordination_nodesession"
            " (node, instance, role, connection_id, client, opened_at)"
            " SELECT 'bulk', 'bulk', 'work', seq, '', NOW(6) FROM seq_1_to_100000"
        )
    victim_id, client = connection_id_and_client(victim)
    record("rolling-back", victim_id, client)
    monkeypatch.setattr(nodesessions, "KILL_WAIT", 0.0)

    with caplog.at_level("WARNING", logger="coordination.nodesessions"):
        assert nodesessions.kill("rolling-back") == 1

    assert "killed 1 connection(s) of node instance rolling-back, but some were still there" in (
        caplog.text
    )
    wait_until(lambda: not server_shows(victim_id), timeout=60)
    assert not NodeSession.objects.exists(), "the victim's insert was rolled back"


def test_forget_removes_a_stopped_process_or_a_nodes_earlier_processes():
    """A restarted node drops its earlier processes' records and keeps its own."""
    record("old-process", 11, "10.0.0.1:1")
    record("new-process", 12, "10.0.0.1:2")
    other = NodeSession.objects.create(
        node="other-node",
        instance="other-process",
        role="work",
        connection_id=13,
        client="10.0.0.2:1",
        opened_at=Now(),
    )
    nodesessions.forget(node="frozen-node", keep="new-process")
    assert set(NodeSession.objects.values_list("instance", flat=True)) == {
        "new-process",
        other.instance,
    }
    nodesessions.forget(instance="new-process")
    assert list(NodeSession.objects.values_list("instance", flat=True)) == [other.instance]
