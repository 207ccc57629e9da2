"""Node liveness: registration, the heartbeat thread, and removing a frozen lock holder.

Every scheduler process heartbeats its node row (``INSTATIC_HEARTBEAT_INTERVAL``). A group
leader whose node has not heartbeated for longer than the lease (``INSTATIC_LEASE``) is removed
by a follower: it terminates the leader's lock session (so the lock frees and a waiting
follower takes it) and the leader's work sessions (so a frozen transaction cannot block or
commit): found by ``application_name`` on PostgreSQL, by the connection ids each process
records (``coordination.nodesessions``) on MySQL/MariaDB. On PostgreSQL and MySQL one statement
both writes the heartbeat and reads the leaders (and, on MySQL, the groups' wake-up counters),
which keeps an idle replica well under a statement a second.

The leadership row is written by a node after the server granted it the lock, so it can name
someone other than the holder: a follower frozen while it waited in the server is granted a
dead leader's lock and never writes its row. So whenever a group this node follows has no live
leader by its row, the follower also asks the server who holds the group's lock and removes a
holder whose node has no live heartbeat, whatever the row says.
"""

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import DatabaseError, InterfaceError, connection, transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from coordination import alerts, leadership, nodesessions
from coordination.conf import settings
from coordination.locks import LockHolder, list_holders, terminate_holder
from coordination.locks.mysql import CLIENT_CHECK_INTERVAL
from coordination.locks.postgresql import lock_application_name
from coordination.models import Leadership, Node

logger = logging.getLogger(__name__)


class NodeNameInUse(Exception):
    """Another live process already runs under this node name."""


@dataclass(frozen=True)
class NodeIdentity:
    name: str
    instance: str
    host: str
    pid: int


@dataclass(frozen=True)
class LeaderView:
    """A leadership row with its node's liveness, as the heartbeat reads it."""

    group: str
    node: str
    instance: str
    key: int
    session_id: int | None
    node_instance: str | None
    last_heartbeat: datetime | None
    stopped_at: datetime | None

    def frozen(self, now: datetime, lease: timedelta) -> bool:
        """Return True if the leading process itself may still exist but stopped heartbeating.

        A restarted node (same name, new instance) or a stopped one has no sessions left of
        the leading process, and its new process's sessions must not be touched.
        """
        return (
            self.node_instance == self.instance
            and self.stopped_at is None
            and self.last_heartbeat is not None
            and self.last_heartbeat < now - lease
        )

    def stale(self, now: datetime, lease: timedelta) -> bool:
        return (
            self.node_instance != self.instance
            or self.stopped_at is not None
            or self.last_heartbeat is None
            or self.last_heartbeat < now - lease
        )


@dataclass(frozen=True)
class HolderView:
    """A lock's holder as the database server reports it, with its node's liveness."""

    group: str
    key: int
    pid: int | None
    node: str
    #: The holding process, where the server's records tell it (MySQL); ``None`` on
    #: PostgreSQL, where a session is named after its node only.
    instance: str | None
    node_instance: str | None
    last_heartbeat: datetime | None
    stopped_at: datetime | None

    def stale(self, now: datetime, lease: timedelta) -> bool:
        """Return True if the holding process has no live heartbeat within the lease.

        A holding process whose node row another process took over (a known instance that
        is not the row's) is not heartbeating either: a name is only taken over once its
        heartbeat is older than the lease.
        """
        return (
            (self.instance is not None and self.instance != self.node_instance)
            or self.stopped_at is not None
            or self.last_heartbeat is None
            or self.last_heartbeat < now - lease
        )

    def work_process(self) -> str | None:
        """Return the instance whose work sessions are ended with the lock session, or None.

        A known instance (MySQL) has its own recorded connections. On PostgreSQL work
        sessions are found by node name, so only while the node row is still the holder's
        own process (not stopped): a newer process of the same name must not lose its own.
        """
        if self.instance is not None:
            return self.instance
        if self.stopped_at is None:
            return self.node_instance
        return None


