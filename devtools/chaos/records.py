"""What the soak keeps about its processes and faults, for the faults, invariants and report."""

import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from devtools.chaos.pressure import cpu_stall_total


@dataclass
class Replica:
    """One ``runscheduler`` replica: its slot (``index``), which start of it this is, its log."""

    index: int
    incarnation: int
    process: subprocess.Popen
    log_path: Path
    lease: bool = False  # runs LEASE_GROUP in lease lock mode instead of the session groups
    deliberately_stopped: bool = False
    worker_only: bool = False  # ``runworker``: worker processes and no scheduler
    workers: int = 0  # how many worker processes it keeps running (its children)

    @property
    def name(self) -> str:
        return replica_name(
            self.index, self.incarnation, lease=self.lease, worker_only=self.worker_only
        )

    def alive(self) -> bool:
        return self.process.poll() is None


def replica_name(index: int, incarnation: int, *, lease: bool, worker_only: bool = False) -> str:
    """Return the node name a replica runs under (a restart is a new incarnation, a new node)."""
    kind = "lease-" if lease else "workers-" if worker_only else ""
    return f"chaos-{kind}{index}.{incarnation}"


@dataclass
class Fault:
    """One injected fault; ``takeover`` is the time until work resumed (None: it did not)."""

    kind: str
    target: str
    at: float = field(default_factory=time.monotonic)
    wall: float = field(default_factory=time.time)  # to match log lines to the fault
    ended: float | None = None
    takeover: float | None = None
    expects_takeover: bool = True
    note: str = ""
    problem: str = ""  # what went wrong, shown first in the table
    account: list[str] = field(default_factory=list)  # the nodes' log lines on a problem
    # Linux's CPU stall total (microseconds) when the fault was made: its account says how
    # starved of CPU the machine was over it (devtools/chaos/pressure.py)
    cpu_stall: int | None = field(default_factory=cpu_stall_total)
    exit_code: int | None = None
    exit_seconds: float | None = None
    rate: float | None = None  # publish runs per second (rowlock)
    # seconds from the kill (doublefault, killrun), the freeze (freeze-at-commit) or the restart
    # (pgbouncer-restart) to the recovery, by the database clock
    lead_gap: float | None = None
    disrupts_publishing: bool = False  # may leave publishing leaderless (set by inject)
    post_id: int | None = None  # the post a rowlock held
    slot: datetime | None = None  # the LEASE_JOB slot a freeze-at-commit froze mid-commit

    def skip(self, why: str) -> None:
        self.note = f"skipped: {why}"
        self.expects_takeover = False

    @property
    def skipped(self) -> bool:
        return self.note.startswith("skipped")

    def ended_wall(self) -> float:
        """When the fault's work ended (a takeover waited for, a process restarted), as epoch
        seconds like ``wall``."""
        return self.wall + ((self.ended or self.at) - self.at)


@dataclass
class OnceRun:
    """A ``runscheduler --once`` process, reaped when it exits."""

    fault: Fault
    process: subprocess.Popen
    log_path: Path


@dataclass
class ReleaseRecord:
    """A release the release stream made: its items as they were added (post id -> change)
    and its time as last scheduled (database clock; None: never scheduled, left a draft)."""

    pk: int
    name: str
    posts: dict[int, str] = field(default_factory=dict)
    release_at: datetime | None = None
    postponed: int = 0  # times a quiet spell moved it


class WorkerTarget(NamedTuple):
    """A worker process a worker fault aims at: its node name, pid, the replica (its parent),
    and the run it has in hand (None: idle)."""

    name: str
    pid: int
    parent: Replica
    run_id: int | None
    job: str | None


class SlowRun(NamedTuple):
    """A run of SLOW_JOB in progress on the plugins leader, with the leader's lock session."""

    id: int
    node: str
    lock_pid: int
