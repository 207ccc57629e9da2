"""Faults of the database: sessions ended, the server restarted or failed over, rows locked."""

import time

from devtools.chaos.config import FAILOVER_LEASE_BOUND, LEASE_JOB, ROWLOCK_MAX_RATE, SLOW_JOB
from devtools.chaos.databases import SoakDatabase, Unreachable
from devtools.chaos.faults.targets import leader_fault, new_fault
from devtools.chaos.records import Fault
from devtools.chaos.soak import Soak


def fault_session(soak: Soak) -> Fault:
    fault, _, leader = leader_fault(soak, "session")
    ended = soak.db.end_sessions(leader.name)
    fault.note = f"{ended} session(s) ended"
    fault.takeover = soak.wait_for_runs_after(soak.db_now(), since=fault.at)
    return fault


def restart_database(soak: Soak, fault: Fault) -> None:
    soak.db.restart()
    fault.takeover = soak.wait_for_runs_after(soak.db_now(), since=fault.at)


def fault_pgrestart(soak: Soak) -> Fault:
    """Restart the database server (the kind is ``pgrestart`` on every vendor: one report name)."""
    fault = new_fault(soak, "pgrestart", soak.db.vendor)
    restart_database(soak, fault)
    return fault


def fault_failover(soak: Soak) -> Fault:
    """Fail the primary over to its synchronous standby, then rebuild the old one as standby.

    The primary stops with ``-m immediate`` mid-work; advisory locks die with it, and the
    nodes must find the promoted standby through their multi-host URL by themselves; the
    PgBouncer of the lease-mode replicas is pointed at it (its configuration rewritten and
    reloaded, as an operator's failover tooling does). The takeover is the time until the
    every-second job succeeds on the new primary; the lease group must run again too.
    """
    fault = new_fault(soak, "failover", f"{soak.db.vendor} primary")
    soak.db.fail_over()
    soak.follow_primary()
    promoted_db = soak.db_now()
    fault.takeover = soak.wait_for_runs_after(promoted_db, since=fault.at)
    fault.note = "old primary rebuilt as the standby"
    if soak.bouncer is not None:
        soak.wait_for_runs_after(promoted_db, since=fault.at, job=LEASE_JOB)
        resumed = soak.scalar(
            "SELECT min(finished_at) FROM coordination_jobrun WHERE job = %s"
            " AND status = 'succeeded' AND started_at > %s",
            (LEASE_JOB, promoted_db),
        )
        if resumed is None:
            fault.problem = f"{LEASE_JOB} did not run again through PgBouncer within 30 s"
        else:
            gap = (resumed - promoted_db).total_seconds()
            fault.note += f"; PgBouncer followed, {LEASE_JOB} ran again {gap:.2f} s after"
            if gap > FAILOVER_LEASE_BOUND:
                fault.problem = f"{LEASE_JOB} ran again only {gap:.2f} s after the promotion"
    soak.db.rebuild()
    return fault


def fault_lockonly(soak: Soak) -> Fault:
    """End only the plugins leader's lock session while the slow claim-first job runs on it."""
    pause = soak.rng.uniform(0.0, 1.0)
    run = soak.wait_slow_run()
    if run is None:
        fault = new_fault(soak, "lockonly", "-")
        fault.skip(f"{SLOW_JOB} not running on the plugins leader")
        return fault
    time.sleep(pause)
    fault = new_fault(soak, "lockonly", run.node, f"{SLOW_JOB} run {run.id}")
    ended = soak.db.end_sessions(run.node, connection_id=run.lock_pid)
    # The same node may take the lock straight back, so "resumed" is the next run, not a leader.
    fault.takeover = soak.wait_for_runs_after(soak.db_now(), since=fault.at)
    fault.note = f"{ended} session ended; slow run {soak.final_status(run.id)}"
    return fault


def fault_pgrestart_busy(soak: Soak) -> Fault:
    """Restart the database while the slow claim-first job does its non-database work."""
    pause = soak.rng.uniform(0.0, 1.0)
    run = soak.wait_slow_run()
    if run is None:
        fault = new_fault(soak, "pgrestart-busy", soak.db.vendor)
        fault.skip(f"{SLOW_JOB} not running")
        return fault
    time.sleep(pause)
    fault = new_fault(soak, "pgrestart-busy", soak.db.vendor, f"{SLOW_JOB} run {run.id}")
    restart_database(soak, fault)
    fault.note = f"slow run {soak.final_status(run.id)}"
    return fault


def fault_rowlock(soak: Soak) -> Fault:
    """Hold a row lock on a due scheduled post for a few seconds past its time.

    The publish job skips locked rows; it must neither spin on the one it cannot take (the rate
    of its ledger rows while the post is due and locked is recorded) nor forget it afterwards
    (the takeover is the time from the release until the post is published).
    """
    hold = soak.rng.uniform(2.0, 4.0)
    fault = new_fault(soak, "rowlock", "publishing_post")
    db = soak.db
    try:
        conn = db.connect(autocommit=False)
        try:
            cursor = conn.cursor()
            locked = lock_due_post(db, conn, cursor)
            if locked is None:
                fault.skip("no post due soon")
                return fault
            post_id, publish_at, now = locked
            fault.target = f"post {post_id}"
            fault.post_id = post_id
            time.sleep(max(0.0, (publish_at - now).total_seconds()) + hold)
            cursor.execute(f"SELECT {db.clock}")
            released_at = cursor.fetchone()[0]
            conn.rollback()
        finally:
            conn.close()
    except (Unreachable, *db.errors) as exc:
        fault.skip(f"database error: {exc}")
        return fault
    released = time.monotonic()
    due_from = max(publish_at, now)
    runs = soak.scalar(
        "SELECT count(*) FROM coordination_jobrun WHERE job = %s AND started_at >= %s"
        " AND started_at <= %s",
        (soak.publish_job, due_from, released_at),
    )
    window = max(0.5, (released_at - due_from).total_seconds())
    fault.rate = runs / window
    fault.note = f"{runs} publish runs in {window:.1f} s locked"
    if fault.rate > ROWLOCK_MAX_RATE:
        fault.problem = f"{fault.rate:.0f} publish runs/s while post {post_id} was locked"
    publish_time = soak.wait_until(
        lambda: (
            not soak.scalar(
                "SELECT count(*) FROM publishing_post WHERE id = %s AND status = 'scheduled'"
                f" AND publish_at <= {db.now}",
                (post_id,),
            )
        ),
        since=released,
        timeout=10,
    )
    fault.takeover = None if publish_time is None else released - fault.at + publish_time
    if publish_time is None:
        fault.problem = f"post {post_id} still unpublished 10 s after the lock was released"
    return fault


def lock_due_post(db: SoakDatabase, conn, cursor, timeout: float = 5.0):
    """Lock a scheduled post due within 2 s; return (id, publish_at, now) or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cursor.execute(
            f"SELECT id, publish_at, {db.clock} FROM publishing_post"
            f" WHERE status = 'scheduled' AND publish_at <= {db.later(2)}"
            " ORDER BY publish_at DESC LIMIT 1 FOR UPDATE SKIP LOCKED"
        )
        row = cursor.fetchone()
        if row is not None:
            return row
        conn.rollback()  # a new transaction, so now() moves on
        time.sleep(0.1)
    return None
