"""The leader lock on a database server (PostgreSQL and MariaDB): sessions that end.

A holder whose session is terminated from outside finds the lock lost at its next check, and
the lock fails closed when its connection breaks before or during an acquire, or when the
server is not there at all. Connections are broken for real: the server ends the session
(``pg_terminate_backend`` / ``KILL CONNECTION``) or nothing listens on the port.
"""

import logging
import threading
import time

import pytest
from django.db import close_old_connections, connection

from coordination.locks import list_holders, make_lock, terminate_holder
from devtools.servers import free_port
from tests.coordination.lockholder import backend_pid, is_waiting, temporary_alias
from tests.support.polling import wait_until

pytestmark = [pytest.mark.server, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def key(request) -> str:
    return f"test:{request.node.name}"


def session_alive(session_id: int) -> bool:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [session_id])
        else:
            cursor.execute(
                "SELECT count(*) FROM information_schema.PROCESSLIST WHERE ID = %s", [session_id]
            )
        return cursor.fetchone()[0] > 0


def end_session(session_id: int) -> None:
    """End a database session from outside, as an operator or a crash of the link would."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [session_id])
            assert cursor.fetchone()[0]
        else:
            cursor.execute(f"KILL CONNECTION {int(session_id)}")
    wait_until(lambda: not session_alive(session_id), timeout=5)


def lock_log(caplog, level=logging.WARNING) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("coordination.locks") and r.levelno >= level
    ]


def driver_error():
    """The DB-API driver's OperationalError (psycopg or MySQLdb), as the lock sees it."""
    return connection.Database.OperationalError


# --- terminating a holder from outside -----------------------------------------------------
def test_terminated_holder_finds_the_lock_lost_and_the_other_acquires(holders, locks, key):
    holder, bystander = holders.start(key, f"{key}:other", acquire=True)
    session = int(holder.wait_ready().split()[1])
    bystander_session = int(bystander.wait_ready().split()[1])
    lock = locks(key, node_name="follower")
    assert not lock.acquire()

    # A session that does not hold the key is never terminated.
    assert terminate_holder(key, pid=bystander_session) is None
    assert terminate_holder(key, pid=lock.session_id()) is None
    assert session_alive(bystander_session) and session_alive(lock.session_id())
    assert holder.held() and bystander.held()

    assert terminate_holder(key, pid=session) == session
    assert lock.acquire()  # the session is gone, and the lock with it, when it returns
    assert holder.held() is False  # at its very next check
    assert "[lockholder] lost advisory lock key" in holder.log()
    assert lock.still_held()
    # The terminated holder fails closed and keeps running: not acquired, no crash.
    assert holder.acquire() is None
    assert bystander.held()


def test_terminate_holder_without_pid_ends_whoever_holds_the_key(holders, key):
    assert terminate_holder(key) is None  # nobody holds it: nothing to do
    (holder,) = holders.start(key, acquire=True)
    session = int(holder.wait_ready().split()[1])
    assert terminate_holder(key) == session
    assert not holder.held()
    assert terminate_holder(key) is None


# --- the lock is on its own connection --------------------------------------------------------
def test_lock_survives_closing_djangos_connections(locks, key):
    lock = locks(key, node_name="survivor")
    assert lock.acquire()
    django_session = backend_pid(connection)
    assert django_session != lock.session_id()

    close_old_connections()
    connection.close()
    wait_until(lambda: not session_alive(django_session), timeout=5)
    assert lock.still_held()
    assert not locks(key).acquire()
    assert lock.release()
    assert locks(key).acquire()


