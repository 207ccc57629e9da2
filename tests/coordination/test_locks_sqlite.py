"""The leader lock on SQLite: a ``flock`` on a file beside the database file.

Two processes on one SQLite file exclude each other and a killed holder frees the lock (the
shared tests in ``test_locks.py`` run here too); this file covers the lock file itself.
"""

import json
import logging
import os
from pathlib import Path

import pytest
from django.db import connection

from coordination.locks import list_holders, make_lock, terminate_holder
from coordination.locks.sqlite import database_path, lock_file_path
from tests.coordination.lockholder import temporary_alias
from tests.support.polling import wait_until

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def key(request) -> str:
    return f"test:{request.node.name}"


def held_keys(key_value: int):
    return [h for h in list_holders() if h.key == key_value]


def test_list_holders_shows_the_holder_pid_from_the_lock_file(holders, key):
    (holder,) = holders.start(key, acquire=True, nodes=["sqlite-node"])
    assert holder.wait_ready() == f"ACQUIRED {holder.pid}"
    key_value = make_lock(key).key
    [found] = held_keys(key_value)
    assert (found.key, found.pid, found.application_name) == (key_value, holder.pid, "sqlite-node")
    assert found.client_addr is None and found.since is not None

    assert holder.release()
    assert held_keys(key_value) == []
    assert holder.acquire() == holder.pid
    holder.kill()
    assert held_keys(key_value) == []  # the lock file still names it, but nobody holds it


def test_the_lock_file_is_beside_the_database_file(locks, key):
    lock = locks(key, node_name="here")
    assert lock.acquire()
    db_file = Path(connection.settings_dict["NAME"]).resolve()
    assert database_path("default") == db_file
    path = lock_file_path(db_file, lock.key)
    assert path.parent == db_file.parent
    assert path.name == f"{db_file.name}.lock-{lock.key & 0xFFFFFFFFFFFFFFFF:016x}"
    record = json.loads(path.read_text())
    assert (record["pid"], record["node"], record["key"]) == (os.getpid(), "here", lock.key)
    assert lock.session_id() == os.getpid()
    assert lock.release()
    assert path.read_text() == ""  # no stale holder left in the file


def test_two_handles_in_one_process_exclude_each_other(locks, key):
    first, second = locks(key), locks(key)
    assert first.acquire()
    assert not second.acquire()
    assert first.release()
    assert second.acquire()


def test_terminate_holder_has_no_session_to_end(holders, key):
    (holder,) = holders.start(key, acquire=True)
    assert terminate_holder(key, pid=holder.pid) is None
    assert terminate_holder(key) is None
    assert holder.held()


def test_a_replaced_lock_file_means_the_lock_is_lost(locks, key, caplog):
    lock = locks(key, label="replaced")
    assert lock.acquire()
    open_files = len(os.listdir("/proc/self/fd"))
    path = lock_file_path(database_path("default"), lock.key)
    path.unlink()
    with caplog.at_level(logging.ERROR, logger="coordination.locks"):
        assert lock.still_held() is False
    assert [r.getMessage() for r in caplog.records] == [
        f"[replaced] lost advisory lock key {lock.key_text}"
    ]
    assert lock.acquire()  # on the new file, and without keeping the old descriptor
    assert len(os.listdir("/proc/self/fd")) == open_files
    assert not locks(key).acquire()


def test_an_in_memory_database_gets_a_process_local_lock(key):
    with temporary_alias("memory", NAME=":memory:"):
        first = make_lock(key, using="memory")
        second = make_lock(key, using="memory")
        try:
            assert first.acquire()
            assert not second.acquire()
            assert first.still_held()
            assert list_holders(using="memory") == []
            first.close()
            assert second.acquire()
        finally:
            first.close()
            second.close()


def test_an_unusable_lock_file_means_not_acquired(key, caplog, tmp_path):
    missing = tmp_path / "no-such-folder" / "db.sqlite3"
    with temporary_alias("nowhere", NAME=str(missing)):
        lock = make_lock(key, using="nowhere", label="nowhere")
        with caplog.at_level(logging.WARNING, logger="coordination.locks"):
            assert lock.acquire() is False
        assert not lock.acquired and not lock.still_held()
        [message] = [r.getMessage() for r in caplog.records]
        assert message.startswith(f"[nowhere] could not take advisory lock key {lock.key_text}: ")
        assert message.endswith("; not leader")
        with pytest.raises(FileNotFoundError):
            make_lock(key, using="nowhere", raise_errors=True).acquire()


def test_the_holder_pid_is_listed_until_the_holder_dies(holders, key):
    first, second = holders.start(key, key)
    assert first.acquire() == first.pid
    assert second.acquire() is None
    key_value = make_lock(key).key
    assert [h.pid for h in held_keys(key_value)] == [first.pid]
    first.kill()
    assert wait_until(lambda: second.acquire(), timeout=1.0) == second.pid
    assert [h.pid for h in held_keys(key_value)] == [second.pid]
