"""Faults of the scheduler processes: killed, stopped, frozen, cut off, or run ``--once``."""

import signal
import subprocess
import time
from datetime import datetime

from devtools.chaos.config import (
    DOUBLE_FAULT_BOUND,
    LEASE_GROUP,
    LEASE_REPLICAS,
    LEASE_TERM_MAX,
    LEASE_TERM_WAIT,
    ONCE_CUT_OFF,
)
from devtools.chaos.faults.targets import gap_after_kill, leader_fault, new_fault, pick_leader
from devtools.chaos.records import Fault, OnceRun, Replica
from devtools.chaos.soak import Soak
from devtools.freezing import freeze


def fault_kill(soak: Soak) -> Fault:
    fault, group, leader = leader_fault(soak, "kill")
    soak.kill(leader)
    fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
    soak.restart(leader)
    return fault


def fault_term(soak: Soak) -> Fault:
    fault, group, leader = leader_fault(soak, "term")
    fault.exit_code, fault.exit_seconds = soak.terminate(leader, timeout=30)
    fault.note = f"exit {fault.exit_code}"
    if fault.exit_code != 0:
        fault.problem = f"exit {fault.exit_code} (expected 0)"
    fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
    soak.restart(leader)
    return fault


def fault_freeze(soak: Soak) -> Fault:
    frozen_for = soak.rng.uniform(0.5, 2.0)
    fault, group, leader = leader_fault(soak, "freeze")
    freeze(leader.process.pid)
    fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
    time.sleep(frozen_for)
    leader.process.send_signal(signal.SIGCONT)
    return fault


def fault_partition(soak: Soak) -> Fault:
    cut_for = soak.rng.uniform(1.0, 3.0)
    fault, group, leader = leader_fault(soak, "partition")
    if not soak.network.available:
        fault.skip("no network namespaces")
        return fault
    soak.network.partition(leader.index, down=True)
    fault.takeover = soak.wait_new_leader(group, leader.name, since=fault.at)
    time.sleep(cut_for)
    soak.network.partition(leader.index, down=False)
    return fault


def fault_doublefault(soak: Soak) -> Fault:
    """Freeze the follower first in line for a group's lock, then SIGKILL the group's leader.

    The server grants the dead leader's lock to the frozen waiter, which cannot write its
    leadership row; another follower must find the holder in the server and fence it. The
    takeover is the time until a third node leads; the bound is checked on the database's
    times (the new leadership row's ``since`` against the kill).
    """
    frozen_extra = soak.rng.uniform(0.2, 1.0)
    group, leader_name, leader = pick_leader(soak)
    from coordination.conf import settings
    from coordination.keys import normalize_key

    waiter = soak.by_name(soak.db.first_lock_waiter(normalize_key(settings.group_key(group))))
    fault = new_fault(
        soak,
        "doublefault",
        leader.name,
        f"{group} leader {leader_name}, first waiter {waiter.name if waiter else None} frozen",
    )
    if leader.name != leader_name or waiter is None or waiter is leader or not waiter.alive():
        fault.skip(f"no leader of {group} with a waiting follower")
        return fault
    freeze(waiter.process.pid)
    killed_db = soak.db_now()
    soak.kill(leader)

    def third_node_leads() -> bool:
        current = soak.by_name(soak.leader(group))
        return current is not None and current not in (leader, waiter) and current.alive()

    fault.takeover = soak.wait_until(third_node_leads, since=fault.at, timeout=30)
    since = soak.scalar(
        f"SELECT since FROM coordination_leadership WHERE {soak.db.q('group')} = %s", (group,)
    )
    if fault.takeover is None or since is None:
        fault.problem = f"{group} did not lead again within 30 s"
    else:
        gap = (since - killed_db).total_seconds()
        gap_after_kill(fault, gap, DOUBLE_FAULT_BOUND, what="led again", who=group)
    time.sleep(frozen_extra)
    waiter.process.send_signal(signal.SIGCONT)
    soak.restart(leader)
    return fault


