"""Whether a node's lock session is waiting in the database server for a group's lock."""

from django.db import connection

from coordination.conf import settings
from coordination.keys import normalize_key, split_key
from coordination.locks.mysql import lock_name


def waits_for_lock(node: str, group: str) -> bool:
    """Return True if ``node``'s lock session is waiting in the server for ``group``'s lock
    (PostgreSQL: an ungranted advisory lock; MariaDB: a ``GET_LOCK`` in progress)."""
    key = normalize_key(settings.group_key(group))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            classid, objid = split_key(key)
            cursor.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = %s"
                " AND l.classid::bigint = %s AND l.objid::bigint = %s",
                (f"{node}/lock", classid, objid),
            )
        else:
            cursor.execute(
                "SELECT count(*) FROM information_schema.PROCESSLIST p"
                " JOIN coordination_nodesession s ON s.connection_id = p.ID AND s.client = p.HOST"
                " WHERE s.node = %s AND s.role = 'lock' AND p.INFO LIKE %s",
                (node, f"%GET_LOCK('{lock_name(connection.settings_dict['NAME'], key)}'%"),
            )
        return cursor.fetchone()[0] > 0
