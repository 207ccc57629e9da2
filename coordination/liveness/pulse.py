"""The heartbeat statement: write this node's heartbeat and read the leaders (and, on MySQL,
the wake-up counters) in one round trip where the vendor allows.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.models.functions import Now
from django.utils import timezone

from coordination.liveness.views import LeaderView, NodeIdentity
from coordination.models import Leadership, Node


@dataclass(frozen=True)
class Pulse:
    """What one heartbeat wrote and read."""

    now: datetime | None  # the database's time (None: the row was not written)
    written: bool  # False: this node's row was missing or taken by another process
    leaders: list[LeaderView] = field(default_factory=list)
    #: Group -> wake-up counter (MySQL: bumped when work becomes due sooner).
    wakeups: dict[str, int] = field(default_factory=dict)


_PULSE_POSTGRESQL = """
WITH beat AS (
    UPDATE coordination_node SET last_heartbeat = STATEMENT_TIMESTAMP()
    WHERE name = %s AND instance = %s RETURNING 1
)
SELECT STATEMENT_TIMESTAMP(), (SELECT count(*) FROM beat),
       l."group", l.node, l.instance, l.key, l.session_id,
       n.instance, n.last_heartbeat, n.stopped_at
FROM (SELECT 1) AS one
LEFT JOIN coordination_leadership l ON TRUE
LEFT JOIN coordination_node n ON n.name = l.node
"""


# MariaDB has no UPDATE ... RETURNING, but INSERT ... SELECT ... ON DUPLICATE KEY UPDATE ...
# RETURNING is one statement: the SELECT finds this process's own row (none if it is missing
# or taken), the duplicate key turns the insert into the heartbeat's update, and RETURNING's
# scalar subqueries read the leaders and the wake-up counters in the same round trip.
_NODE_COLUMNS = ", ".join(f"`{field.column}`" for field in Node._meta.concrete_fields)


_PULSE_MYSQL = f"""
INSERT INTO coordination_node ({_NODE_COLUMNS})
SELECT {_NODE_COLUMNS} FROM coordination_node WHERE name = %s AND instance = %s
ON DUPLICATE KEY UPDATE last_heartbeat = NOW(6)
RETURNING NOW(6),
    (SELECT JSON_ARRAYAGG(JSON_ARRAY(l.`group`, l.node, l.instance, l.`key`, l.session_id,
                                     n.instance, n.last_heartbeat, n.stopped_at))
     FROM coordination_leadership l LEFT JOIN coordination_node n ON n.name = l.node),
    (SELECT JSON_OBJECTAGG(w.`group`, w.seq) FROM coordination_wakeup w)
"""


def pulse(identity: NodeIdentity) -> Pulse:
    """Write the heartbeat and read the leaders (one statement where the vendor allows)."""
    reader = _PULSES.get(connection.vendor, _pulse_orm)
    return reader(identity)


def _pulse_postgresql(identity: NodeIdentity) -> Pulse:
    with connection.cursor() as cursor:
        cursor.execute(_PULSE_POSTGRESQL, (identity.name, identity.instance))
        rows = cursor.fetchall()
    now, written = rows[0][0], bool(rows[0][1])
    leaders = [LeaderView(*row[2:]) for row in rows if row[2] is not None]
    return Pulse(now, written, leaders)


def _pulse_mysql(identity: NodeIdentity) -> Pulse:
    with connection.cursor() as cursor:
        cursor.execute(_PULSE_MYSQL, (identity.name, identity.instance))
        row = cursor.fetchone()
    if row is None:
        return Pulse(None, False)
    now, leaders_json, wakeups_json = row
    leaders = [
        LeaderView(
            group=group,
            node=node,
            instance=instance,
            key=key,
            session_id=session_id,
            node_instance=node_instance,
            last_heartbeat=_mysql_datetime(last_heartbeat),
            stopped_at=_mysql_datetime(stopped_at),
        )
        for group, node, instance, key, session_id, node_instance, last_heartbeat, stopped_at in (
            json.loads(leaders_json) if leaders_json else []
        )
    ]
    wakeups = {k: int(v) for k, v in json.loads(wakeups_json).items()} if wakeups_json else {}
    return Pulse(_mysql_datetime(now), True, leaders, wakeups)


def _mysql_datetime(value) -> datetime | None:
    """Make a raw SQL value (naive, or text in JSON) an aware datetime, as Django does."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if timezone.is_naive(value):
        value = timezone.make_aware(value, connection.timezone)
    return value


def _pulse_orm(identity: NodeIdentity) -> Pulse:
    written = bool(
        Node.objects.filter(name=identity.name, instance=identity.instance).update(
            last_heartbeat=Now()
        )
    )
    nodes = {n.name: n for n in Node.objects.annotate(db_now=Now())}
    now = next(iter(nodes.values())).db_now if nodes else None
    leaders = []
    for row in Leadership.objects.all():
        node = nodes.get(row.node)
        leaders.append(
            LeaderView(
                group=row.group,
                node=row.node,
                instance=row.instance,
                key=row.key,
                session_id=row.session_id,
                node_instance=node.instance if node else None,
                last_heartbeat=node.last_heartbeat if node else None,
                stopped_at=node.stopped_at if node else None,
            )
        )
    return Pulse(now, written, leaders)


_PULSES = {"postgresql": _pulse_postgresql, "mysql": _pulse_mysql}
