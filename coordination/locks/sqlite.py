"""SQLite: a host-level ``flock`` on a lock file beside the database file.

Two processes on one SQLite file exclude each other, and the kernel frees the lock when a
holder dies, however it dies. The lock file records the holder's pid, node and start time for
``schedulerstatus``. An in-memory database gets a process-local lock instead (and a system
check warns that replicas cannot be coordinated).
"""

import fcntl
import glob
import json
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from django.db import connections

from coordination.keys import normalize_key
from coordination.locks.base import LeaderLock, LockHolder

_PROCESS_LOCKS: dict[int, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()
_POLL = 0.05


def database_path(using: str) -> Path | None:
    """Return the SQLite file of ``using`` (the test database during tests), or ``None``."""
    name = str(connections[using].settings_dict["NAME"])
    if not name or name == ":memory:" or name.startswith("file::memory:") or "mode=memory" in name:
        return None
    return Path(name).resolve()


def lock_file_path(db_path: Path, key: int) -> Path:
    return db_path.with_name(f"{db_path.name}.lock-{key & 0xFFFFFFFFFFFFFFFF:016x}")


class SQLiteLeaderLock(LeaderLock):
    vendor = "sqlite"

    def _acquire(self, wait: float) -> bool:
        if self._conn is not None:
            # A lock found lost by still_held() (its file replaced): drop the stale descriptor.
            self._discard()
        db_path = database_path(self.using)
        if db_path is None:
            return self._acquire_in_process(wait)
        fd = os.open(lock_file_path(db_path, self.key), os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline or self._pause(_POLL):
                    os.close(fd)
                    return False
            except BaseException:
                os.close(fd)
                raise
        record = {
            "pid": os.getpid(),
            "node": self.node_name,
            "key": self.key,
            "since": datetime.now(UTC).isoformat(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        self._conn = ("file", fd, os.fstat(fd).st_ino, lock_file_path(db_path, self.key))
        return True

    def _acquire_in_process(self, wait: float) -> bool:
        with _PROCESS_LOCKS_GUARD:
            lock = _PROCESS_LOCKS.setdefault(self.key, threading.Lock())
        deadline = time.monotonic() + wait
        while not lock.acquire(timeout=min(_POLL, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline or self._cancelled.is_set():
                return False
        self._conn = ("memory", lock)
        return True

    def session_id(self) -> int | None:
        return os.getpid() if self._conn is not None else None

    def _still_held(self) -> bool:
        if self._conn is None:
            return False
        if self._conn[0] == "memory":
            return True
        _, fd, inode, path = self._conn
        # A deleted or replaced lock file would let another process lock a new inode.
        try:
            return os.stat(path).st_ino == inode
        except FileNotFoundError:
            return False

    def _release(self) -> bool:
        conn, self._conn = self._conn, None
        if conn is None:
            return False
        if conn[0] == "memory":
            conn[1].release()
            return True
        fd = conn[1]
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        return True

    def _close_connection(self, conn) -> None:
        if conn[0] == "memory":
            if conn[1].locked():
                conn[1].release()
        else:
            os.close(conn[1])

    @classmethod
    def list_holders(cls, *, using: str, keys=()) -> list[LockHolder]:
        db_path = database_path(using)
        if db_path is None:
            return []
        holders = []
        for path in sorted(db_path.parent.glob(f"{glob.escape(db_path.name)}.lock-*")):
            fd = os.open(path, os.O_RDONLY)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    continue  # nobody holds it
                except BlockingIOError:
                    pass
                try:
                    record = json.loads(os.pread(fd, 4096, 0) or b"{}")
                except ValueError:
                    record = {}
            finally:
                os.close(fd)
            try:
                key = normalize_key(int(path.name.rsplit("-", 1)[1], 16))
            except ValueError:
                continue  # not one of our lock files
            since = record.get("since")
            holders.append(
                LockHolder(
                    key=key,
                    pid=record.get("pid"),
                    application_name=record.get("node") or None,
                    client_addr=None,
                    since=datetime.fromisoformat(since) if since else None,
                )
            )
        return holders

    @classmethod
    def terminate_holder(cls, key_or_name, *, pid: int | None, using: str) -> int | None:
        """SQLite has no sessions to end: a frozen holder keeps its file lock until it dies."""
        return None
