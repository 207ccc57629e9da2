"""A node's database sessions: ending a frozen node's work sessions, and telling from the
server's sessions that a killed node's process is gone.
"""

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection

from coordination import nodesessions
from coordination.conf import settings
from coordination.liveness.nodes import _lease
from coordination.liveness.pulse import _mysql_datetime
from coordination.liveness.views import LeaderView
from coordination.locks.mysql import CLIENT_CHECK_INTERVAL
from coordination.locks.postgresql import lock_application_name

logger = logging.getLogger(__name__)


def terminate_node_work_sessions(leader: LeaderView) -> int:
    """End a frozen leader's own work sessions so none of its transactions can commit."""
    return terminate_work_sessions(leader.node, leader.instance)


def terminate_work_sessions(node: str, instance: str) -> int:
    """End the work sessions of ``node``'s process ``instance``; return how many ended.

    PostgreSQL finds them by ``application_name``; MySQL by the connection ids the process
    recorded. SQLite has no sessions to end.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = %s"
                " AND pid <> pg_backend_pid()",
                (work_application_name(node),),
            )
            return cursor.fetchone()[0]
    if connection.vendor == "mysql":
        return nodesessions.kill(instance)
    return 0


def work_application_name(node_name: str) -> str:
    return f"{node_name}/work"[:63]


def listen_application_name(node_name: str) -> str:
    """Name the session a worker process waits for work on (``LISTEN``, PostgreSQL)."""
    return f"{node_name}/listen"[:63]


#: How long a new leader waits for a killed node's last sessions to finish ending before
#: leaving its runs to the lease. The kernel closes a SIGKILLed process's sockets at once, but
#: the server ends its sessions one by one: a work session still exiting, or the lock session
#: of a group it followed, whose wait for the lock the server ends at its next check of the
#: client (PostgreSQL: ``locks.postgresql.CLIENT_CHECK_INTERVAL_MS``, well within this).
VANISH_WAIT = 0.5


#: The vendors whose check of a waiting lock session's client is slower: MySQL and MariaDB
#: look once a second (``locks.mysql.CLIENT_CHECK_INTERVAL``), so a follower killed just
#: after its ``GET_LOCK`` began waiting leaves its lock session for about a second; the wait
#: is a little longer, for a loaded server.
VANISH_WAITS = {"mysql": CLIENT_CHECK_INTERVAL + 0.25}


def vanish_wait(vendor: str) -> float:
    """Return how long (seconds) a new leader waits for a killed node's sessions to end."""
    return VANISH_WAITS.get(vendor, VANISH_WAIT)


class Vanished:
    """What the server's sessions say about a node process that still looks alive."""

    GONE = "gone"  # none of its sessions is left: the process cannot be running
    ENDING = "ending"  # some session is left, maybe still ending after a kill: look again
    UNPROVEN = "unproven"  # it may be alive: leave its runs to the lease


@dataclass(frozen=True)
class SessionEvidence:
    """A node process's sessions as the database server shows them right now."""

    server_started: datetime
    now: datetime
    last_heartbeat: datetime
    #: The server shows who opened each session (session mode; not behind a pooler).
    identified: bool
    recorded: bool  # MySQL: it recorded connections (always True on PostgreSQL)
    lock_sessions: bool
    any_sessions: bool

    def describe(self, lease: timedelta) -> str:
        """Say what the server showed, for the log line of a run left to the lease."""
        age = (self.now - self.last_heartbeat).total_seconds()
        sessions = "a lock session" if self.lock_sessions else "work sessions only"
        return (
            f"heartbeat {age:.1f}s old, lease {lease.total_seconds():g}s; "
            + (sessions if self.any_sessions else "no session")
            + ("" if self.identified else ", sessions not identified (lease mode)")
            + ("" if self.recorded else ", no recorded connection")
            + (
                ", heartbeat before the server started"
                if self.last_heartbeat <= self.server_started
                else ""
            )
        )


