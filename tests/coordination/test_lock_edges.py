"""The leader lock at its edges: shutdown's cancel, a session gone before a check or a release,
a holder that ends just before its ``KILL``, stray lock files, sleeping without a connection.

Every vendor where the behaviour exists, on the real database (or lock file); a second handle
or a raw connection in this process stands in for another replica.
"""

import fcntl
import logging
import os
import threading
import time

import pytest
from django.db import connection

from coordination.locks import list_holders, make_lock, terminate_holder
from coordination.locks.sqlite import database_path
from coordination.waker import Waker
from tests.coordination.lockholder import is_waiting, temporary_alias
from tests.coordination.test_locks_server import driver_error, end_session, lock_log
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


# --- every vendor ------------------------------------------------------------------------------
def test_a_held_lock_says_so_and_taking_it_again_is_a_no_op(locks, key):
    lock = locks(key)
    assert repr(lock) == f"<{type(lock).__name__} key={lock.key_text} not held>"
    assert lock.acquire()
    session = lock.session_id()
    assert lock.acquire(wait=5), "already ours: no second lock, no wait"
    assert lock.session_id() == session
    assert repr(lock) == f"<{type(lock).__name__} key={lock.key_text} held>"
    assert lock.release()
    assert locks(key).acquire(), "one release frees it: the second acquire took nothing more"


def test_after_shutdown_cancels_waiting_no_wait_starts_but_a_try_still_works(locks, key):
    """Shutdown may still release and re-check; it must never start a long wait."""
    holder = locks(key)
    assert holder.acquire()
    lock = locks(key)
    lock.cancel_wait()
    started = time.monotonic()
    assert lock.acquire(wait=30) is False
    assert time.monotonic() - started < 5
    holder.release()
    assert lock.acquire() is True


def test_shutdown_ends_a_wait_for_a_lock_someone_else_holds(locks, key, caplog):
    """The follower blocked in its lock wait gets out at once, and it is no lock failure."""
    holder = locks(key)
    assert holder.acquire()
    lock = locks(key, label="stopping")
    assert not lock.acquire()  # connected, so the wait below is the server's (or the file's)
    result = {}

    def wait_for_it():
        started = time.monotonic()
        result["acquired"] = lock.acquire(wait=30)
        result["waited"] = time.monotonic() - started

    caplog.set_level(logging.WARNING, logger="coordination.locks")
    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    try:
        if connection.vendor == "sqlite":
            wait_until(lambda: lock._waiting, timeout=10)
        else:
            wait_until(lambda: is_waiting(lock), timeout=10, message="not waiting in the server")
        lock.cancel_wait()
        waiter.join(20)
    finally:
        waiter.join(30)
    assert result == {"acquired": False, "waited": result["waited"]}
    assert result["waited"] < 20
    assert lock_log(caplog) == [], "our own shutdown is not logged as a lock failure"
    assert holder.still_held()


@pytest.mark.server
def test_shutdown_ends_a_wait_that_reached_the_server_only_after_the_first_interrupt(locks, key):
    """A cancel sent between the wait's start and its statement reaching the server finds no
    statement to interrupt; the wait that then starts must still end, not run its 30 s."""
    holder = locks(key)
    assert holder.acquire()
    lock = locks(key, label="stopping")
    assert not lock.acquire()  # connected, so the wait below is the server's (or the file's)
    entered, interrupted, result = threading.Event(), threading.Event(), {}
    wait_in_server, interrupt = lock._acquire, lock._interrupt_wait

    def late_wait(wait):
        entered.set()
        interrupted.wait(10)  # the statement is sent only after the first interrupt
        return wait_in_server(wait)

    def interrupt_and_tell():
        interrupt()
        interrupted.set()

    lock._acquire, lock._interrupt_wait = late_wait, interrupt_and_tell

    def wait_for_it():
        started = time.monotonic()
        result["acquired"] = lock.acquire(wait=30)
        result["waited"] = time.monotonic() - started

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    try:
        assert entered.wait(10)
        lock.cancel_wait()
        waiter.join(15)
        assert not waiter.is_alive(), "the wait went on after shutdown cancelled it"
    finally:
        interrupted.set()
        holder.release()
        waiter.join(30)
    assert result["acquired"] is False and result["waited"] < 15