def test_still_held_from_several_threads_at_once(locks, key, caplog):
    """The scheduler's workers check the lock while its loop does, on one connection."""
    lock = locks(key, label="threads")
    assert lock.acquire()
    answers = []
    start = threading.Barrier(4)

    def check():
        start.wait()
        answers.extend(lock.still_held() for _ in range(50))

    threads = [threading.Thread(target=check) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert answers == [True] * 200
    assert lock_log(caplog) == []
    assert lock.still_held()


def test_a_release_that_finds_the_lock_gone_is_logged_as_lost(locks, key, caplog):
    lock = locks(key, label="unlocktest")
    assert lock.acquire()
    # Unlock behind the handle's back, on its own session: the real unlock then finds nothing.
    if connection.vendor == "postgresql":
        lock._conn.execute("SELECT pg_advisory_unlock(%s)", (lock.key,))
    else:
        assert lock._scalar("SELECT RELEASE_LOCK(%s)", (lock.lock_name,)) == 1
    with caplog.at_level(logging.WARNING, logger="coordination.locks"):
        assert lock.release() is False
    assert lock_log(caplog, logging.ERROR) == [
        f"[unlocktest] lost advisory lock key {lock.key_text}: unlock found it not held"
    ]


# --- fail closed ----------------------------------------------------------------------------
def test_connection_dropped_between_connecting_and_acquiring(locks, key, caplog):
    other = locks(key)
    assert other.acquire()
    lock = locks(key, label="droptest")
    assert not lock.acquire()  # connected; the key is busy
    session = lock.session_id()
    end_session(session)
    assert other.release()

    with caplog.at_level(logging.WARNING, logger="coordination.locks"):
        assert lock.acquire() is False
    assert not lock.acquired and not lock.still_held()
    [message] = lock_log(caplog)
    assert message.startswith(f"[droptest] could not take advisory lock key {lock.key_text}: ")
    assert message.endswith("; not leader")

    assert lock.acquire()  # the next attempt opens a new connection
    assert lock.session_id() != session


def test_connection_dropped_while_waiting_in_acquire(locks, key, caplog):
    assert locks(key).acquire()
    lock = locks(key, label="waittest")
    assert not lock.acquire()
    session = lock.session_id()
    result = {}

    def wait_for_it():
        started = time.monotonic()
        result["acquired"] = lock.acquire(wait=30)
        result["waited"] = time.monotonic() - started

    caplog.set_level(logging.WARNING, logger="coordination.locks")
    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    try:
        wait_until(lambda: is_waiting(lock), timeout=10, message="acquire(wait) is not waiting")
        end_session(session)
        waiter.join(20)
        assert result.get("acquired") is False, result
        assert result["waited"] < 20
    finally:
        waiter.join(30)
    assert not lock.acquired and not lock.still_held()
    assert any(
        m.startswith(f"[waittest] could not take advisory lock key {lock.key_text}")
        for m in lock_log(caplog)
    )


def test_raise_errors_reraises_a_dropped_connection(locks, key, caplog):
    lock = locks(key, label="raising", raise_errors=True)
    assert lock.acquire()
    assert lock.release()
    end_session(lock.session_id())
    with pytest.raises(driver_error()):
        lock.acquire()
    assert not lock.acquired
    assert lock_log(caplog)  # still logged


def test_database_down_means_not_acquired(key, caplog):
    with temporary_alias("lock_down", HOST="127.0.0.1", PORT=free_port()):
        lock = make_lock(key, using="lock_down", label="downtest")
        try:
            with caplog.at_level(logging.WARNING, logger="coordination.locks"):
                assert lock.acquire() is False
                assert lock.acquire(wait=0.2) is False
            assert not lock.acquired and not lock.still_held()
            messages = lock_log(caplog)
            assert len(messages) == 2
            assert all(
                m.startswith(f"[downtest] could not take advisory lock key {lock.key_text}: ")
                and m.endswith("; not leader")
                for m in messages
            )
            with pytest.raises(driver_error()):
                make_lock(key, using="lock_down", raise_errors=True).acquire()
        finally:
            lock.close()


def test_list_holders_includes_a_holder_in_another_process(holders, key):
    (holder,) = holders.start(key, acquire=True)
    session = int(holder.wait_ready().split()[1])
    key_value = make_lock(key).key
    found = [h for h in list_holders(keys=[key_value]) if h.key == key_value]
    assert [(h.pid, h.client_addr) for h in found] == [(session, "127.0.0.1")]
    holder.release()
    assert not [h for h in list_holders(keys=[key_value]) if h.key == key_value]
