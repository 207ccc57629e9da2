"""This scheduler process's own health: its node row's heartbeat, by the database clock.

Answered by ``runscheduler --metrics-port``'s ``/healthz`` (``coordination.metrics_server``),
so a container health check works when only the scheduler runs.
"""

import os
import socket

from django.db.models.functions import Now

from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS
from coordination.models import Node


def node_health(*, node_name: str | None = None, problems=()) -> tuple[bool, dict]:
    """Return (healthy, details) for this process's own node row.

    Healthy means the node is registered, not stopped, and heartbeated within the lease, by
    the database clock, and the process reports no ``problems`` of its own (a crashed group
    loop heartbeats happily but leads nothing). Without ``node_name`` the row is found by
    this host name and pid, the identity every scheduler process registers with.
    """
    if problems:
        return False, {"status": "unavailable", "reason": "; ".join(problems)}
    rows = Node.objects.filter(stopped_at__isnull=True)
    if node_name:
        rows = rows.filter(name=node_name)
    else:
        rows = rows.filter(host=socket.gethostname(), pid=os.getpid())
    try:
        node = rows.annotate(db_now=Now()).order_by("-last_heartbeat").first()
    except DATABASE_ERRORS as exc:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return False, {"status": "unavailable", "reason": f"database: {text}"}
    if node is None:
        return False, {
            "status": "unavailable",
            "reason": "this scheduler node is not registered (starting up, or stopped)",
        }
    lease = float(settings.LEASE)
    age = (node.db_now - node.last_heartbeat).total_seconds()
    if age > lease:
        return False, {
            "status": "unavailable",
            "reason": f"node {node.name} last heartbeated {age:.1f}s ago (lease {lease:g}s)",
            "node": node.name,
            "heartbeat_age": round(age, 3),
        }
    return True, {"status": "ok", "node": node.name, "heartbeat_age": round(age, 3)}
