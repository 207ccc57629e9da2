"""The publish job's batch change as set-based SQL: the posts' ``UPDATE`` feeds the events.

A batch of due posts (selected and locked by :mod:`publishing.services`) changes state in one
conditional ``UPDATE`` that repeats the whole condition (status, due by the database time of
the transaction, not failed), so a post cancelled or rescheduled after it was selected is left
alone and none changes twice; each changed post gets one event at the same instant with its
lateness, in the same transaction. Only the posts actually changed are returned.

How the vendors do it (:func:`change_due_posts` is the one dispatch):

- PostgreSQL: one statement, ``WITH changed AS (UPDATE ... RETURNING id, planned) INSERT INTO
  events SELECT ... FROM changed``: the posts are changed and their events written without the
  rows ever leaving the server.
- SQLite and MariaDB: the rows that still match are read (they are locked: the transaction
  holds SQLite's database, MariaDB's ``FOR UPDATE`` rows), one ``UPDATE`` changes them, and
  its row count must equal theirs or the batch rolls back; the events are one multi-row
  ``INSERT``. MariaDB has no ``UPDATE ... RETURNING``.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import F, QuerySet

from publishing.models import Post, PublishEvent


class ConcurrentChange(RuntimeError):
    """Rows changed between two statements of one batch; the batch rolls back and reruns."""


@dataclass(frozen=True)
class DueChange:
    """One batch's change: which posts, from which state to which, and what to record.

    ``condition`` is the queryset of posts the change applies to (the whole condition, with
    the due time), ``planned`` the column whose time the posts were due at, ``values`` the
    columns to set (``version`` is always added one to).
    """

    condition: QuerySet
    planned: str
    values: dict
    kind: str
    node: str
    now: datetime


def change_due_posts(change: DueChange, ids: list[int]) -> list[tuple[int, float]]:
    """Apply ``change`` to the posts in ``ids`` that still match its condition; record events.

    Return ``(post id, lateness in seconds)`` of exactly the posts changed, latest first.
    """
    if not ids:
        return []
    apply = _postgresql if connection.vendor == "postgresql" else _generic
    changed = apply(change, ids)
    return sorted(changed, key=lambda row: (-row[1], row[0]))


def _postgresql(change: DueChange, ids: list[int]) -> list[tuple[int, float]]:
    quote = connection.ops.quote_name
    # The condition's own WHERE clause (the exact lookups Django writes for the queryset),
    # on the UPDATE itself, so each row is re-checked as it is changed. The ids go as one
    # array parameter (thousands of placeholders cost more to send than the UPDATE), as
    # ``id = ANY(array)``: the planner sizes that by the array and looks each id up in the
    # primary key. (A join to ``unnest(array)`` was planned as a hash join over a sequential
    # scan of the whole table once it held 100,000 posts: 40 ms of every 2,000-post batch.)
    # The condition is wrapped in ``IS TRUE`` (the same rows pass) so that it can only be a
    # filter on those rows: as index conditions, with statistics from before a backlog fell
    # due, it made the planner walk a status index through every entry a drained backlog
    # left behind, for one post (13-17 ms a run of the publish job, until vacuum).
    query = change.condition.query
    where_sql, where_params = query.where.as_sql(
        query.get_compiler(connection=connection), connection
    )
    table = quote(Post._meta.db_table)
    events = quote(PublishEvent._meta.db_table)
    assignments = [f"{quote(Post._meta.get_field(name).column)} = %s" for name in change.values]
    event_columns = ["post_id", "post_title", "kind", "node", "at", "lateness", "detail", "data"]
    planned = quote(Post._meta.get_field(change.planned).column)
    sql = f"""
        WITH changed AS (
            UPDATE {table}
            SET {", ".join(assignments)}, "version" = "version" + 1
            WHERE {table}."id" = ANY(%s::bigint[]) AND ({where_sql}) IS TRUE
            RETURNING {table}."id", {planned} AS planned
        ), recorded AS (
            INSERT INTO {events} ({", ".join(map(quote, event_columns))})
            SELECT "id", '', %s, %s, %s,
                   EXTRACT(EPOCH FROM (%s::timestamptz - planned))::float8, '', '{{}}'::jsonb
            FROM changed
            RETURNING "post_id", "lateness"
        )
        SELECT "post_id", "lateness" FROM recorded
    """
    params = [
        *change.values.values(),
        list(ids),
        *where_params,
        change.kind,
        change.node,
        change.now,
        change.now,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _generic(change: DueChange, ids: list[int]) -> list[tuple[int, float]]:
    matching = list(change.condition.filter(pk__in=ids).values_list("pk", change.planned))
    if not matching:
        return []
    updated = change.condition.filter(pk__in=[pk for pk, _ in matching]).update(
        **change.values, version=F("version") + 1
    )
    if updated != len(matching):
        raise ConcurrentChange(
            f"{len(matching)} posts matched but {updated} were updated; rolling the batch back"
        )
    changed = [(pk, (change.now - planned).total_seconds()) for pk, planned in matching]
    PublishEvent.objects.bulk_create(
        [
            PublishEvent(
                post_id=pk, kind=change.kind, node=change.node, at=change.now, lateness=lateness
            )
            for pk, lateness in changed
        ]
    )
    return changed
