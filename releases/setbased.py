"""A release's change of its posts as set-based SQL: one kind of change of every item's post.

The posts are named by a subquery of the release's items, never sent as 10,000 parameters,
and each changed post gets its event in the same transaction, as the publish job's batches do
(:mod:`publishing.setbased`, whose counters this shares).
"""

import json
from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from publishing.models import Post, PublishEvent
from publishing.setbased import counted, counted_fields
from releases.models import ReleaseItem


@dataclass(frozen=True)
class ReleaseChange:
    """One kind of change of a release's posts (all locked and checked already).

    The posts of release ``release_id``'s items of ``action`` change from one of
    ``from_statuses`` by ``values`` (``counters`` added one to, as in :class:`DueChange`);
    each gets one ``kind`` event by ``node`` or ``user_id`` at ``now``, with ``lateness`` and
    ``data`` (the event's ``version`` is the one the change wrote).
    """

    release_id: int
    action: str
    from_statuses: tuple[str, ...]
    values: dict
    kind: str
    node: str
    user_id: int | None
    now: datetime
    lateness: float | None
    data: dict
    counters: tuple[str, ...] = ("version",)


def change_release_posts(change: ReleaseChange) -> int:
    """Apply ``change`` and record its events; return how many posts it changed.

    A release's caller compares the count with its items: any post not changed rolls the
    whole release back. The posts are named by a subquery of the release's items, never sent
    as 10,000 parameters. PostgreSQL: one statement, the posts' ``UPDATE ... RETURNING``
    feeding the events' ``INSERT`` (a release sends no row back). The others: the rows'
    versions read, one ``UPDATE``, one multi-row ``INSERT``.
    """
    if connection.vendor == "postgresql":
        return _release_postgresql(change)
    return _release_generic(change)


def _release_postgresql(change: ReleaseChange) -> int:
    quote = connection.ops.quote_name
    table = quote(Post._meta.db_table)
    events = quote(PublishEvent._meta.db_table)
    items = quote(ReleaseItem._meta.db_table)
    assignments = [f"{quote(Post._meta.get_field(name).column)} = %s" for name in change.values]
    # The status is a filter on the items' posts (IS TRUE), never an index condition: see
    # _postgresql on the status index a drained backlog leaves behind.
    sql = f"""
        WITH changed AS (
            UPDATE {table}
            SET {", ".join(assignments)}, {counted(change.counters)}
            WHERE "id" IN (
                SELECT "post_id" FROM {items} WHERE "release_id" = %s AND "action" = %s
            ) AND ("status" = ANY(%s::varchar[])) IS TRUE
            RETURNING "id", "version"
        ), recorded AS (
            INSERT INTO {events}
                ("post_id", "post_title", "kind", "node", "user_id", "at", "lateness", "detail",
                 "data")
            SELECT "id", '', %s, %s, %s::integer, %s::timestamptz, %s::float8, '',
                   %s::jsonb || jsonb_build_object('version', "version")
            FROM changed
            RETURNING 1
        )
        SELECT count(*) FROM recorded
    """
    params = [
        *change.values.values(),
        change.release_id,
        change.action,
        list(change.from_statuses),
        change.kind,
        change.node,
        change.user_id,
        change.now,
        change.lateness,
        json.dumps(change.data),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def _release_generic(change: ReleaseChange) -> int:
    items = ReleaseItem.objects.filter(release_id=change.release_id, action=change.action)
    matching = Post.objects.filter(pk__in=items.values("post_id"), status__in=change.from_statuses)
    versions = dict(matching.values_list("pk", "version"))
    updated = matching.filter(pk__in=list(versions)).update(
        **change.values, **counted_fields(change.counters)
    )
    PublishEvent.objects.bulk_create(
        [
            PublishEvent(
                post_id=pk,
                kind=change.kind,
                node=change.node,
                user_id=change.user_id,
                at=change.now,
                lateness=change.lateness,
                data={**change.data, "version": version + 1},
            )
            for pk, version in versions.items()
        ],
        batch_size=2000,
    )
    return updated
