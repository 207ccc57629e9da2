"""SQL the faults, the settle phase and the invariants share (plain SQL both vendors accept)."""

from devtools.chaos.config import LEASE, WORKER_JOBS
from devtools.chaos.databases import SoakDatabase


def dead_running_sql(db: SoakDatabase) -> str:
    """Runs still marked running although their node is gone (stopped or silent past the lease)."""
    return (
        "SELECT count(*) FROM coordination_jobrun r WHERE status = 'running'"
        " AND job LIKE 'chaosapp.%%' AND NOT EXISTS (SELECT 1 FROM coordination_node n"
        " WHERE n.instance = r.node_instance AND n.stopped_at IS NULL"
        f" AND n.last_heartbeat > {db.ago(LEASE)})"
    )


def stuck_running_sql(db: SoakDatabase) -> str:
    """Runs running far longer than any chaos job can (their node forgot them)."""
    return (
        "SELECT count(*) FROM coordination_jobrun WHERE status = 'running'"
        f" AND job LIKE 'chaosapp.%%' AND started_at < {db.ago(30)}"
    )


def unsettled_worker_runs_sql() -> str:
    """Runs of the workers jobs queued before a time (the first parameter, then the jobs) that
    are still queued or running."""
    return (
        "SELECT count(*) FROM coordination_jobrun WHERE status IN ('queued', 'running')"
        f" AND queued_at < %s AND job IN ({placeholders(WORKER_JOBS)})"
    )


CHAOS_OR_PUBLISH = "(job LIKE 'chaosapp.%%' OR job = %(publish)s)"


def placeholders(values, name: str = "") -> str:
    """Return ``%s, %s, ...`` (or ``%(name0)s, ...``) for an IN list both vendors accept."""
    if name:
        return ", ".join(f"%({name}{i})s" for i in range(len(values)))
    return ", ".join(["%s"] * len(values))


def undelivered_events_sql() -> str:
    """Count the publish events not dispatched yet and the deliveries still open."""
    return (
        "SELECT (SELECT count(*) FROM publishing_publishevent WHERE dispatched_at IS NULL)"
        " + (SELECT count(*) FROM outbox_delivery WHERE finished_at IS NULL)"
    )


def pending_releases_sql() -> str:
    """Count the scheduled releases not gone out yet, but for stopped ones (a problem)."""
    return "SELECT count(*) FROM publishing_release WHERE status = 'scheduled' AND problem = ''"
