"""Node liveness: registration, the heartbeat thread, and removing a frozen leader.

Every scheduler process heartbeats its node row (``INSTATIC_HEARTBEAT_INTERVAL``). A group
leader whose node has not heartbeated for longer than the lease (``INSTATIC_LEASE``) is removed
by a follower: it terminates the leader's lock session (so the lock frees and a waiting
follower takes it) and the leader's work sessions (so a frozen transaction cannot block or
commit). On PostgreSQL one statement both writes the heartbeat and reads the leaders, which
keeps an idle replica well under a statement a second.
"""

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DatabaseError, InterfaceError, connection, transaction
from django.db.models.functions import Now

from coordination import alerts, leadership
from coordination.conf import settings
from coordination.locks import terminate_holder
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


def _lease() -> timedelta:
    return timedelta(seconds=float(settings.LEASE))


def register_node(identity: NodeIdentity, *, groups, declared_jobs, fingerprint: str) -> None:
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
                "started_at": Now(),
                "last_heartbeat": Now(),
                "stopped_at": None,
            },
        )


def mark_stopped(identity: NodeIdentity) -> None:
    Node.objects.filter(name=identity.name, instance=identity.instance).update(
        stopped_at=Now(), last_heartbeat=Now()
    )


_PULSE_SQL = """
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


def pulse(identity: NodeIdentity) -> tuple[datetime | None, bool, list[LeaderView]]:
    """Write the heartbeat and read the leaders: (database now, row written, leaders)."""
    if connection.vendor == "postgresql":
        # One round trip: this runs every couple of seconds on every replica.
        with connection.cursor() as cursor:
            cursor.execute(_PULSE_SQL, (identity.name, identity.instance))
            rows = cursor.fetchall()
        now, written = rows[0][0], bool(rows[0][1])
        leaders = [LeaderView(*row[2:]) for row in rows if row[2] is not None]
        return now, written, leaders
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
    return now, written, leaders


def terminate_node_work_sessions(node_name: str) -> int:
    """End a stale node's own work sessions (PostgreSQL) so a frozen transaction cannot commit."""
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s"
            " AND pid <> pg_backend_pid()",
            (work_application_name(node_name),),
        )
        return cursor.fetchone()[0]


def work_application_name(node_name: str) -> str:
    return f"{node_name}/work"[:63]


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
        now, written, leaders = pulse(self.identity)
        if not written:
            logger.warning(
                "node %s: its row was missing or taken; registering again", self.identity.name
            )
            self.scheduler.register()
        self.last_ok = time.monotonic()
        if now is not None:
            self.scheduler.clock.sync(now)
            self._remove_stale_leaders(now, leaders)
            self._watch_for_leaderless_groups(now, leaders)

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
            work = terminate_node_work_sessions(leader.node) if leader.frozen(now, lease) else 0
            pid = terminate_holder(leader.key, pid=leader.session_id)
            if pid is None and not work:
                continue
            age = (now - leader.last_heartbeat).total_seconds() if leader.last_heartbeat else None
            logger.warning(
                "[%s] took over from stale node %s (no heartbeat for %s): terminated its lock "
                "session %s and %d work session(s)",
                loop.group.log_prefix,
                leader.node,
                f"{age:.1f}s" if age is not None else "ever",
                pid,
                work,
            )
            leadership.end(
                leader.group,
                instance=leader.instance,
                reason=leadership.EndReason.FENCED,
                detail=f"removed by {self.identity.name}: no heartbeat for "
                + (f"{age:.1f}s" if age is not None else "ever"),
            )
            loop.request_maintenance()
