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
}


FAULT_KINDS = list(FAULTS)


def fault_kinds(db) -> list[str]:
    """The faults that apply to this database (a failover needs a standby)."""
    return [kind for kind in FAULT_KINDS if kind != "failover" or db.can_fail_over]


def inject(soak: Soak, kind: str) -> Fault:
    fault = FAULTS[kind](soak)
    fault.ended = time.monotonic()
    if kind in PUBLISHING_DISRUPTIONS and not fault.skipped:
        fault.disrupts_publishing = True
    return fault