def vanish_verdict(evidence: SessionEvidence, lease: timedelta, *, lock_outlasted: bool) -> str:
    """Decide whether a node process whose heartbeat is still within the lease is gone.

    Only the server showing no session of the process proves it (a SIGKILL's kernel closes
    every socket at once). Not proof: sessions the server cannot attribute (a pooler in
    transaction mode, a MySQL process that recorded nothing); a heartbeat from before the
    server's start (a restart ended every session, and live processes are reconnecting); a
    heartbeat half a lease old or older (a live process cut off from the server stops
    heartbeating first: its connections' own probes, ``tcp_user_timeout`` of half the lease,
    end them no sooner, so sessions gone then may be a partition healing, not a death).

    Sessions still there may be ending after a kill: look again (``ENDING``), within
    ``vanish_wait()``. A lock session is a live node's (an ex-leader finishing its run follows)
    as often as a killed one's, so it is waited for once per heartbeat of the process:
    ``lock_outlasted`` says a lock session of it already outlasted a wait since that
    heartbeat, and then the process may be alive at once.
    """
    if not evidence.identified or not evidence.recorded:
        return Vanished.UNPROVEN
    if evidence.last_heartbeat <= evidence.server_started:
        return Vanished.UNPROVEN
    if evidence.now - evidence.last_heartbeat >= lease / 2:
        return Vanished.UNPROVEN
    if evidence.lock_sessions and lock_outlasted:
        return Vanished.UNPROVEN
    if evidence.any_sessions:
        return Vanished.ENDING
    return Vanished.GONE


class LockSessionWaits:
    """Each node process's last heartbeat after which a lock session of it outlasted a wait.

    What waiting for a live node's lock sessions costs the leader's loop: one ``vanish_wait()``
    per heartbeat of that node at most, however often maintenance asks. Kept per scheduler
    process (both groups' loops share it), for the last ``LIMIT`` processes.
    """

    LIMIT = 64

    def __init__(self):
        self._heartbeats: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def outlasted(self, instance: str, last_heartbeat: datetime) -> bool:
        with self._lock:
            return self._heartbeats.get(instance) == last_heartbeat

    def record(self, instance: str, last_heartbeat: datetime) -> None:
        with self._lock:
            self._heartbeats.pop(instance, None)
            self._heartbeats[instance] = last_heartbeat
            while len(self._heartbeats) > self.LIMIT:
                del self._heartbeats[next(iter(self._heartbeats))]


lock_session_waits = LockSessionWaits()


def vanished_instances(candidates: dict[str, tuple[str, datetime]]) -> set[str]:
    """Return those of ``candidates`` (instance -> (node name, last heartbeat)) that are gone.

    Asks the server again for up to ``vanish_wait()`` about a process some of whose sessions
    are left (the server ends a killed client's sessions one by one, and a lock wait at its
    next check of the client); about one with a lock session left only once per heartbeat
    (``LockSessionWaits``), so a live ex-leader delays the leader's maintenance by at most
    that wait per heartbeat interval. It answers as soon as a look proves one gone: a live
    worker mid-run, whose sessions stay, does not hold up the runs of a killed node beside it;
    the processes still in doubt are asked about at the next maintenance.
    """
    reader = _SESSION_READERS.get(connection.vendor)
    if reader is None or not candidates:
        return set()
    lease = _lease()
    pending = dict(candidates)
    gone: set[str] = set()
    deadline = time.monotonic() + vanish_wait(connection.vendor)
    while True:
        late = time.monotonic() >= deadline
        for instance, evidence in reader(pending).items():
            verdict = vanish_verdict(
                evidence,
                lease,
                lock_outlasted=lock_session_waits.outlasted(instance, evidence.last_heartbeat),
            )
            if verdict == Vanished.GONE:
                gone.add(instance)
            elif verdict == Vanished.UNPROVEN or late:
                if late and evidence.lock_sessions:
                    lock_session_waits.record(instance, evidence.last_heartbeat)
                logger.info(
                    "node %s may still be running its runs (%s): they wait for its lease",
                    candidates[instance][0],
                    evidence.describe(lease),
                )
            if verdict != Vanished.ENDING or late:
                del pending[instance]
        if gone or not pending:
            return gone
        time.sleep(0.02)