def followed_without_live_leader(
    followed: dict[str, int], leaders: list["LeaderView"], now: datetime, lease: timedelta
) -> dict[str, int]:
    """Return those of ``followed`` (group -> key) whose leadership row is missing or stale.

    Only for these does a follower ask the server who holds the lock: while a group's row
    names a live leader, its lock is that leader's, and an idle follower spends no statement.
    """
    rows = {leader.group: leader for leader in leaders}
    return {
        group: key
        for group, key in followed.items()
        if (row := rows.get(group)) is None or row.stale(now, lease)
    }


def holder_views(
    holders: list[LockHolder], groups: dict[str, int], nodes: list[Node]
) -> list[HolderView]:
    """Join the lock holders of ``groups`` (group -> key) to their nodes' rows.

    A holder that is not a scheduler's lock session, or whose node is unknown (or, with a
    node name cut to fit PostgreSQL's ``application_name``, ambiguous), is left out: only a
    scheduler that stopped heartbeating is ever removed.
    """
    by_key = {key: group for group, key in groups.items()}
    views = []
    for holder in holders:
        group = by_key.get(holder.key)
        if group is None or not holder.node:
            continue
        matches = [
            node
            for node in nodes
            if node.name == holder.node
            or (
                holder.application_name
                and lock_application_name(node.name) == holder.application_name
            )
        ]
        if len({node.name for node in matches}) != 1:
            continue
        node = matches[0]
        views.append(
            HolderView(
                group=group,
                key=holder.key,
                pid=holder.pid,
                node=node.name,
                instance=holder.instance,
                node_instance=node.instance,
                last_heartbeat=node.last_heartbeat,
                stopped_at=node.stopped_at,
            )
        )
    return views


def _lease() -> timedelta:
    return timedelta(seconds=float(settings.LEASE))


def register_node(
    identity: NodeIdentity,
    *,
    groups,
    declared_jobs,
    fingerprint: str,
    role: str = Node.Role.SCHEDULER,
) -> None:
    """Create or take over this node's row; refuse a name a live process still uses."""
    with transaction.atomic():
        existing = (
            Node.objects.select_for_update()
            .filter(name=identity.name)
            .annotate(db_now=Now())
            .first()
        )
        if (
            existing is not None
            and existing.instance != identity.instance
            and existing.stopped_at is None
            and existing.last_heartbeat >= existing.db_now - _lease()
        ):
            age = (existing.db_now - existing.last_heartbeat).total_seconds()
            raise NodeNameInUse(
                f"node name {identity.name!r} is in use by pid {existing.pid} on {existing.host} "
                f"(last heartbeat {age:.1f}s ago). Give each scheduler its own --node-name "
                f"(or INSTATIC_NODE_NAME), or wait {settings.LEASE}s if that process is gone."
            )
        Node.objects.update_or_create(
            name=identity.name,
            defaults={
                "instance": identity.instance,
                "host": identity.host,
                "pid": identity.pid,
                "groups": list(groups),
                "declared_jobs": sorted(declared_jobs),
                "jobs_fingerprint": fingerprint,
                "role": role,
                "started_at": Now(),
                "last_heartbeat": Now(),
                "stopped_at": None,
            },
        )
    # MySQL: the connection records of this name's earlier processes go (none of them is
    # live, or the name would have been refused); this process's own are recorded from now.
    nodesessions.forget(node=identity.name, keep=identity.instance)
    nodesessions.record_connections(identity)


def mark_stopped(identity: NodeIdentity) -> None:
    nodesessions.stop_recording()
    Node.objects.filter(name=identity.name, instance=identity.instance).update(
        stopped_at=Now(), last_heartbeat=Now()
    )
    nodesessions.forget(instance=identity.instance)


def mark_fenced(instance: str) -> None:
    """Mark another process ``instance`` stopped once its sessions were ended (a worker
    process that stopped heartbeating with work in hand), so it is fenced only once."""
    Node.objects.filter(instance=instance, stopped_at__isnull=True).update(stopped_at=Now())
    nodesessions.forget(instance=instance)


@dataclass(frozen=True)
class Pulse:
    """What one heartbeat wrote and read."""

    now: datetime | None  # the database's time (None: the row was not written)
    written: bool  # False: this node's row was missing or taken by another process
    leaders: list[LeaderView] = field(default_factory=list)
    #: Group -> wake-up counter (MySQL: bumped when work becomes due sooner).
    wakeups: dict[str, int] = field(default_factory=dict)


