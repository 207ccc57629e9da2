"""What a node knows of the others: identities, leaders and lock holders with their nodes'
liveness, and the pure decisions over them.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from coordination.locks import LockHolder
from coordination.locks.postgresql import lock_application_name
from coordination.models import Node


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