class SeenWithSessions:
    """The node processes a look found sessions of, most recent last (the last ``LIMIT``).

    ``gone_now`` only counts a process gone once it was seen with sessions: a process whose
    sessions are not labelled (an in-process worker, another backend's worker) has none to
    see, and must never be taken for a dead one.
    """

    LIMIT = 1024

    def __init__(self):
        self._seen: dict[str, None] = {}
        self._lock = threading.Lock()

    def saw(self, instance: str) -> None:
        with self._lock:
            self._seen.pop(instance, None)
            self._seen[instance] = None
            while len(self._seen) > self.LIMIT:
                del self._seen[next(iter(self._seen))]

    def seen(self, instance: str) -> bool:
        with self._lock:
            return instance in self._seen


seen_with_sessions = SeenWithSessions()


def gone_now(candidates: dict[str, tuple[str, datetime]]) -> set[str]:
    """Return those of ``candidates`` (instance -> (node name, last heartbeat)) that one look
    at the server's sessions proves gone (``vanish_verdict``), without waiting or logging.

    For a frequent look (the leader's watch over worker processes with runs in flight): a
    process whose sessions are still ending is asked about again at the next look, and only
    a process an earlier look saw sessions of can be gone (``SeenWithSessions``).
    """
    reader = _SESSION_READERS.get(connection.vendor)
    if reader is None or not candidates:
        return set()
    lease = _lease()
    gone = set()
    for instance, evidence in reader(candidates).items():
        if evidence.any_sessions:
            seen_with_sessions.saw(instance)
        elif (
            seen_with_sessions.seen(instance)
            and vanish_verdict(evidence, lease, lock_outlasted=False) == Vanished.GONE
        ):
            gone.add(instance)
    return gone


_SESSIONS_POSTGRESQL = """
SELECT pg_postmaster_start_time(), STATEMENT_TIMESTAMP(),
       ARRAY(SELECT application_name FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = ANY(%s))
"""


def _sessions_postgresql(candidates: dict[str, tuple[str, datetime]]) -> dict:
    # Each process's session names, its lock session's first.
    names = {
        instance: (
            lock_application_name(node),
            work_application_name(node),
            listen_application_name(node),
        )
        for instance, (node, _) in candidates.items()
    }
    with connection.cursor() as cursor:
        cursor.execute(_SESSIONS_POSTGRESQL, ([n for named in names.values() for n in named],))
        started, now, present = cursor.fetchone()
    present = set(present)
    # Behind PgBouncer in transaction mode sessions are pooled: their names say nothing.
    identified = settings.LOCK_MODE != "transaction"
    return {
        instance: SessionEvidence(
            server_started=started,
            now=now,
            last_heartbeat=candidates[instance][1],
            identified=identified,
            recorded=True,
            lock_sessions=named[0] in present,
            any_sessions=not present.isdisjoint(named),
        )
        for instance, named in names.items()
    }


def _sessions_mysql(candidates: dict[str, tuple[str, datetime]]) -> dict:
    sessions = nodesessions.live_sessions(candidates)
    with connection.cursor() as cursor:
        started, now = nodesessions.server_started_at(cursor)
    return {
        instance: SessionEvidence(
            server_started=_mysql_datetime(started),
            now=_mysql_datetime(now),
            last_heartbeat=candidates[instance][1],
            identified=True,
            recorded=recorded,
            lock_sessions=lock,
            any_sessions=anything,
        )
        for instance, (recorded, lock, anything) in sessions.items()
    }


_SESSION_READERS = {"postgresql": _sessions_postgresql, "mysql": _sessions_mysql}
