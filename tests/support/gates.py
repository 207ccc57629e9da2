"""A gate that stops a scheduler's transaction at one write, held by the test (PostgreSQL).

A trigger the gate installs makes the write take a shared advisory lock; while the gate holds
that lock exclusively the write waits, so the test sees the writer's session waiting, can stop
the process, and then open the gate: the write finishes on the server and the session sits
idle in its open transaction, which the frozen client will never commit.

The gate installs its trigger and holds its lock on a connection of its own (autocommit), not
on Django's: nothing the test does with Django's connection (a transaction left open, a
connection closed or handed out anew) can leave the trigger unseen by the scheduler or take
the lock away from the gate.
"""

import psycopg

from devtools import commit_gate
from tests.support.polling import wait_until
from tests.support.processes import database_url


class AdvisoryGate:
    """A gate on advisory lock ``key``, installed by ``install`` and removed by ``drop``
    (statements); closed on creation."""

    def __init__(self, key: int, *, install: list[str], drop: list[str]):
        self.key = key
        self._drop = drop
        self.conn = psycopg.connect(database_url(), autocommit=True, application_name="test-gate")
        try:
            for statement in install:
                self.conn.execute(statement)
            self.conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        except BaseException:
            self.close()
            raise

    def waiting(self, node: str | None = None) -> int | None:
        """The session of a write waiting at the gate, if any; with ``node``, only a session
        of that node's (named after it: a scheduler connected directly), so that another
        process's write meeting the gate is never taken for the one the test stops."""
        if node is None:
            row = self.conn.execute(commit_gate.WAITING_SQL, (self.key,)).fetchone()
        else:
            pattern = node.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
            row = self.conn.execute(commit_gate.WAITING_OF_SQL, (self.key, pattern)).fetchone()
        return row[0] if row else None

    def open(self) -> None:
        """Let the waiting write through (the gate held its lock until now)."""
        released = self.conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,)).fetchone()[0]
        assert released, f"the gate on lock {self.key} was open already"

    def passed(self, pid: int) -> bool:
        """Whether the session ``pid``, let through, has finished its write, uncommitted."""
        row = self.conn.execute(commit_gate.STATE_SQL, (pid,)).fetchone()
        return commit_gate.write_finished_uncommitted(row[0] if row else None)

    def wait_passed(self, pid: int, log: str = "", timeout: float = 10) -> None:
        """Wait until the frozen session ``pid``'s write has finished on the server,
        uncommitted; fail with what the session is doing and who holds it up."""
        if not wait_until(lambda: self.passed(pid), timeout=timeout, fail=False):
            raise AssertionError(f"{self.describe(pid)}\n{log}")

    def describe(self, pid: int) -> str:
        """What the session ``pid`` is doing and who holds it up, for a failure's message."""
        row = self.conn.execute(
            "SELECT application_name, state, wait_event_type, wait_event,"
            " pg_blocking_pids(pid), query FROM pg_stat_activity WHERE pid = %s",
            (pid,),
        ).fetchone()
        holders = self.conn.execute(
            "SELECT pid, granted, mode FROM pg_locks WHERE locktype = 'advisory'"
            " AND classid = 0 AND objid = %s AND objsubid = 1",
            (self.key,),
        ).fetchall()
        return (
            f"session {pid}: {row}; the gate's session {self.conn.info.backend_pid};"
            f" on lock {self.key}: {holders}"
        )

    def close(self) -> None:
        """Open the gate if it is shut, remove its trigger and close its connection."""
        with self.conn:
            self.conn.execute("SELECT pg_advisory_unlock_all()")
            for statement in self._drop:
                self.conn.execute(statement)
