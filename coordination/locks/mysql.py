"""MySQL / MariaDB: ``GET_LOCK`` / ``RELEASE_LOCK`` on a dedicated connection.

User-level lock names are global to the server, so the name carries the database name; MySQL
caps them at 64 characters. A follower waits in ``GET_LOCK(name, timeout)``, blocked in the
server, so it gets a freed lock the moment its holder releases it or its session ends; shutdown
ends that wait with ``KILL QUERY`` from a connection of its own. The server notices a waiting
follower's client gone only at its once-a-second check (``CLIENT_CHECK_INTERVAL``). In a
scheduler process the lock connection records its id (``coordination.nodesessions``) so a
fencer can find it, as ``application_name`` does on PostgreSQL.
"""

import hashlib
import logging
import time

from django.db import connections

from coordination import nodesessions
from coordination.conf import settings
from coordination.keys import format_key, normalize_key
from coordination.locks.base import LeaderLock, LockHolder

logger = logging.getLogger(__name__)

MAX_NAME_LENGTH = 64
#: How often (seconds) the server looks whether a session waiting in ``GET_LOCK`` still has
#: its client: MariaDB and MySQL wake a waiting user lock once a second for that (not a
#: setting), and a waiting session reads nothing from its socket otherwise. So a follower
#: killed while it waits leaves its lock session on the server for up to this long.
CLIENT_CHECK_INTERVAL = 1.0
ER_NO_SUCH_THREAD = 1094
ER_QUERY_INTERRUPTED = 1317
_KILL_WAIT = 5.0


def lock_name(database: str, key: int) -> str:
    """Return ``<database>:lock:<16 hex digits>``, at most 64 characters.

    A database name too long to fit is cut and followed by a hash of the whole name, so two
    long names that share their first characters still get different locks.
    """
    suffix = f":lock:{key & 0xFFFFFFFFFFFFFFFF:016x}"
    room = MAX_NAME_LENGTH - len(suffix)
    if len(database) > room:
        digest = hashlib.sha256(database.encode("utf-8")).hexdigest()[:8]
        database = f"{database[: room - len(digest) - 1]}~{digest}"
    return f"{database}{suffix}"


