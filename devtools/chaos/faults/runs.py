"""Faults of the runs: run-now requests, a long catch-up, a node killed mid-run."""

import re
import time
from datetime import datetime

from devtools.chaos.config import (
    CATCHUP_BACK,
    CATCHUP_JOB,
    CLAIM_FIRST_JOBS,
    HEARTBEAT,
    JOBS,
    KILLED_RUN_BOUNDS,
    LEASE,
    PLUGIN_JOBS,
    SLOW_JOB,
)
from devtools.chaos.evidence import log_lines_between
from devtools.chaos.faults.targets import gap_after_kill, new_fault
from devtools.chaos.pressure import cpu_stall_total, stalled_words
from devtools.chaos.records import Fault, SlowRun
from devtools.chaos.soak import Soak


def fault_runnow(soak: Soak) -> Fault:
    """Run now on a job, mostly a claim-first one.

    Every other time (the first included) it SIGKILLs the node that claimed the manual run of
    a claim-first job that takes a while, 0-0.2 s after the claim, so mid-run: its ledger row
    stays ``running`` and the request must still count as served. The takeover is the time
    until the request is served (``run_requested_at`` cleared).
    """
    rng = soak.rng
    kill = sum(1 for f in soak.faults if f.kind == "runnow") % 2 == 0
    if kill:
        job = rng.choice([SLOW_JOB, "chaosapp.claim_tick"])
    else:
        job = rng.choice(CLAIM_FIRST_JOBS if rng.random() < 0.7 else PLUGIN_JOBS)
    kill_after = rng.uniform(0.0, 0.2)
    fault = new_fault(soak, "runnow", job, "then SIGKILL its node" if kill else "")
    asked_at = soak.db_now()
    if not soak.request_run(job):
        fault.skip("no job state")
        return fault
    soak.run_requests[job] += 1
    if kill:
        fault.note = kill_manual_runner(soak, job, asked_at, kill_after)
        fault.disrupts_publishing = fault.note.startswith("its node killed")
    fault.takeover = soak.wait_until(
        lambda: soak.scalar(
            "SELECT run_requested_at IS NULL FROM coordination_jobstate WHERE name = %s", (job,)
        ),
        since=fault.at,
        timeout=10,
    )
    if fault.takeover is None:
        fault.problem = f"{job} run-now not served in 10 s"
    return fault


def kill_manual_runner(soak: Soak, job: str, asked_at, kill_after: float) -> str:
    """SIGKILL (and restart) the replica that claimed the manual run of ``job``; say what
    happened."""
    node_sql = (
        f"SELECT node FROM coordination_jobrun WHERE job = %s AND {soak.db.q('trigger')}"
        " = 'manual' AND slot >= %s ORDER BY slot LIMIT 1"
    )
    claimed = soak.wait_until(
        lambda: soak.scalar(node_sql, (job, asked_at)) is not None,
        since=time.monotonic(),
        timeout=6,
    )
    if claimed is None:
        return "manual run not claimed in 6 s; nothing killed"
    time.sleep(kill_after)
    replica = soak.by_name(soak.scalar(node_sql, (job, asked_at)))
    if replica is None or not replica.alive():
        return "its node was gone already"
    soak.kill(replica)
    soak.restart(replica)
    return f"its node killed {kill_after:.2f} s after the claim"


def fault_catchup(soak: Soak) -> Fault:
    """Move CATCHUP_JOB's next slot 30 minutes before its first ledger row (a long pause).

    The takeover is the time until its next slot is back within a period of now.
    """
    fault = new_fault(soak, "catchup", CATCHUP_JOB)
    db = soak.db
    rows = soak.query(
        f"SELECT LEAST(s.next_due, COALESCE((SELECT min(slot) FROM coordination_jobrun"
        f" WHERE job = %(job)s AND {db.q('trigger')} <> 'manual'), s.next_due)), {db.now}"
        " FROM coordination_jobstate s WHERE s.name = %(job)s",
        {"job": CATCHUP_JOB},
    )
    if not rows or rows[0][0] is None:
        fault.skip("no job state")
        return fault
    next_due, now = rows[0][0] - CATCHUP_BACK, rows[0][1]
    # The move is a write the engine does not expect: a run planned before it and committed
    # after it sets the job's next slot as planned, and the move is gone without a trace
    # (no product path moves a next slot backwards under a running job). So move it again
    # until the engine has taken it: its first slot is in the ledger. Only then does the
    # ledger invariant hold the engine to the slots from there.
    accepted = soak.wait_until(
        lambda: _moved_back(soak, next_due), since=time.monotonic(), timeout=10
    )
    if accepted is None:
        fault.skip("every move back was overwritten by a run in flight")
        return fault
    soak.catchup_from = min(next_due, soak.catchup_from or next_due)
    fault.note = f"{(now - next_due).total_seconds():.0f} slots behind"
    fault.takeover = soak.wait_until(
        lambda: CATCHUP_JOB not in soak.lagging_jobs(), since=fault.at, timeout=10
    )
    if fault.takeover is None:
        fault.problem = f"still behind after 10 s: {soak.lagging_jobs().get(CATCHUP_JOB)}"
    return fault


def _moved_back(soak: Soak, slot: datetime) -> bool:
    """Whether the engine has recorded ``slot`` for CATCHUP_JOB; if not, move its state there."""
    if soak.query(
        "SELECT 1 FROM coordination_jobrun WHERE job = %(job)s AND slot = %(slot)s",
        {"job": CATCHUP_JOB, "slot": slot},
    ):
        return True
    soak.query(
        "UPDATE coordination_jobstate SET next_due = LEAST(next_due, %(back)s)"
        " WHERE name = %(job)s",
        {"job": CATCHUP_JOB, "back": slot},
    )
    return False


