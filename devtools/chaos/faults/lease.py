"""Faults of the lease-mode replicas behind PgBouncer: the holder frozen mid-commit, the pooler
restarted.

Both apply where the lease-mode replicas run in lease mode (PostgreSQL); the soak installs the
commit gate (``devtools/commit_gate.py``) on LEASE_JOB's runs at its start, which costs nothing
while the gate's lock is not held.
"""

import signal
import time

from devtools.chaos.config import (
    COMMIT_GATE_KEY,
    LEASE,
    LEASE_GROUP,
    LEASE_JOB,
    LEASE_TAKEOVER_BOUND,
    PGBOUNCER_RESTART_BOUND,
)
from devtools.chaos.faults.targets import new_fault
from devtools.chaos.records import Fault
from devtools.chaos.soak import Soak
from devtools.commit_gate import STATE_SQL, WAITING_SQL, write_finished_uncommitted
from devtools.freezing import freeze

#: How long a lease holder's run may take to reach the gate (LEASE_JOB runs every second).
GATE_WAIT = LEASE + 3.0


def lease_key() -> int:
    from coordination.conf import settings
    from coordination.keys import normalize_key

    return normalize_key(settings.group_key(LEASE_GROUP))


def fault_freeze_at_commit(soak: Soak) -> Fault:
    """SIGSTOP LEASE_GROUP's lease holder between the fence of a run and its ``COMMIT``.

    The gate's lock held, the holder's run of LEASE_JOB waits at its last update; the holder is
    stopped, the lock released, so the update finishes and the run's session sits idle in its
    fenced transaction, holding the lease row. The server ends that transaction when the lease
    would end; another node must then take the lease and run the slot, and the frozen node,
    resumed once it has, must fail its commit. The takeover is timed on the database clock
    from the freeze to the new lease's ``acquired_at``; the invariants check the slot.
    """
    resume_after = soak.rng.uniform(0.2, 1.0)
    key = lease_key()
    lease_sql = "SELECT holder, token FROM coordination_locklease WHERE key = %s"
    held = soak.query(lease_sql + " AND expires_at > now()", (key,))
    replica = soak.by_name(held[0][0]) if held else None
    if replica is None or not replica.alive():
        fault = new_fault(soak, "freeze-at-commit", "-")
        fault.skip(f"no live holder of the {LEASE_GROUP} lease")
        return fault
    fault = new_fault(soak, "freeze-at-commit", replica.name, f"{LEASE_GROUP} lease holder")
    conn = soak.db.connect()
    stopped = False
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (COMMIT_GATE_KEY,))
        waiting = None

        def at_gate() -> bool:
            nonlocal waiting
            row = conn.execute(WAITING_SQL, (COMMIT_GATE_KEY,)).fetchone()
            waiting = row[0] if row else None
            return waiting is not None

        if soak.wait_until(at_gate, since=time.monotonic(), timeout=GATE_WAIT) is None:
            fault.skip(f"no {LEASE_JOB} run reached the commit gate in {GATE_WAIT:.0f} s")
            return fault
        # Only the holder's runs pass the fence; the lease may have moved since it was read.
        holder, token = conn.execute(lease_sql, (key,)).fetchone()
        if holder != replica.name:
            fault.skip(f"the lease passed to {holder} meanwhile")
            return fault
        frozen_at, left = conn.execute(
            "SELECT statement_timestamp(), EXTRACT(EPOCH FROM expires_at - statement_timestamp())"
            " FROM coordination_locklease WHERE key = %s",
            (key,),
        ).fetchone()
        freeze(replica.process.pid)
        stopped = True
        conn.execute("SELECT pg_advisory_unlock(%s)", (COMMIT_GATE_KEY,))
        idle = soak.wait_until(
            lambda: write_finished_uncommitted(
                (conn.execute(STATE_SQL, (waiting,)).fetchone() or [None])[0]
            ),
            since=time.monotonic(),
            timeout=5,
        )
        # Its transaction has not committed: the job's state still names the frozen slot.
        fault.slot = conn.execute(
            "SELECT next_due FROM coordination_jobstate WHERE name = %s", (LEASE_JOB,)
        ).fetchone()[0]
        if idle is None:
            fault.problem = (
                "the frozen run's session neither went idle in its transaction nor ended"
            )
        taken_sql = "SELECT holder, acquired_at FROM coordination_locklease WHERE key = %s"
        fault.takeover = soak.wait_until(
            lambda: (
                conn.execute(taken_sql + " AND token <> %s", (key, token)).fetchone() is not None
            ),
            since=fault.at,
            timeout=LEASE + 15,
        )
        if fault.takeover is None:
            fault.problem = fault.problem or f"no other node took the lease in {LEASE + 15:.0f} s"
            return fault
        new_holder, acquired_at = conn.execute(taken_sql, (key,)).fetchone()
        fault.lead_gap = (acquired_at - frozen_at).total_seconds()
        fault.note = (
            f"lease left {float(left):.2f} s; {new_holder} took it {fault.lead_gap:.2f} s after"
            f" the freeze"
        )
        if fault.lead_gap > LEASE_TAKEOVER_BOUND:
            fault.problem = fault.problem or (
                f"{new_holder} took the lease {fault.lead_gap:.2f} s after the freeze"
            )
        time.sleep(resume_after)
        return fault
    finally:
        if stopped:
            replica.process.send_signal(signal.SIGCONT)
        conn.execute("SELECT pg_advisory_unlock_all()")
        conn.close()


def fault_pgbouncer_restart(soak: Soak) -> Fault:
    """Restart the PgBouncer the lease-mode replicas connect through (all their connections
    drop at once). The takeover is the time until LEASE_JOB succeeds again; its bound is
    checked on the database clock from the restart."""
    fault = new_fault(soak, "pgbouncer-restart", "pgbouncer", f"{LEASE_GROUP} lease replicas")
    restarted_db = soak.db_now()
    soak.bouncer.restart()
    fault.takeover = soak.wait_for_runs_after(restarted_db, since=fault.at, job=LEASE_JOB)
    resumed = soak.scalar(
        "SELECT min(finished_at) FROM coordination_jobrun WHERE job = %s"
        " AND status = 'succeeded' AND started_at > %s",
        (LEASE_JOB, restarted_db),
    )
    if fault.takeover is None or resumed is None:
        fault.problem = f"{LEASE_JOB} did not run again within 30 s"
        return fault
    fault.lead_gap = (resumed - restarted_db).total_seconds()
    fault.note = f"{LEASE_JOB} ran again {fault.lead_gap:.2f} s after the restart"
    if fault.lead_gap > PGBOUNCER_RESTART_BOUND:
        fault.problem = f"{LEASE_JOB} ran again only {fault.lead_gap:.2f} s after the restart"
    return fault
