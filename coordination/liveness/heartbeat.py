"""The heartbeat thread: beating, noticing the database's health, and removing frozen
leaders and lock holders.
"""

import logging
import threading
import time
from datetime import datetime

from django.db import DatabaseError, InterfaceError, connection
from django.db.models import Q

from coordination import alerts, leadership
from coordination.conf import settings
from coordination.liveness.nodes import _lease
from coordination.liveness.pulse import pulse
from coordination.liveness.sessions import terminate_node_work_sessions, terminate_work_sessions
from coordination.liveness.views import LeaderView, followed_without_live_leader, holder_views
from coordination.locks import list_holders, terminate_holder
from coordination.models import Node

logger = logging.getLogger(__name__)


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