class MySQLLeaderLock(LeaderLock):
    vendor = "mysql"
    can_end_holders = True
    _thread_id: int | None = None
    _listening = False

    @property
    def lock_name(self) -> str:
        return lock_name(connections[self.using].settings_dict["NAME"], self.key)

    def _cursor(self):
        if self._conn is None:
            conn = self._new_raw_connection(
                {"connect_timeout": max(2, int(float(settings.LEASE) / 2))}
            )
            conn.autocommit(True)
            try:
                nodesessions.record_raw(conn, role="lock")
            except Exception:
                conn.close()
                raise
            self._conn = conn
            self._listening = False
            # Read once: MySQLdb refuses a connection used by two threads at once, and
            # session_id() is asked from other threads while an acquire waits.
            self._thread_id = conn.thread_id()
        return self._conn.cursor()

    def _scalar(self, sql: str, params=()):
        with self._cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()[0]

    def _scalar_past_cancel(self, sql: str, params=()):
        """Run a check or release that shutdown's ``KILL QUERY`` may have hit just now.

        The ``KILL QUERY`` meant for a lock wait can land on the statement after it, when the
        wait ended on its own meanwhile; after a cancel, an interrupted statement is asked
        again rather than taken as a lost lock.
        """
        try:
            return self._scalar(sql, params)
        except Exception as exc:
            interrupted = nodesessions.error_code(exc) == ER_QUERY_INTERRUPTED
            if not (self._cancelled.is_set() and interrupted):
                raise
            return self._scalar(sql, params)

    def session_id(self) -> int | None:
        return self._thread_id if self._conn is not None else None

    def _acquire(self, wait: float) -> bool:
        return self._scalar("SELECT GET_LOCK(%s, %s)", (self.lock_name, wait)) == 1

    def _interrupt_wait(self) -> None:
        """End a waiting ``GET_LOCK`` with ``KILL QUERY`` from a connection of its own."""
        thread_id = self._thread_id
        if thread_id is None:
            return
        conn = self._new_raw_connection({"connect_timeout": 2})
        try:
            conn.cursor().execute(f"KILL QUERY {int(thread_id)}")
        finally:
            conn.close()

    def _still_held(self) -> bool:
        return (
            self._scalar_past_cancel("SELECT IS_USED_LOCK(%s) = CONNECTION_ID()", (self.lock_name,))
            == 1
        )

    def _release(self) -> bool:
        return self._scalar_past_cancel("SELECT RELEASE_LOCK(%s)", (self.lock_name,)) == 1

    def wait_for_wakeup(self, timeout: float, waker) -> None:
        """Sleep in ``poll()`` on the lock connection's socket and the loop's waker.

        The server writes nothing on an idle connection unless it ends the session (``KILL``
        by a fencer or an operator, a shutdown): then the socket turns readable and a check
        finds the lock gone at once, instead of at the next tick. A reply to another thread's
        ``still_held()`` can wake it too; the check then finds the lock held and it sleeps on.
        """
        with self._mutex:
            conn = self._conn
            try:
                fileno = conn.fileno() if conn is not None else None
            except Exception:
                return  # closed by another thread just now; the loop sees it is not held
        if fileno is None:
            waker.wait(timeout)
            return
        deadline = time.monotonic() + timeout
        while not waker.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or conn is not self._conn:
                return
            if waker.wait_with(fileno, remaining) and not self.still_held():
                return

    @property
    def listening(self) -> bool:
        """Wake-ups reach the leader without polling: its heartbeat reads the wake-up counters.

        ``coordination.services.notify_group`` bumps the group's counter; the heartbeat's
        single statement reads them all, so the leader may sleep until its next due instant.
        """
        return self._conn is not None and self._listening

    def listen(self, channel: str) -> None:
        if self._conn is not None:
            self._listening = True

    @classmethod
    def list_holders(cls, *, using: str, keys=()) -> list[LockHolder]:
        """Report the holders of ``keys`` (MySQL has no catalogue of user locks by default).

        One statement for all keys. A holder that a scheduler process recorded as its lock
        connection (``coordination.nodesessions``, same id and client address) is named with
        its node and instance. ``since`` is unknown: the server does not record when a user
        lock was taken.
        """
        keys = [normalize_key(key) for key in keys]
        if not keys:
            return []
        database = connections[using].settings_dict["NAME"]
        wanted = " UNION ALL ".join(["SELECT %s AS k, IS_USED_LOCK(%s) AS id"] * len(keys))
        params = [value for key in keys for value in (key, lock_name(database, key))]
        with connections[using].cursor() as cursor:
            cursor.execute(
                "SELECT h.k, p.ID, p.HOST, s.node, s.instance"
                f" FROM ({wanted}) AS h JOIN information_schema.PROCESSLIST p ON p.ID = h.id"
                " LEFT JOIN coordination_nodesession s ON s.connection_id = p.ID"
                " AND s.client = COALESCE(p.HOST, '') AND s.role = 'lock'",
                params,
            )
            rows = cursor.fetchall()
        return [
            LockHolder(
                key=int(key),
                pid=pid,
                application_name=None,
                client_addr=(host or "").rsplit(":", 1)[0] or None,
                since=None,
                node=node,
                instance=instance,
            )
            for key, pid, host, node, instance in rows
        ]

    @classmethod
    def terminate_holder(cls, key_or_name, *, pid: int | None, using: str) -> int | None:
        key = normalize_key(key_or_name)
        name = lock_name(connections[using].settings_dict["NAME"], key)
        with connections[using].cursor() as cursor:
            cursor.execute("SELECT IS_USED_LOCK(%s), CONNECTION_ID()", (name,))
            holder, own = cursor.fetchone()
            if holder is None or holder == own or (pid is not None and pid != holder):
                return None
            try:
                cursor.execute(f"KILL CONNECTION {int(holder)}")
            except Exception as exc:
                if nodesessions.error_code(exc) == ER_NO_SUCH_THREAD:
                    return None  # it went away on its own, lock and all
                raise
            # KILL only flags the session; wait (bounded) until its locks are gone, as
            # pg_terminate_backend(pid, timeout) does on PostgreSQL.
            deadline = time.monotonic() + _KILL_WAIT
            while True:
                cursor.execute("SELECT IS_USED_LOCK(%s)", (name,))
                if cursor.fetchone()[0] != holder:
                    break
                if time.monotonic() > deadline:
                    logger.warning(
                        "killed session %s holding lock key %s, but it still held it after %ss",
                        holder,
                        format_key(key),
                        _KILL_WAIT,
                    )
                    break
                time.sleep(0.02)
        return holder
