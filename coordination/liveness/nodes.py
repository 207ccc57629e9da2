"""A node's own row: registering (refusing a name a live process uses), stopping, and
marking another process fenced.
"""

import os
import socket
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now

from coordination import nodesessions
from coordination.conf import settings
from coordination.liveness.views import NodeIdentity
from coordination.models import Node

#: How long a node that stopped (or stopped heartbeating) stays listed; older ones are folded
#: away (``fold_stopped_nodes``), their terms kept in the leadership history.
STOPPED_NODE_RETENTION = timedelta(days=7)


class NodeNameInUse(Exception):
    """Another live process already runs under this node name."""


def _lease() -> timedelta:
    return timedelta(seconds=float(settings.LEASE))


def register_node(
    identity: NodeIdentity,
    *,
    groups,
    declared_jobs,
    fingerprint: str,
    role: str = Node.Role.SCHEDULER,
) -> None:
    """Create or take over this node's row; refuse a name a live process still uses."""
    with transaction.atomic():
        existing = (
            Node.objects.select_for_update()
            .filter(name=identity.name)
            .annotate(db_now=Now())
            .first()
        )
        if (
            existing is not None
            and existing.instance != identity.instance
            and existing.stopped_at is None
            and existing.last_heartbeat >= existing.db_now - _lease()
            and not (role == Node.Role.WORKER and process_gone(existing.host, existing.pid))
        ):
            age = (existing.db_now - existing.last_heartbeat).total_seconds()
            raise NodeNameInUse(
                f"node name {identity.name!r} is in use by pid {existing.pid} on {existing.host} "
                f"(last heartbeat {age:.1f}s ago). Give each scheduler its own --node-name "
                f"(or INSTATIC_NODE_NAME), or wait {settings.LEASE}s if that process is gone."
            )
        Node.objects.update_or_create(
            name=identity.name,
            defaults={
                "instance": identity.instance,
                "host": identity.host,
                "pid": identity.pid,
                "groups": list(groups),
                "declared_jobs": sorted(declared_jobs),
                "jobs_fingerprint": fingerprint,
                "role": role,
                "started_at": Now(),
                "last_heartbeat": Now(),
                "stopped_at": None,
            },
        )
    # MySQL: the connection records of this name's earlier processes go (none of them is
    # live, or the name would have been refused); this process's own are recorded from now.
    nodesessions.forget(node=identity.name, keep=identity.instance)
    nodesessions.record_connections(identity)


def process_gone(host: str, pid: int) -> bool:
    """Return True if ``pid`` on ``host`` is this host's and no such process runs.

    A worker process that its pool starts again after a SIGKILL takes over its name at once:
    the dead process's heartbeat is still fresh, but on this host it is plainly gone (a
    scheduler still waits for the lease: its name may be reused from another host).
    """
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def mark_stopped(identity: NodeIdentity) -> None:
    nodesessions.stop_recording()
    Node.objects.filter(name=identity.name, instance=identity.instance).update(
        stopped_at=Now(), last_heartbeat=Now()
    )
    nodesessions.forget(instance=identity.instance)


def mark_fenced(instance: str) -> None:
    """Mark another process ``instance`` stopped once its sessions were ended (a worker
    process that stopped heartbeating with work in hand), so it is fenced only once."""
    Node.objects.filter(instance=instance, stopped_at__isnull=True).update(stopped_at=Now())
    nodesessions.forget(instance=instance)


def fold_stopped_nodes(*, older_than: timedelta = STOPPED_NODE_RETENTION) -> list[str]:
    """Delete the rows of nodes that stopped, or last heartbeated, more than ``older_than``
    ago; return their names.

    A node is one row per name, so a name in use again is live and kept. The leadership
    history names its nodes as text (``LeadershipTerm.node``) and keeps them; a run of a
    folded node is a run of a dead node, as before.
    """
    cutoff = Now() - older_than
    old = Node.objects.filter(last_heartbeat__lt=cutoff).filter(
        Q(stopped_at__isnull=True) | Q(stopped_at__lt=cutoff)
    )
    names = list(old.values_list("name", flat=True))
    if names:
        Node.objects.filter(name__in=names, last_heartbeat__lt=cutoff).delete()
    return names
