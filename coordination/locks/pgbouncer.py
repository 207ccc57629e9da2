"""PostgreSQL behind PgBouncer in transaction pooling mode: leases guarded by xact locks.

A session advisory lock is unsafe when a pooler hands each transaction to whichever server
connection is free: the lock would stay on a server session the holder no longer owns. In this
mode leadership is a lease row (``coordination_locklease``) that is only ever claimed, renewed
or released inside a transaction holding ``pg_try_advisory_xact_lock(key)``, which PostgreSQL
releases at commit on whatever server connection ran it. The holder renews the lease while it
leads; a crashed or frozen holder's lease runs out after ``INSTATIC_LEASE`` seconds, and the
run ledger and conditional updates keep the work exactly-once regardless.

A transactional run's commit is fenced inside its own transaction
(:meth:`PgBouncerLeaderLock.fence_work_transaction`): it holds the lease row ``FOR KEY SHARE``
until it commits, which a takeover's claim (``FOR UPDATE NOWAIT`` first) cannot get past.

Compared with session mode: takeover after a crash waits for the lease instead of being
immediate, and ``LISTEN`` does not work through the pooler, so leaders poll every
``INSTATIC_MAX_TICK`` seconds.
"""

import logging
import time
import uuid

import psycopg
from django.db import connections

from coordination.conf import settings
from coordination.locks.base import LeaderLock, LockHolder
from coordination.locks.postgresql import connection_options

logger = logging.getLogger(__name__)

_CLAIM_SQL = """
INSERT INTO coordination_locklease (key, holder, token, acquired_at, expires_at)
VALUES (%(key)s, %(holder)s, %(token)s, now(), now() + %(lease)s * interval '1 second')
ON CONFLICT (key) DO UPDATE
SET holder = EXCLUDED.holder, token = EXCLUDED.token,
    acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
WHERE coordination_locklease.expires_at < now()
   OR coordination_locklease.token = EXCLUDED.token
RETURNING token
"""
# The fence of a work transaction: lock the lease row if it is still this holder's, and have
# the server end the transaction once it has sat idle for as long as the lease has left. A CTE,
# so the timeout is computed from the row as locked.
_FENCE_SQL = """
WITH lease AS (
    SELECT expires_at FROM coordination_locklease
    WHERE key = %s AND token = %s AND expires_at > statement_timestamp()
    FOR KEY SHARE
)
SELECT set_config(
    'idle_in_transaction_session_timeout',
    GREATEST(1, CEIL(EXTRACT(EPOCH FROM expires_at - statement_timestamp()) * 1000))::bigint::text,
    true
)
FROM lease
"""
_POLL = 0.25


class PgBouncerLeaderLock(LeaderLock):
    vendor = "postgresql"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.token = uuid.uuid4().hex
        self._renewed = 0.0

    @property
    def lease(self) -> float:
        return float(settings.LEASE)

    def _connection(self):
        if self._conn is None:
            name = f"{(self.node_name or 'instatic')[:58]}/lock"
            conn = self._new_raw_connection(connection_options(name))
            conn.autocommit = True
            self._conn = conn
        return self._conn

    def _try_claim(self) -> bool:
        conn = self._connection()
        free = conn.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM coordination_locklease WHERE key = %s"
            " AND expires_at >= now() AND token <> %s)",
            (self.key, self.token),
        ).fetchone()[0]
        if not free:
            return False
        try:
            with conn.transaction():
                taken = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (self.key,))
                if not taken.fetchone()[0]:
                    return False
                # A takeover waits for the work transactions the old holder has fenced
                # (fence_work_transaction): they hold the row FOR KEY SHARE until they end.
                conn.execute(
                    "SELECT 1 FROM coordination_locklease WHERE key = %s FOR UPDATE NOWAIT",
                    (self.key,),
                )
                row = conn.execute(
                    _CLAIM_SQL,
                    {
                        "key": self.key,
                        "holder": self.node_name,
                        "token": self.token,
                        "lease": self.lease,
                    },
                ).fetchone()
        except psycopg.errors.LockNotAvailable:
            return False
        if row:
            self._renewed = time.monotonic()
        return bool(row)

    def _acquire(self, wait: float) -> bool:
        deadline = time.monotonic() + wait
        while True:
            if self._try_claim():
                return True
            if time.monotonic() + _POLL > deadline or self._pause(_POLL):
                return False

    def _still_held(self) -> bool:
        """Confirm and renew the lease in one statement."""
        row = self._conn.execute(
            "UPDATE coordination_locklease SET expires_at = now() + %s * interval '1 second'"
            " WHERE key = %s AND token = %s AND expires_at >= now() RETURNING 1",
            (self.lease, self.key, self.token),
        ).fetchone()
        if row:
            self._renewed = time.monotonic()
        return bool(row)

    def keep_alive(self) -> bool:
        """Renew the lease when a third of it has passed; return whether it is still ours."""
        if not self.acquired:
            return False
        if time.monotonic() - self._renewed < self.lease / 3:
            return True
        return self.still_held()

    def fence_work_transaction(self, connection) -> bool:
        """Make the lease check part of the work transaction on ``connection``.

        Lock the lease row ``FOR KEY SHARE`` if it is still this holder's and unexpired, else
        return False (the run rolls back). The lock lets this holder's own renewals through
        (they change no key) but not a takeover, whose claim locks the row ``FOR UPDATE``
        first: from here until this transaction ends no other node can take the lease, so a
        commit after a successful fence is a commit under the lease, whenever it happens.
        A follower cannot count on ending a pooled session, so the transaction itself bounds how
        long a frozen holder keeps the row: it sets ``idle_in_transaction_session_timeout``
        (local to the transaction) to what the lease has left, and the server ends the
        transaction of a holder that stops talking to it by the time its lease would end.
        """
        if not self.acquired:
            return False
        with connection.cursor() as cursor:
            cursor.execute(_FENCE_SQL, (self.key, self.token))
            fenced = cursor.fetchone() is not None
        if not fenced:
            with self._mutex:
                if self.acquired:
                    logger.error(
                        "[%s] lost advisory lock key %s: the lease is no longer ours at commit",
                        self.label,
                        self.key_text,
                    )
                    self.acquired = False
        return fenced

    def _release(self) -> bool:
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (self.key,))
            cursor = self._conn.execute(
                "DELETE FROM coordination_locklease WHERE key = %s AND token = %s",
                (self.key, self.token),
            )
        return cursor.rowcount == 1

    @classmethod
    def list_holders(cls, *, using: str, keys=()) -> list[LockHolder]:
        with connections[using].cursor() as cursor:
            cursor.execute(
                "SELECT key, holder, acquired_at FROM coordination_locklease"
                " WHERE expires_at >= now()"
            )
            rows = cursor.fetchall()
        return [
            LockHolder(
                key=key,
                pid=None,
                application_name=holder,
                client_addr=None,
                since=since,
                node=holder or None,
            )
            for key, holder, since in rows
        ]

    @classmethod
    def terminate_holder(cls, key_or_name, *, pid: int | None, using: str) -> int | None:
        """Leases end by themselves after ``INSTATIC_LEASE``; there is no session to end."""
        return None
