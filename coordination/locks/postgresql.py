"""PostgreSQL: session advisory locks on a dedicated connection named after the node.

``pg_try_advisory_lock`` (or ``pg_advisory_lock`` bounded by ``lock_timeout`` when waiting) on
a connection opened only for the lock, so nothing Django or job code does to its own
connections can release or leak it. The session's ``application_name`` is the node name, so
the holder shows up in ``pg_stat_activity``; TCP keepalives and ``tcp_user_timeout`` make a
partitioned holder's session die within the lease. The server checks a waiting session's
client every ``CLIENT_CHECK_INTERVAL_MS`` (PostgreSQL 14+), so a killed follower's lock wait
ends with its process, not when the wait times out.
"""

import logging
import time

import psycopg
from django.db import connections

from coordination.conf import settings
from coordination.keys import format_key, join_key, normalize_key, split_key
from coordination.locks.base import LeaderLock, LockHolder

logger = logging.getLogger(__name__)

_HOLDERS_SQL = """
SELECT l.classid::bigint, l.objid::bigint, a.pid, a.application_name,
       host(a.client_addr), a.backend_start
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
# One statement, so the session we end is the one pg_locks shows holding the key right then
# (with a pid: that session, and only if it holds the key). The two-argument
# pg_terminate_backend waits until the backend is gone, so the lock is free on return.
_TERMINATE_SQL = (
    "SELECT h.pid, pg_terminate_backend(h.pid, 5000) FROM ("
    + _HOLDERS_SQL
    + " AND l.classid::bigint = %s AND l.objid::bigint = %s"
    " AND (%s::integer IS NULL OR a.pid = %s::integer) AND a.pid <> pg_backend_pid()"
    " ORDER BY a.pid LIMIT 1) AS h"
)


#: How often the server checks that a lock session's client is still connected while a query
#: runs (``client_connection_check_interval``): a follower waits in ``pg_advisory_lock``, and a
#: backend waiting for a lock does not read its socket, so without the check a SIGKILLed
#: follower's lock session stays on the server until its ``lock_timeout`` (``LOCK_WAIT``).
#: Well within ``liveness.VANISH_WAIT``, how long a new leader waits for a killed node's
#: sessions to end. A client cut off by a partition closes nothing and is not noticed.
CLIENT_CHECK_INTERVAL_MS = 100


def connection_options(application_name: str) -> dict:
    """Return libpq options for a scheduler-owned connection: its name and liveness probes."""
    lease = float(settings.LEASE)
    return {
        "application_name": application_name[:63],
        "keepalives": 1,
        "keepalives_idle": max(1, int(lease / 5)),
        "keepalives_interval": max(1, int(lease / 10)),
        "keepalives_count": 3,
        "tcp_user_timeout": int(lease * 1000 / 2),
        "connect_timeout": max(2, int(lease / 2)),
    }


def _mark_notifications(conn, waker, timeout: float = 0) -> bool:
    """Read this session's ``NOTIFY``s; if any, mark them on the leader's waker (``notify()``).

    Every path a notification reaches the leader by goes through here: the sleep's own
    reads, and any other query on the lock session (a job thread's ``still_held()``), since
    psycopg keeps a notification that arrives during a query in a backlog and the socket the
    sleep polls then stays quiet. Marked, it makes a full tick, never taken for a finished
    run. ``timeout=0`` only looks at what was received (no round trip).
    """
    if not any(True for _ in conn.notifies(timeout=timeout)):
        return False
    waker.notify()
    return True


def lock_application_name(node_name: str) -> str:
    """Return the ``application_name`` of a node's lock sessions (within 63 bytes)."""
    return f"{(node_name or 'instatic')[:58]}/lock"


class PostgresLeaderLock(LeaderLock):
    vendor = "postgresql"
    can_end_holders = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lock_timeout_ms: int | None = None
        self._listening: set[str] = set()
        #: What the leader sleeps on (the loop's waker), for a NOTIFY another query reads.
        self._waker = None

    def _connection(self):
        if self._conn is None:
            conn = self._new_raw_connection(
                connection_options(lock_application_name(self.node_name))
            )
            conn.autocommit = True
            # Django binds parameters on the client and never prepares; this connection runs
            # the same few statements for the process's life, so bind on the server and let
            # psycopg prepare them: an acquire or release is then one cheap round trip.
            conn.cursor_factory = psycopg.Cursor
            conn.prepare_threshold = 2
            if conn.info.server_version >= 140000:
                conn.execute(f"SET client_connection_check_interval = {CLIENT_CHECK_INTERVAL_MS}")
            self._conn = conn
            self._lock_timeout_ms = None
            self._listening = set()
        return self._conn

    def _acquire(self, wait: float) -> bool:
        conn = self._connection()
        if wait <= 0:
            return conn.execute("SELECT pg_try_advisory_lock(%s::bigint)", (self.key,)).fetchone()[
                0
            ]
        timeout_ms = max(1, int(wait * 1000))
        if timeout_ms != self._lock_timeout_ms:
            conn.execute(f"SET lock_timeout = {timeout_ms}")
            self._lock_timeout_ms = timeout_ms
        try:
            conn.execute("SELECT pg_advisory_lock(%s::bigint)", (self.key,))
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled):
            return False
        return True

    def _still_held(self) -> bool:
        classid, objid = split_key(self.key)
        query = (
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
            " AND pid = pg_backend_pid() AND granted AND objsubid = 1"
            " AND classid::bigint = %s AND objid::bigint = %s)"
        )
        try:
            held = self._conn.execute(query, (classid, objid)).fetchone()[0]
        except psycopg.errors.QueryCanceled:
            if not self._cancelled.is_set():
                raise
            # Shutdown's cancel of a lock wait arrived just as this check ran: ask again.
            held = self._conn.execute(query, (classid, objid)).fetchone()[0]
        if self._waker is not None:
            _mark_notifications(self._conn, self._waker)
        return held

    def _release(self) -> bool:
        return self._conn.execute("SELECT pg_advisory_unlock(%s::bigint)", (self.key,)).fetchone()[
            0
        ]

    def session_id(self) -> int | None:
        return self._conn.info.backend_pid if self._conn is not None else None

    def _interrupt_wait(self) -> None:
        conn = self._conn
        if conn is not None:
            conn.cancel_safe(timeout=2.0)

    @property
    def listening(self) -> bool:
        return self._conn is not None and bool(self._listening)

    def listen(self, channel: str) -> None:
        if self._conn is None or channel in self._listening:
            return
        self._conn.execute(f'LISTEN "{channel}"')
        self._listening.add(channel)

    def wait_for_wakeup(self, timeout: float, waker) -> None:
        """Sleep in ``poll()`` on the lock connection's socket and the loop's waker.

        A ``NOTIFY`` on a channel we listen to, the session's death, or the waker ends the
        sleep at once. The connection is not held while waiting, so other threads can run
        ``still_held()`` on it meanwhile; if one of them finds it broken and closes it, this
        wait ends and leaves any newer connection alone.
        """
        with self._mutex:
            self._waker = waker
            conn = self._conn
            if conn is None or not self._listening:
                conn = None
            else:
                try:
                    fileno = conn.fileno()
                except psycopg.Error:
                    return  # closed by another thread just now; the loop sees it is not held
        if conn is None:
            waker.wait(timeout)
            return
        deadline = time.monotonic() + timeout
        try:
            while not waker.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or conn is not self._conn:
                    return
                # What this thread's own last query read (the tick's) is in the backlog.
                if _mark_notifications(conn, waker):
                    return
                # Drain what arrived: notifications end the sleep, EOF raises.
                if waker.wait_with(fileno, remaining) and _mark_notifications(
                    conn, waker, timeout=0.01
                ):
                    return
        except psycopg.Error as exc:
            with self._mutex:
                if conn is not self._conn:
                    return
                logger.error(
                    "[%s] lost advisory lock key %s: connection closed (%s)",
                    self.label,
                    self.key_text,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                )
                self._discard()

    @classmethod
    def list_holders(cls, *, using: str, keys=()) -> list[LockHolder]:
        with connections[using].cursor() as cursor:
            cursor.execute(_HOLDERS_SQL)
            rows = cursor.fetchall()
        return [
            LockHolder(
                key=join_key(classid, objid),
                pid=pid,
                application_name=app,
                client_addr=addr,
                since=since,
                # A scheduler's lock session is named <node>/lock (the name cut to 58).
                node=app.removesuffix("/lock") if app and app.endswith("/lock") else None,
            )
            for classid, objid, pid, app, addr, since in rows
        ]

    @classmethod
    def terminate_holder(cls, key_or_name, *, pid: int | None, using: str) -> int | None:
        classid, objid = split_key(normalize_key(key_or_name))
        with connections[using].cursor() as cursor:
            cursor.execute(_TERMINATE_SQL, (classid, objid, pid, pid))
            row = cursor.fetchone()
        if row is None:
            return None
        victim, gone = row
        if not gone:
            logger.warning(
                "terminated session %s holding advisory lock key %s, but it had not exited "
                "after 5s",
                victim,
                format_key(join_key(classid, objid)),
            )
        return victim