_PULSE_POSTGRESQL = """
WITH beat AS (
    UPDATE coordination_node SET last_heartbeat = STATEMENT_TIMESTAMP()
    WHERE name = %s AND instance = %s RETURNING 1
)
SELECT STATEMENT_TIMESTAMP(), (SELECT count(*) FROM beat),
       l."group", l.node, l.instance, l.key, l.session_id,
       n.instance, n.last_heartbeat, n.stopped_at
FROM (SELECT 1) AS one
LEFT JOIN coordination_leadership l ON TRUE
LEFT JOIN coordination_node n ON n.name = l.node
"""

# MariaDB has no UPDATE ... RETURNING, but INSERT ... SELECT ... ON DUPLICATE KEY UPDATE ...
# RETURNING is one statement: the SELECT finds this process's own row (none if it is missing
# or taken), the duplicate key turns the insert into the heartbeat's update, and RETURNING's
# scalar subqueries read the leaders and the wake-up counters in the same round trip.
_NODE_COLUMNS = ", ".join(f"`{field.column}`" for field in Node._meta.concrete_fields)
_PULSE_MYSQL = f"""
INSERT INTO coordination_node ({_NODE_COLUMNS})
SELECT {_NODE_COLUMNS} FROM coordination_node WHERE name = %s AND instance = %s
ON DUPLICATE KEY UPDATE last_heartbeat = NOW(6)
RETURNING NOW(6),
    (SELECT JSON_ARRAYAGG(JSON_ARRAY(l.`group`, l.node, l.instance, l.`key`, l.session_id,
                                     n.instance, n.last_heartbeat, n.stopped_at))
     FROM coordination_leadership l LEFT JOIN coordination_node n ON n.name = l.node),
    (SELECT JSON_OBJECTAGG(w.`group`, w.seq) FROM coordination_wakeup w)
"""


def pulse(identity: NodeIdentity) -> Pulse:
    """Write the heartbeat and read the leaders (one statement where the vendor allows)."""
    reader = _PULSES.get(connection.vendor, _pulse_orm)
    return reader(identity)


def _pulse_postgresql(identity: NodeIdentity) -> Pulse:
    with connection.cursor() as cursor:
        cursor.execute(_PULSE_POSTGRESQL, (identity.name, identity.instance))
        rows = cursor.fetchall()
    now, written = rows[0][0], bool(rows[0][1])
    leaders = [LeaderView(*row[2:]) for row in rows if row[2] is not None]
    return Pulse(now, written, leaders)


def _pulse_mysql(identity: NodeIdentity) -> Pulse:
    with connection.cursor() as cursor:
        cursor.execute(_PULSE_MYSQL, (identity.name, identity.instance))
        row = cursor.fetchone()
    if row is None:
        return Pulse(None, False)
    now, leaders_json, wakeups_json = row
    leaders = [
        LeaderView(
            group=group,
            node=node,
            instance=instance,
            key=key,
            session_id=session_id,
            node_instance=node_instance,
            last_heartbeat=_mysql_datetime(last_heartbeat),
            stopped_at=_mysql_datetime(stopped_at),
        )
        for group, node, instance, key, session_id, node_instance, last_heartbeat, stopped_at in (
            json.loads(leaders_json) if leaders_json else []
        )
    ]
    wakeups = {k: int(v) for k, v in json.loads(wakeups_json).items()} if wakeups_json else {}
    return Pulse(_mysql_datetime(now), True, leaders, wakeups)


