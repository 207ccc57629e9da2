"""Faults of the worker processes: one SIGKILLed, one frozen past the lease, one's database
sessions ended, each while it has a run of a workers job in hand when one can be caught.

A worker is found among the children of a replica (or of the worker-only node) whose pid its
``Node`` row names (``Soak.worker_targets``). After each fault the leader's sweep must settle
the worker's run (a claim-first run abandoned and retried, a transactional one rolled back and
queued again), and the worker's pool must have it running again; the invariants then check
every slot of the workers jobs.
"""

import os
import signal
import time
from pathlib import Path

from devtools.chaos.config import (
    HEARTBEAT,
    LEASE,
    RETRY_MAX,
    WORKER_FREEZE_PAST_LEASE,
    WORKER_NODE,
    WORKER_TX_JOB,
)
from devtools.chaos.faults.targets import new_fault
from devtools.chaos.records import Fault, WorkerTarget
from devtools.chaos.soak import Soak
from devtools.freezing import freeze

#: How long a fault waits for a worker with a run in hand before it takes an idle one.
BUSY_WAIT = 4.0
#: A dead or frozen worker's run is settled (no longer ``running``) within this long of the
#: fault: its heartbeat goes a lease stale, the leader's next sweep (every half lease) finds it,
#: a heartbeat interval of jitter, and a second for a starved CPU.
SETTLE_BOUND = LEASE + LEASE / 2 + HEARTBEAT + 1.0
#: How long (s) the session fault keeps trying to end a busy worker's sessions.
SESSION_TRIES = 1.0
#: A pool starts a killed or fenced child again at once (``pool.plan_restart``), and the child
#: waits for the database before it serves: a database fault just before may add RETRY_MAX.
RESTART_BOUND = 10.0 + RETRY_MAX


def pick_worker(soak: Soak, draw: float, *, of: str | None = None) -> WorkerTarget | None:
    """Return a worker process (of the node named ``of`` when given) with a run in hand
    (waiting up to BUSY_WAIT), else an idle one; ``draw`` (from the seed) chooses among them."""
    deadline = time.monotonic() + BUSY_WAIT
    targets = []
    while time.monotonic() < deadline:
        targets = [t for t in soak.worker_targets() if of in (None, t.parent.name)]
        busy = [t for t in targets if t.run_id is not None]
        if busy:
            return busy[int(draw * len(busy))]
        time.sleep(0.1)
    return targets[int(draw * len(targets))] if targets else None


def run_status(soak: Soak, run_id: int) -> tuple[str, int, str]:
    rows = soak.query(
        "SELECT status, attempt, node FROM coordination_jobrun WHERE id = %s", (run_id,)
    )
    return tuple(rows[0]) if rows else ("gone", 0, "")


def settle_run(soak: Soak, fault: Fault, target: WorkerTarget, since_db) -> None:
    """Wait for the worker's run to leave ``running`` (or be retried); note how it ended, and a
    problem past SETTLE_BOUND after the fault's ``since_db`` (the database's clock)."""
    if target.run_id is None:
        fault.note = "an idle worker"
        return
    attempt = run_status(soak, target.run_id)[1]
    soak.wait_until(
        lambda: run_status(soak, target.run_id)[:2] != ("running", attempt),
        since=time.monotonic(),
        timeout=SETTLE_BOUND + 10,
    )
    status, attempt_now, node = run_status(soak, target.run_id)
    settled_at = soak.scalar(
        "SELECT finished_at FROM coordination_jobrun WHERE id = %s AND attempt = %s",
        (target.run_id, attempt),
    )
    fault.note = f"{target.job} run {target.run_id} {status} (attempt {attempt_now}, {node or '-'})"
    if (status, attempt_now) == ("running", attempt):
        fault.problem = f"{target.job} run {target.run_id} still running on {node}"
    elif settled_at is not None and status == "abandoned":
        fault.lead_gap = (settled_at - since_db).total_seconds()
        if fault.lead_gap > SETTLE_BOUND:
            fault.problem = (
                f"{target.job} run {target.run_id} abandoned {fault.lead_gap:.2f} s after the fault"
            )