# --- a database server: the lock's session ends --------------------------------------------------
@pytest.mark.server
def test_a_check_on_an_ended_session_raises_when_asked_to(locks, key, caplog):
    lock = locks(key, label="strict", raise_errors=True)
    assert lock.acquire()
    end_session(lock.session_id())
    with pytest.raises(driver_error()):
        lock.still_held()
    assert not lock.acquired
    assert any(m.startswith(f"[strict] lost advisory lock key {lock.key_text}: ") for m in
               lock_log(caplog, logging.ERROR))  # fmt: skip


@pytest.mark.server
@pytest.mark.parametrize("raise_errors", [False, True], ids=["quiet", "raising"])
def test_a_release_on_an_ended_session_reports_the_lock_lost(locks, key, caplog, raise_errors):
    """The session (and the lock with it) went before the release: not released by us."""
    lock = locks(key, label="late", raise_errors=raise_errors)
    assert lock.acquire()
    end_session(lock.session_id())
    if raise_errors:
        with pytest.raises(driver_error()):
            lock.release()
    else:
        assert lock.release() is False
    assert not lock.acquired
    [message] = lock_log(caplog, logging.ERROR)
    assert message.startswith(f"[late] lost advisory lock key {lock.key_text} before release: ")
    assert locks(key).acquire(), "the key is free for the next leader"


# --- PostgreSQL and MariaDB: sleeping on the lock connection --------------------------------------
@pytest.mark.server
def test_a_lock_without_a_connection_sleeps_on_the_waker_alone(locks, key):
    """Before the first acquire there is no socket to watch: the waker still ends the sleep."""
    lock = locks(key)
    waker = Waker()
    timer = threading.Timer(0.1, waker.set)
    try:
        timer.start()
        started = time.monotonic()
        lock.wait_for_wakeup(30, waker)
        assert waker.is_set() and time.monotonic() - started < 20
    finally:
        timer.join()
        waker.close()


@pytest.mark.postgresql
def test_a_leader_not_listening_sleeps_on_the_waker_and_listening_twice_is_once(locks, key):
    lock = locks(key)
    assert lock.acquire()
    assert not lock.listening
    waker = Waker()
    timer = threading.Timer(0.1, waker.set)
    try:
        timer.start()
        lock.wait_for_wakeup(30, waker)
        assert waker.is_set()
    finally:
        timer.join()
        waker.close()
    lock.listen("instatic_test_edges")
    lock.listen("instatic_test_edges")
    assert lock.listening and lock._listening == {"instatic_test_edges"}


@pytest.mark.postgresql
def test_a_notify_read_by_the_last_query_ends_the_sleep_at_once(locks, key):
    """A wake-up that arrived during this thread's own last query is in psycopg's backlog.

    It ends the sleep marked as a ``NOTIFY``, so the loop plans again (a finished run sets
    the same waker without the mark).
    """
    lock = locks(key)
    assert lock.acquire()
    lock.listen("instatic_test_backlog")
    with connection.cursor() as cursor:
        cursor.execute("NOTIFY instatic_test_backlog")
    # The lock connection reads the notification while it answers a query of its own.
    lock._conn.execute("SELECT pg_sleep(0.2)")
    waker = Waker()
    try:
        started = time.monotonic()
        lock.wait_for_wakeup(30, waker)
        assert time.monotonic() - started < 5
        assert waker.is_set() and waker.take_notified()
    finally:
        waker.close()


# --- MariaDB ----------------------------------------------------------------------------------
@pytest.mark.mysql
def test_a_holder_that_ends_just_before_its_kill_is_not_terminated(locks, key):
    """The KILL race: the holder's session ends between the look and the ``KILL``."""
    holder = locks(key)
    assert holder.acquire()
    session = holder.session_id()

    def holder_leaves_first(execute, sql, params, many, context):
        if sql.startswith("KILL CONNECTION"):
            holder._discard()
            wait_until(lambda: not server_shows(session), timeout=10)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(holder_leaves_first):
        assert terminate_holder(key) is None
    assert locks(key).acquire()