def _mysql_datetime(value) -> datetime | None:
    """Make a raw SQL value (naive, or text in JSON) an aware datetime, as Django does."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if timezone.is_naive(value):
        value = timezone.make_aware(value, connection.timezone)
    return value


def _pulse_orm(identity: NodeIdentity) -> Pulse:
    written = bool(
        Node.objects.filter(name=identity.name, instance=identity.instance).update(
            last_heartbeat=Now()
        )
    )
    nodes = {n.name: n for n in Node.objects.annotate(db_now=Now())}
    now = next(iter(nodes.values())).db_now if nodes else None
    leaders = []
    for row in Leadership.objects.all():
        node = nodes.get(row.node)
        leaders.append(
            LeaderView(
                group=row.group,
                node=row.node,
                instance=row.instance,
                key=row.key,
                session_id=row.session_id,
                node_instance=node.instance if node else None,
                last_heartbeat=node.last_heartbeat if node else None,
                stopped_at=node.stopped_at if node else None,
            )
        )
    return Pulse(now, written, leaders)


_PULSES = {"postgresql": _pulse_postgresql, "mysql": _pulse_mysql}


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
    that wait per heartbeat interval.
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
        if not pending:
            return gone
        time.sleep(0.02)


_SESSIONS_POSTGRESQL = """
SELECT pg_postmaster_start_time(), STATEMENT_TIMESTAMP(),
       ARRAY(SELECT application_name FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = ANY(%s))