def fault_killrun(soak: Soak) -> Fault:
    """SIGKILL the plugins leader while the slow claim-first job runs on it.

    The killed process's sessions end with it, so the new leader must abandon the run at once
    (not a lease later) and the job's next slot must start on time. The takeover is the time
    until the run's row is no longer ``running``; the bounds (the vendor's
    ``KILLED_RUN_BOUNDS``) are checked on the database's times.

    They count from the kill when another replica was ready to lead the group then
    (``Soak.ready_followers``). When none was (the replicas earlier faults killed still
    starting, on a busy machine), they count from the moment the next leader took the lock;
    that leader, started after the kill, finds the dead node's heartbeat stale, and abandons
    the run for it at once just as rightly.
    """
    from coordination.ledger import VANISHED_REASON

    bound = KILLED_RUN_BOUNDS[soak.db.vendor]
    pause = soak.rng.uniform(0.0, 1.0)
    run = soak.wait_slow_run()
    replica = soak.by_name(run.node) if run else None
    if run is None or replica is None or not replica.alive():
        fault = new_fault(soak, "killrun", "-")
        fault.skip(f"{SLOW_JOB} not running on the plugins leader")
        return fault
    time.sleep(pause)
    fault = new_fault(soak, "killrun", run.node, f"{SLOW_JOB} run {run.id}")
    followers = soak.ready_followers("plugins", besides=run.node)
    killed_db = soak.db_now()
    soak.kill(replica)
    row_sql = "SELECT status, error, finished_at, slot FROM coordination_jobrun WHERE id = %s"
    fault.takeover = soak.wait_until(
        lambda: soak.query(row_sql, (run.id,))[0][0] != "running", since=fault.at, timeout=15
    )
    stall, stalled_for = cpu_stall_total(), time.monotonic() - fault.at
    status, error, finished_at, slot = soak.query(row_sql, (run.id,))[0]
    start = timed_from(killed_db, followers, soak.leader_since("plugins"))
    if status != "abandoned" and finished_at is not None and finished_at <= killed_db:
        fault.note = f"run {run.id} ended ({status}) before the kill"
    elif status == "abandoned" and error != VANISHED_REASON and (why := left_to_lease(soak, run)):
        # By design: its heartbeat was already half a lease old (a starved process), which
        # does not prove it gone. Then the lease bounds it.
        fault.note = f"left to the lease ({why})"
        gap = (finished_at - killed_db).total_seconds()
        if gap > LEASE + 2 * HEARTBEAT + 1:
            fault.problem = f"run {run.id} abandoned {gap:.2f} s after the kill"
    elif status != "abandoned" or finished_at is None or (followers and error != VANISHED_REASON):
        fault.problem = f"run {run.id} {status} ({error or 'no error'}), not abandoned at once"
    else:
        gap = (finished_at - start).total_seconds()
        within = gap_after_kill(fault, gap, bound, what="abandoned", who=f"run {run.id}")
        if start != killed_db:
            # No follower was ready: the next leader took the lock this long after the kill.
            waited = (start - killed_db).total_seconds()
            taken = (
                f"{gap:.2f} s after the next leader took the lock ({waited:.2f} s after the kill)"
            )
            fault.note = f"no follower ready at the kill; abandoned {taken}"
            if not within:
                fault.problem = f"run {run.id} abandoned {taken}"
        if within:
            next_sql = (
                "SELECT slot, started_at FROM coordination_jobrun WHERE job = %s AND slot > %s"
                " AND started_at IS NOT NULL ORDER BY slot LIMIT 1"
            )
            soak.wait_until(
                lambda: bool(soak.query(next_sql, (SLOW_JOB, slot))),
                since=time.monotonic(),
                timeout=2 * JOBS[SLOW_JOB].period + 1,
            )
            rows = soak.query(next_sql, (SLOW_JOB, slot))
            if not rows:
                fault.problem = f"{SLOW_JOB} did not run again"
            else:
                late = (rows[0][1] - max(rows[0][0], start)).total_seconds()
                fault.note += f"; next run {late:.2f} s after its slot"
                if late > bound:
                    fault.problem = f"{SLOW_JOB}'s next run started {late:.2f} s late"
    if fault.problem:
        waited = fault.takeover if fault.takeover is not None else 15.0
        fault.account = [
            stalled_words(fault.cpu_stall, stall, stalled_for),
            *log_lines_between(
                soak,
                fault.wall - 0.5,
                fault.wall + waited + 0.5,
                mentioning=(run.node, "running plugin jobs", "abandoned", " WARNING ", " ERROR "),
            ),
        ]
    soak.restart(replica)
    return fault


def timed_from(killed_at: datetime, followers: list[str], leader_since: datetime | None):
    """Return when a killed leader's run's bounds start: at the kill when another replica was
    ready to take the group's lock (``followers``), else when the next leader took it."""
    if followers or leader_since is None:
        return killed_at
    return max(killed_at, leader_since)


def left_to_lease(soak: Soak, run: SlowRun) -> str:
    """Return why a leader left ``run``'s node to its lease when the reason is its heartbeat's
    age (the fast path's design: no proof of death), from the replicas' logs; else ""."""
    pattern = re.compile(
        rf"node {re.escape(run.node)} may still be running its runs \((heartbeat [\d.]+s old,"
        r" lease [\d.]+s; no session)\)"
    )
    for replica in soak.replicas.values():
        for line in replica.log_path.read_text(errors="replace").splitlines():
            found = pattern.search(line)
            if found:
                age, lease = re.findall(r"[\d.]+(?=s)", found[1])[:2]
                if float(age) >= float(lease) / 2:
                    return found[1]
    return ""