def fault_leaseterm(soak: Soak) -> Fault:
    """SIGTERM a lease-mode replica, follower and leader in turn; time its exit; restart it."""
    want_leader = sum(1 for f in soak.faults if f.kind == "leaseterm") % 2 == 1
    leader = soak.leader(LEASE_GROUP)
    lease_replicas = [soak.replicas[i] for i in LEASE_REPLICAS]
    replica = next(
        (r for r in lease_replicas if (r.name == leader) == want_leader), lease_replicas[0]
    )
    role = "leader" if replica.name == leader else "follower"
    # Before it registers it has no signal handler yet, and would die of the signal.
    soak.wait_until(
        lambda: soak.scalar(
            "SELECT count(*) FROM coordination_node WHERE name = %s", (replica.name,)
        ),
        since=time.monotonic(),
        timeout=10,
    )
    fault = new_fault(soak, "leaseterm", replica.name, role)
    if not replica.alive():
        fault.problem = f"{replica.name} had already exited ({replica.process.returncode})"
    sent = time.time()
    fault.exit_code, exited = soak.terminate(replica, timeout=LEASE_TERM_WAIT)
    fault.exit_seconds = stopped_line_after(replica, sent)
    fault.note = (
        f"{role} stopped in {fault.exit_seconds:.2f} s, exit {fault.exit_code} in {exited:.2f} s"
        if fault.exit_seconds is not None
        else f"{role} exit {fault.exit_code} in {exited:.2f} s"
    )
    if fault.exit_code is None:
        fault.problem = fault.problem or f"{role} still running after {LEASE_TERM_WAIT:.0f} s"
    elif fault.exit_code != 0:
        fault.problem = fault.problem or f"{role} exit {fault.exit_code}"
    elif fault.exit_seconds is None or fault.exit_seconds > LEASE_TERM_MAX:
        fault.problem = fault.problem or (
            f"{role} took {fault.exit_seconds:.1f} s to stop"
            if fault.exit_seconds is not None
            else f"{role} never logged that it stopped"
        )
    if role == "leader":
        fault.takeover = soak.wait_new_leader(LEASE_GROUP, replica.name, since=fault.at)
    else:
        fault.expects_takeover = False
    soak.restart(replica)
    return fault


def stopped_line_after(replica: Replica, sent: float) -> float | None:
    """Seconds from ``sent`` (epoch) to the replica's "node ... stopped" log line, or None."""
    for line in reversed(replica.log_path.read_text(errors="replace").splitlines()):
        if f"node {replica.name} stopped" in line:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            return time.mktime(stamp.timetuple()) + stamp.microsecond / 1e6 - sent
    return None


def fault_once(soak: Soak) -> Fault:
    """Start ``runscheduler --once`` next to the replicas; it is reaped (exit code) later."""
    name = f"chaos-once-{len(soak.once_runs) + 1}"
    fault = new_fault(soak, "once", name)
    fault.expects_takeover = False
    log_path = soak.workdir / f"{name}.log"
    process = soak.scheduler(
        name, log_path, groups=soak.session_groups, env=soak.env(), extra=["--once"]
    )
    soak.once_runs.append(OnceRun(fault, process, log_path))
    fault.note = "running"
    return fault


def reap_once(soak: Soak, *, wait: float = 0.0) -> None:
    """Record the exit of finished ``--once`` processes (waiting up to ``wait`` s for each)."""
    deadline = time.monotonic() + wait
    for run in soak.once_runs:
        if run.fault.exit_code is not None or run.fault.problem:
            continue
        try:
            code = run.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            if wait:
                run.process.kill()
                run.fault.problem = f"still running {wait:.0f} s after the soak; killed"
            continue
        cut_off = ONCE_CUT_OFF.search(run.log_path.read_text(errors="replace"))
        run.fault.exit_code = code
        run.fault.note = f"exit {code}" + (" (work cut off)" if cut_off else "")
        if code != 0 and not cut_off:
            run.fault.problem = f"exit {code} without being cut off"