"""


def _sessions_postgresql(candidates: dict[str, tuple[str, datetime]]) -> dict:
    names = {
        instance: (lock_application_name(node), work_application_name(node))
        for instance, (node, _) in candidates.items()
    }
    with connection.cursor() as cursor:
        cursor.execute(_SESSIONS_POSTGRESQL, ([n for pair in names.values() for n in pair],))
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
            lock_sessions=lock in present,
            any_sessions=lock in present or work in present,
        )
        for instance, (lock, work) in names.items()
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


class DatabaseHealth:
    """Log one line when the database goes away and one when it is back, whoever notices."""

    def __init__(self):
        self._down_since: float | None = None
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            if self._down_since is None:
                self._down_since = time.monotonic()
                text = str(exc).strip().splitlines()
                logger.error(
                    "database unavailable (%s: %s); retrying with backoff",
                    type(exc).__name__,
                    text[0] if text else "",
                )

    def ok(self) -> None:
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is not None:
                logger.warning(
                    "database is back after %.1fs; resuming", time.monotonic() - self._down_since
                )
                self._down_since = None


class Heartbeat(threading.Thread):
    """Write this node's heartbeat and remove stale leaders of the groups this node runs."""

    def __init__(self, scheduler):
        super().__init__(name="heartbeat", daemon=True)
        self.scheduler = scheduler
        self.identity = scheduler.node
        self.last_ok = time.monotonic()
        self._halt = threading.Event()
        #: Group -> monotonic time since which this node has seen no live leader of it.
        self._leaderless_since: dict[str, float] = {}
        #: Group -> the wake-up counter last seen (MySQL; None before the first heartbeat).
        self._wakeups: dict[str, int] | None = None

    def stop(self) -> None:
        self._halt.set()

    def fresh(self) -> bool:
        """Return True if the last heartbeat was written well within the lease."""
        return time.monotonic() - self.last_ok < float(settings.LEASE) * 0.8

    def run(self) -> None:
        interval = float(settings.HEARTBEAT_INTERVAL)
        try:
            while not self._halt.wait(interval):
                try:
                    self.beat()
                    self.scheduler.db_health.ok()
                except (DatabaseError, InterfaceError) as exc:
                    self.scheduler.db_health.failed(exc)
                    connection.close()
                except Exception:
                    logger.exception("heartbeat failed")
        finally:
            connection.close()

    def beat(self) -> None:
        beat = pulse(self.identity)
        if not beat.written:
            logger.warning(
                "node %s: its row was missing or taken; registering again", self.identity.name
            )
            self.scheduler.register()
        self.last_ok = time.monotonic()
        self._wake_leaders(beat.wakeups)
        if beat.now is not None:
            self.scheduler.clock.sync(beat.now)
            self._remove_stale_leaders(beat.now, beat.leaders)
            self._remove_stale_holders(beat.now, beat.leaders)
            self._watch_for_leaderless_groups(beat.now, beat.leaders)

    def _wake_leaders(self, wakeups: dict[str, int]) -> None:
        """Wake the loop of each group this node leads whose wake-up counter moved (MySQL)."""
        if self._wakeups is not None:
            for group, seq in wakeups.items():
                if self._wakeups.get(group) != seq:
                    loop = self.scheduler.loop_for(group)
                    if loop is not None and loop.leading:
                        loop.wake()
        self._wakeups = dict(wakeups)

    def _watch_for_leaderless_groups(self, now: datetime, leaders: list[LeaderView]) -> None:
        """Alert when a group this node runs has had no live leader for longer than the lease."""
        lease = _lease()
        led = {leader.group for leader in leaders if not leader.stale(now, lease)}
        for loop in self.scheduler.loops:
            group = loop.group.name
            if loop.leading or group in led or self.scheduler.once:
                self._leaderless_since.pop(group, None)
                continue
            since = self._leaderless_since.setdefault(group, time.monotonic())
            seconds = time.monotonic() - since
            if seconds > lease.total_seconds():
                alerts.no_leader(group, seconds)

    def _remove_stale_leaders(self, now: datetime, leaders: list[LeaderView]) -> None:
        lease = _lease()
        for leader in leaders:
            loop = self.scheduler.loop_for(leader.group)
            if loop is None or loop.leading or leader.instance == self.identity.instance:
                continue
            if not leader.stale(now, lease):
                continue
            # Fence first: end the frozen node's work sessions, so none of its transactions
            # can block or commit, then its lock session, which frees the lock for a follower
            # (also where the lock is a lease, in PgBouncer mode, and ends by itself).
            work = terminate_node_work_sessions(leader) if leader.frozen(now, lease) else 0
            pid = terminate_holder(leader.key, pid=leader.session_id)
            if pid is None and not work:
                continue
            self._took_over(loop, leader.node, now, leader.last_heartbeat, pid, work)
            self._end_fenced(leader.group, leader.instance, now, leader.last_heartbeat)
            loop.request_maintenance()

    def _remove_stale_holders(self, now: datetime, leaders: list[LeaderView]) -> None:
        """Remove the server-side holder of a followed group's lock that stopped heartbeating.

        Asked only for groups without a live leader by their row (a dead leader's lock may
        have gone to a frozen waiter, which never writes its row). The holder's work sessions
        end first, then its lock session, as for a frozen leader.
        """
        lease = _lease()
        followed = {
            loop.group.name: loop.lock.key
            for loop in self.scheduler.loops
            if not loop.leading and type(loop.lock).can_end_holders
        }
        groups = followed_without_live_leader(followed, leaders, now, lease)
        if not groups:
            return
        holders = [
            holder
            for holder in list_holders(keys=list(groups.values()))
            if holder.node and holder.instance != self.identity.instance
        ]
        if not holders:
            return
        names = Q()
        for holder in holders:
            names |= Q(name__startswith=holder.node)
        views = holder_views(holders, groups, list(Node.objects.filter(names)))
        rows = {leader.group: leader for leader in leaders}
        for view in views:
            if view.node == self.identity.name or not view.stale(now, lease):
                continue
            loop = self.scheduler.loop_for(view.group)
            process = view.work_process()
            work = terminate_work_sessions(view.node, process) if process else 0
            pid = terminate_holder(view.key, pid=view.pid)
            if pid is None and not work:
                continue
            self._took_over(loop, view.node, now, view.last_heartbeat, pid, work)
            row = rows.get(view.group)
            if row is not None and process is not None and row.instance == process:
                self._end_fenced(view.group, row.instance, now, view.last_heartbeat)
            loop.request_maintenance()

    def _end_fenced(self, group: str, instance: str, now: datetime, last_heartbeat) -> None:
        """Close the fenced process's leadership term of ``group``, saying who removed it."""
        leadership.end(
            group,
            instance=instance,
            reason=leadership.EndReason.FENCED,
            detail=f"removed by {self.identity.name}: no heartbeat for "
            + _age_text(now, last_heartbeat),
        )

    def _took_over(self, loop, node: str, now: datetime, last_heartbeat, pid, work: int) -> None:
        logger.warning(
            "[%s] took over from stale node %s (no heartbeat for %s): terminated its lock "
            "session %s and %d work session(s)",
            loop.group.log_prefix,
            node,
            _age_text(now, last_heartbeat),
            pid,
            work,
        )


def _age_text(now: datetime, last_heartbeat: datetime | None) -> str:
    if last_heartbeat is None:
        return "ever"
    return f"{(now - last_heartbeat).total_seconds():.1f}s"
