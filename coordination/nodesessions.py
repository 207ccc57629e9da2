"""A scheduler's own MySQL/MariaDB connections: recorded when opened, killed at fencing.

PostgreSQL labels every session with ``application_name`` (``<node>/lock``, ``<node>/work``), so
a follower that removes a frozen leader finds its sessions in ``pg_stat_activity``. MySQL has
no label a client can set, so a scheduler process records the ``CONNECTION_ID()`` of each
connection it opens in ``coordination_nodesession`` (one ``INSERT`` per connection, which lives
as long as its thread), and the fencer ``KILL``s them: the frozen leader's open transactions roll
back and its row locks go, exactly as on PostgreSQL.

A recorded id is only killed while the server still shows it with the client address it had
when it was recorded: ids start again from 1 after a server restart, and a stale row must
never end another process's connection.
"""

import logging
import time

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection
from django.db.backends.signals import connection_created

from coordination.models import NodeSession

logger = logging.getLogger(__name__)

ER_NO_SUCH_THREAD = 1094
#: How long a fencer waits for killed connections to be gone (their transactions rolled back).
KILL_WAIT = 5.0

_RECORD_SQL = (
    "INSERT INTO coordination_nodesession (node, instance, role, connection_id, client, opened_at)"
    " SELECT %s, %s, %s, ID, COALESCE(HOST, ''), NOW(6) FROM information_schema.PROCESSLIST"
    " WHERE ID = CONNECTION_ID()"
)

#: The identity of this scheduler process, once registered (``None`` in other processes).
_identity = None


def record_connections(identity) -> None:
    """Record this thread's connection and every connection this process opens from now on.

    Called when the node registers; idempotent. Only MySQL needs it: elsewhere it does nothing.
    """
    global _identity
    if connection.vendor != "mysql":
        return
    _identity = identity
    connection_created.connect(_on_connection_created, dispatch_uid="instatic-node-sessions")
    _record_django_connection(connection)


def stop_recording() -> None:
    """Record no more connections (the node stopped; the process may go on, as in tests)."""
    global _identity
    _identity = None
    connection_created.disconnect(dispatch_uid="instatic-node-sessions")


def record_raw(conn, *, role: str, identity=None) -> None:
    """Record a DB-API connection opened outside Django (the lock connection) as this
    process's, or as ``identity``'s when given."""
    identity = identity or _identity
    if identity is None:
        return
    with conn.cursor() as cursor:
        cursor.execute(_RECORD_SQL, (identity.name, identity.instance, role))


def _on_connection_created(sender, connection, **kwargs) -> None:
    if connection.alias == DEFAULT_DB_ALIAS and connection.vendor == "mysql":
        _record_django_connection(connection)


def _record_django_connection(wrapper) -> None:
    """Record a work connection once; one that cannot be recorded is closed (fail closed)."""
    if _identity is None or wrapper.connection is None:
        return
    raw = wrapper.connection
    if getattr(wrapper, "_instatic_recorded", None) is raw:
        return
    try:
        with raw.cursor() as cursor:
            cursor.execute(_RECORD_SQL, (_identity.name, _identity.instance, NodeSession.Role.WORK))
    except Exception:
        # A connection fencing could not end must not do the node's work.
        wrapper.close()
        raise
    wrapper._instatic_recorded = raw


def forget(*, instance: str | None = None, node: str | None = None, keep: str = "") -> None:
    """Delete the records of ``instance`` (a stopped process) or of ``node``'s other processes."""
    if connection.vendor != "mysql":
        return
    rows = NodeSession.objects.all()
    if instance is not None:
        rows = rows.filter(instance=instance)
    if node is not None:
        rows = rows.filter(node=node).exclude(instance=keep)
    rows.delete()


def kill(instance: str, *, roles=(NodeSession.Role.WORK,)) -> int:
    """``KILL`` the live recorded connections of ``instance``; return how many were killed.

    Waits (at most ``KILL_WAIT``) until they are gone, so their transactions have rolled back
    and their row locks are free when this returns, as ``pg_terminate_backend(pid, timeout)``
    does on PostgreSQL.
    """
    recorded = list(
        NodeSession.objects.filter(instance=instance, role__in=list(roles)).values_list(
            "connection_id", "client"
        )
    )
    if not recorded:
        return 0
    killed = []
    with connection.cursor() as cursor:
        for connection_id, client in _live(cursor, recorded):
            try:
                cursor.execute(f"KILL CONNECTION {int(connection_id)}")
            except DatabaseError as exc:
                if error_code(exc) == ER_NO_SUCH_THREAD:
                    continue  # it ended on its own just now
                raise
            killed.append((connection_id, client))
        deadline = time.monotonic() + KILL_WAIT
        while killed and _live(cursor, killed):
            if time.monotonic() > deadline:
                logger.warning(
                    "killed %d connection(s) of node instance %s, but some were still there "
                    "after %ss",
                    len(killed),
                    instance,
                    KILL_WAIT,
                )
                break
            time.sleep(0.02)
    NodeSession.objects.filter(instance=instance, role__in=list(roles)).delete()
    return len(killed)


def _live(cursor, recorded) -> list[tuple[int, str]]:
    """Return those of ``recorded`` (id, client) the server still shows for that client."""
    wanted = dict(recorded)
    placeholders = ", ".join(["%s"] * len(wanted))
    cursor.execute(
        f"SELECT ID, COALESCE(HOST, '') FROM information_schema.PROCESSLIST"
        f" WHERE ID IN ({placeholders}) AND ID <> CONNECTION_ID()",
        list(wanted),
    )
    return [(row[0], row[1]) for row in cursor.fetchall() if wanted.get(row[0]) == row[1]]


def error_code(exc: BaseException) -> int | None:
    """Return the server's error number of a driver error (or of the Django error around one)."""
    for candidate in (exc, exc.__cause__):
        args = getattr(candidate, "args", ())
        if args and isinstance(args[0], int):
            return args[0]
    return None


def live_sessions(instances) -> dict[str, tuple[bool, bool, bool]]:
    """Return, per instance: whether it recorded any connection, whether the server still shows
    one of its lock connections, and whether it still shows any of its connections.

    A recorded id counts only while the server shows it for the client address it had, as
    for ``kill()``.
    """
    rows = list(
        NodeSession.objects.filter(instance__in=list(instances)).values_list(
            "instance", "role", "connection_id", "client"
        )
    )
    found = {instance: (False, False, False) for instance in instances}
    if not rows:
        return found
    ids = sorted({row[2] for row in rows})
    with connection.cursor() as cursor:
        # Pairs, not a map by id: an old record may carry an id the server now gives another
        # client (ids start again after a restart).
        cursor.execute(
            "SELECT ID, COALESCE(HOST, '') FROM information_schema.PROCESSLIST"
            f" WHERE ID IN ({', '.join(['%s'] * len(ids))}) AND ID <> CONNECTION_ID()",
            ids,
        )
        live = {(row[0], row[1]) for row in cursor.fetchall()}
    for instance, role, connection_id, client in rows:
        _, lock, anything = found[instance]
        up = (connection_id, client) in live
        found[instance] = (True, lock or (up and role == NodeSession.Role.LOCK), anything or up)
    return found


def server_started_at(cursor):
    """Return when the MySQL server started, and its time now (naive, the server's zone)."""
    cursor.execute(
        "SELECT NOW(6) - INTERVAL VARIABLE_VALUE SECOND, NOW(6)"
        " FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'"
    )
    return cursor.fetchone()
