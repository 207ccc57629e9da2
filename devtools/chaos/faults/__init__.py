"""The faults the soak injects, one function per kind, and how one is injected.

Each fault draws its random numbers before it looks at the system, so the seed alone decides
the plan; what the system does in between cannot shift later faults' draws.
"""

import time
from collections.abc import Callable

from devtools.chaos.config import PUBLISHING_DISRUPTIONS
from devtools.chaos.faults.database import (
    fault_failover,
    fault_lockonly,
    fault_pgrestart,
    fault_pgrestart_busy,
    fault_rowlock,
    fault_session,
)
from devtools.chaos.faults.lease import fault_freeze_at_commit, fault_pgbouncer_restart
from devtools.chaos.faults.processes import (
    fault_doublefault,
    fault_freeze,
    fault_kill,
    fault_leaseterm,
    fault_once,
    fault_partition,
    fault_term,
)
from devtools.chaos.faults.runs import fault_catchup, fault_killrun, fault_runnow
from devtools.chaos.faults.workers import fault_workerfreeze, fault_workerkill, fault_workersession
from devtools.chaos.records import Fault
from devtools.chaos.soak import Soak

FAULTS: dict[str, Callable[[Soak], Fault]] = {
    "kill": fault_kill,
    "freeze": fault_freeze,
    "term": fault_term,
    "session": fault_session,
    "pgrestart": fault_pgrestart,
    "partition": fault_partition,
    "runnow": fault_runnow,
    "catchup": fault_catchup,
    "once": fault_once,
    "lockonly": fault_lockonly,
    "rowlock": fault_rowlock,
    "pgrestart-busy": fault_pgrestart_busy,
    "leaseterm": fault_leaseterm,
    "failover": fault_failover,
    "doublefault": fault_doublefault,
    "killrun": fault_killrun,
    # Last, so the first round (taken from the end) starts with them: a short soak runs them,
    # the lease faults first, then the worker faults.
    "workersession": fault_workersession,
    "workerfreeze": fault_workerfreeze,
    "workerkill": fault_workerkill,
    "pgbouncer-restart": fault_pgbouncer_restart,
    "freeze-at-commit": fault_freeze_at_commit,
}


FAULT_KINDS = list(FAULTS)
#: The faults of the lease-mode replicas behind PgBouncer (PostgreSQL only).
PGBOUNCER_FAULTS = frozenset({"pgbouncer-restart", "freeze-at-commit"})


def fault_kinds(db, only: frozenset[str] = frozenset()) -> list[str]:
    """The faults that apply to this database (a failover needs a standby, the PgBouncer faults
    a PgBouncer), of ``only`` when given."""
    return [
        kind
        for kind in FAULT_KINDS
        if (kind != "failover" or db.can_fail_over)
        and (kind not in PGBOUNCER_FAULTS or db.behind_pgbouncer)
        and (not only or kind in only)
    ]


def parse_fault_selection(text: str, db) -> frozenset[str]:
    """Return the fault kinds a ``--faults`` value names (comma-separated; empty: all).

    Raise ValueError saying what is wrong when a name is unknown or applies to no fault on
    this database.
    """
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    unknown = sorted(names - set(FAULT_KINDS))
    if unknown:
        raise ValueError(
            f"unknown fault kind(s) {', '.join(unknown)}; choose from {', '.join(FAULT_KINDS)}"
        )
    if names and not fault_kinds(db, names):
        raise ValueError(
            f"none of {', '.join(sorted(names))} applies to {db.label}; choose from"
            f" {', '.join(fault_kinds(db))}"
        )
    return names


def inject(soak: Soak, kind: str) -> Fault:
    fault = FAULTS[kind](soak)
    fault.ended = time.monotonic()
    if kind in PUBLISHING_DISRUPTIONS and not fault.skipped:
        fault.disrupts_publishing = True
    return fault