def restarted(soak: Soak, fault: Fault, target: WorkerTarget) -> None:
    """Note a problem unless the worker's pool has a new process of that worker running."""
    back = soak.wait_until(
        lambda: any(t.name == target.name and t.pid != target.pid for t in soak.worker_targets()),
        since=time.monotonic(),
        timeout=RESTART_BOUND,
    )
    if back is None and target.parent.alive() and not fault.problem:
        fault.problem = f"{target.name} not running again {RESTART_BOUND:.0f} s later"


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie no one reaped yet counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def fault_workerkill(soak: Soak) -> Fault:
    """SIGKILL a worker process, mid-run when one can be caught; every third time the
    worker-only node's ``runworker`` itself, whose workers must die with it.

    A claim-first run must be abandoned by the leader's sweep within SETTLE_BOUND and retried
    (``retry_abandoned``); a transactional one rolls back and runs again. The takeover is the
    time until the every-second workers job succeeds again; the worker's pool starts the
    process again (the soak restarts a killed worker-only node).
    """
    whole_node = sum(1 for f in soak.faults if f.kind == "workerkill") % 3 == 2
    draw = soak.rng.random()
    node = soak.replicas.get(WORKER_NODE)
    target = pick_worker(soak, draw, of=node.name if whole_node and node else None)
    if target is None:
        fault = new_fault(soak, "workerkill", "-")
        fault.skip("no live worker process")
        return fault
    victim = target.parent.name if whole_node else target.name
    fault = new_fault(
        soak,
        "workerkill",
        victim,
        f"{'its worker ' + target.name + ' ' if whole_node else ''}pid {target.pid},"
        f" {target.job or 'idle'}",
    )
    killed_db = soak.db_now()
    if whole_node:
        soak.kill(target.parent)
        # The kernel kills the workers of a dead pool (PR_SET_PDEATHSIG).
        if not soak.wait_until(lambda: process_gone(target.pid), since=time.monotonic(), timeout=5):
            fault.problem = f"{target.name} (pid {target.pid}) outlived its node's SIGKILL"
            os.kill(target.pid, signal.SIGKILL)
    else:
        try:
            os.kill(target.pid, signal.SIGKILL)
        except ProcessLookupError:
            fault.skip("the worker exited meanwhile")
            return fault
    fault.takeover = soak.wait_for_runs_after(killed_db, since=fault.at, job=WORKER_TX_JOB)
    problem = fault.problem
    settle_run(soak, fault, target, killed_db)
    fault.problem = problem or fault.problem
    if whole_node:
        soak.restart(target.parent)
    else:
        restarted(soak, fault, target)
    return fault


def fault_workerfreeze(soak: Soak) -> Fault:
    """SIGSTOP a worker process for longer than the lease, then SIGCONT it.

    The leader's sweep finds its heartbeat stale with work in hand and fences it (its sessions
    ended, its node marked stopped): its claim-first run is abandoned and retried elsewhere, a
    transactional one rolls back and runs again; resumed, the worker finds itself fenced and
    stops, and its pool starts it again. Its late outcome must not land (the invariants check
    every attempt started once).
    """
    draw = soak.rng.random()
    frozen_for = LEASE + soak.rng.uniform(*WORKER_FREEZE_PAST_LEASE)
    target = pick_worker(soak, draw)
    if target is None:
        fault = new_fault(soak, "workerfreeze", "-")
        fault.skip("no live worker process")
        return fault
    fault = new_fault(
        soak,
        "workerfreeze",
        target.name,
        f"pid {target.pid}, {target.job or 'idle'}, {frozen_for:.1f} s",
    )
    frozen_db = soak.db_now()
    try:
        freeze(target.pid)
    except ProcessLookupError:
        fault.skip("the worker exited meanwhile")
        return fault
    try:
        fault.takeover = soak.wait_for_runs_after(frozen_db, since=fault.at, job=WORKER_TX_JOB)
        settle_run(soak, fault, target, frozen_db)
        time.sleep(max(0.0, fault.at + frozen_for - time.monotonic()))
    finally:
        try:
            os.kill(target.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass  # its parent died meanwhile, and the kernel killed it
    if target.run_id is not None:
        restarted(soak, fault, target)
    return fault


def fault_workersession(soak: Soak) -> Fault:
    """End a worker process's database sessions (``<node>/worker-<i>/work``), mid-run when one
    can be caught; the run must still end settled and its slot run once."""
    draw = soak.rng.random()
    target = pick_worker(soak, draw)
    if target is None:
        fault = new_fault(soak, "workersession", "-")
        fault.skip("no live worker process")
        return fault
    fault = new_fault(soak, "workersession", target.name, target.job or "idle")
    ended_db = soak.db_now()
    # Between its statements a worker may hold no session (its connection closed after an
    # error, its job thread's not opened yet): try again while its run goes on.
    ended = 0
    deadline = time.monotonic() + SESSION_TRIES
    while True:
        ended = soak.db.end_sessions(target.name, role="work")
        still_running = (
            target.run_id is not None and run_status(soak, target.run_id)[0] == "running"
        )
        if ended or not still_running or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    fault.takeover = soak.wait_for_runs_after(ended_db, since=fault.at, job=WORKER_TX_JOB)
    settle_run(soak, fault, target, ended_db)
    fault.note = f"{ended} session(s) ended; {fault.note}"
    return fault
