"""What every process of the engine does as it starts, a scheduler's or a worker's: name its
database sessions after its node, and fingerprint the jobs it declares.

Below both the scheduler (``scheduler.py``) and the worker process (``workers/process.py``),
which each register a node and open the same kind of labelled sessions.
"""

import hashlib

from django.db import connections

from coordination.conf import settings
from coordination.liveness import work_application_name
from coordination.locks.postgresql import connection_options
from coordination.registry import JobRegistry


def jobs_fingerprint(names: list[str], registry: JobRegistry) -> str:
    """Return a short hash of the declared jobs and schedules, to spot nodes that disagree."""
    text = "\n".join(f"{n}={registry.get(n).fingerprint}" for n in sorted(names))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def label_database_sessions(node_name: str) -> None:
    """Name this process's PostgreSQL sessions after the node and give them liveness probes.

    Every thread opens its own Django connection from these settings, so a follower can find
    (and end) a frozen leader's work sessions by name. On MySQL they get the lock connection's
    connect timeout (an operator's own ``connect_timeout`` wins).
    """
    settings_dict = connections.settings["default"]
    if settings_dict["ENGINE"].endswith("postgresql"):
        # The lock connection's liveness probes too: a partition must not leave a job thread
        # (or shutdown) blocked on a dead socket for the kernel's default of minutes.
        settings_dict.setdefault("OPTIONS", {}).update(
            connection_options(work_application_name(node_name))
        )
    elif settings_dict["ENGINE"].endswith("mysql"):
        # A reconnect to an unreachable host (shutdown's last write among them) gives up
        # within half the lease, not after the kernel's minutes of connect retries.
        settings_dict.setdefault("OPTIONS", {}).setdefault(
            "connect_timeout", max(2, int(float(settings.LEASE) / 2))
        )