def server_shows(session: int) -> bool:
    conn = connection.get_new_connection(connection.get_connection_params())
    try:
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", [session]
            )
            return cursor.fetchone()[0] == 1
    finally:
        conn.close()


@pytest.mark.mysql
def test_a_terminated_holder_still_rolling_back_is_reported(locks, key, monkeypatch, caplog):
    """terminate_holder waits (bounded) for the killed holder's lock to go, then says so."""
    from coordination.locks import mysql

    holder = connection.get_new_connection(connection.get_connection_params())
    try:
        holder.autocommit(False)
        name = locks(key).lock_name
        with holder.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK(%s, 0)", [name])
            assert cursor.fetchone()[0] == 1
            cursor.execute(
                "INSERT INTO coordination_nodesession"
                " (node, instance, role, connection_id, client, opened_at)"
                " SELECT 'bulk', 'bulk', 'work', seq, '', NOW(6) FROM seq_1_to_100000"
            )
            cursor.execute("SELECT CONNECTION_ID()")
            session = cursor.fetchone()[0]
        monkeypatch.setattr(mysql, "_KILL_WAIT", 0.0)
        with caplog.at_level(logging.WARNING, logger="coordination.locks"):
            assert terminate_holder(key) == session
        assert f"killed session {session} holding lock key" in caplog.text
        wait_until(lambda: not server_shows(session), timeout=60)
        assert locks(key).acquire()
    finally:
        try:
            holder.close()
        except Exception:  # noqa: BLE001 - killed above
            pass


@pytest.mark.mysql
def test_a_lock_connection_that_cannot_be_recorded_is_not_used(key, caplog):
    """In a scheduler process the lock connection must be findable by a fencer, or unused."""
    import MySQLdb

    from coordination import nodesessions
    from coordination.liveness import NodeIdentity

    lock = make_lock(key, label="unrecorded")
    try:
        # An instance id too long for its column: the server refuses every record.
        connection.ensure_connection()
        with pytest.raises(MySQLdb.DataError):
            nodesessions.record_connections(
                NodeIdentity(name="edges", instance="i" * 40, host="h", pid=1)
            )
        with caplog.at_level(logging.WARNING, logger="coordination.locks"):
            assert lock.acquire() is False
        assert lock._conn is None
        [message] = lock_log(caplog)
        assert "Data too long" in message
    finally:
        nodesessions.stop_recording()
        lock.close()


# --- SQLite -------------------------------------------------------------------------------------
@pytest.mark.sqlite
def test_status_skips_stray_lock_files_and_unreadable_records(key):
    """``schedulerstatus`` must list a held lock whose record is damaged, and ignore files that
    only look like lock files."""
    db_path = database_path("default")
    stray = db_path.with_name(f"{db_path.name}.lock-not-a-key")
    damaged = db_path.with_name(f"{db_path.name}.lock-{0xABCDEF:016x}")
    descriptors = []
    try:
        for path, content in ((stray, b"{}"), (damaged, b"{not json")):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            os.write(fd, content)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            descriptors.append(fd)
        holders = list_holders()
        assert [(h.key, h.pid, h.application_name, h.since) for h in holders] == [
            (0xABCDEF, None, None, None)
        ]
    finally:
        for fd in descriptors:
            os.close(fd)
        stray.unlink(missing_ok=True)
        damaged.unlink(missing_ok=True)


@pytest.mark.sqlite
def test_an_in_memory_lock_waits_then_gives_up_and_closing_frees_it(key):
    with temporary_alias("memory", NAME=":memory:"):
        first = make_lock(key, using="memory")
        second = make_lock(key, using="memory")
        try:
            assert not second.still_held()
            assert first.acquire()
            started = time.monotonic()
            assert second.acquire(wait=0.2) is False
            assert time.monotonic() - started >= 0.2
            assert second.release() is False
            first.close()  # not released first: closing the handle frees the lock
            assert second.acquire()
        finally:
            first.close()
            second.close()
