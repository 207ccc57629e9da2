"""The publish job's batch writes as set-based SQL: the posts' ``UPDATE`` feeds the events.

A batch of due posts (selected and locked by :mod:`publishing.batches`) changes state in one
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

A change that takes posts down (the unpublish batch) also sets aside their pending revisions
(:class:`SetAside`) in the same statement on PostgreSQL, in two more on the others: a revision
written for the version that went down must not go live over whatever is published next.

The revision switch's writes are set-based too, on every vendor alike: one conditional
``UPDATE`` of the due revisions (:func:`change_due_revisions`), one that copies their content
onto their posts (:func:`copy_revisions_onto_posts`) and one multi-row ``INSERT`` of their
events (:func:`record_revision_events`). Other apps' set-based changes of posts (a release
going out) use :func:`counted` and :func:`counted_fields` for the counters they move on.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import F, OuterRef, QuerySet, Subquery

from publishing.models import Post, PostRevision, PublishEvent


class ConcurrentChange(RuntimeError):
    """Rows changed between two statements of one batch; the batch rolls back and reruns."""


@dataclass(frozen=True)
class SetAside:
    """Which revisions of each changed post the change supersedes (``statuses``), and why.

    Each gets ``note`` and one "Revision superseded" event, closed by the change's editor
    (``updated_by``) at its time.
    """

    statuses: tuple[str, ...]
    note: str


@dataclass(frozen=True)
class DueChange:
    """One batch's change: which posts, from which state to which, and what to record.

    ``condition`` is the queryset of posts the change applies to (the whole condition, with
    the due time), ``planned`` the column whose time the posts were due at, ``values`` the
    columns to set, ``counters`` the columns added one to (``version`` always; a takedown's
    ``preview_generation`` too, which ends its preview links), ``set_aside`` the changed
    posts' revisions to supersede with it.
    """

    condition: QuerySet
    planned: str
    values: dict
    kind: str
    node: str
    now: datetime
    set_aside: SetAside | None = None
    counters: tuple[str, ...] = ("version",)

    @property
    def closed_by(self) -> str:
        return self.values.get("updated_by", "")[:200]


#: What a change that takes posts down adds one to: their preview links end with it.
TAKEDOWN_COUNTERS = ("version", "preview_generation")


def counted(counters: tuple[str, ...]) -> str:
    """Return the SQL that adds one to each of ``counters`` (post fields)."""
    quote = connection.ops.quote_name
    columns = [quote(Post._meta.get_field(name).column) for name in counters]
    return ", ".join(f"{column} = {column} + 1" for column in columns)


def counted_fields(counters: tuple[str, ...]) -> dict:
    return {name: F(name) + 1 for name in counters}


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
    # The array goes as its text, which the cast reads: psycopg would quote a list one item
    # at a time in Python (20 ms for a 10,000-post batch, against 1 ms for the join).
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
    set_aside = _set_aside_sql() if change.set_aside else ""
    sql = f"""
        WITH changed AS (
            UPDATE {table}
            SET {", ".join(assignments)}, {counted(change.counters)}
            WHERE {table}."id" = ANY(%s::bigint[]) AND ({where_sql}) IS TRUE
            RETURNING {table}."id", {planned} AS planned, {table}."version"
        ), recorded AS (
            INSERT INTO {events} ({", ".join(map(quote, event_columns))})
            SELECT "id", '', %s, %s, %s,
                   EXTRACT(EPOCH FROM (%s::timestamptz - planned))::float8, '',
                   jsonb_build_object('version', "version")
            FROM changed
            RETURNING "post_id", "lateness"
        ){set_aside}
        SELECT "post_id", "lateness" FROM recorded
    """
    params = [
        *change.values.values(),
        "{" + ",".join(map(str, ids)) + "}",
        *where_params,
        change.kind,
        change.node,
        change.now,
        change.now,
    ]
    if change.set_aside:
        params += _set_aside_params(change)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _set_aside_sql() -> str:
    """Return the CTEs that supersede the changed posts' revisions and record why (PostgreSQL).

    The revisions table joined to itself: ``RETURNING`` of an ``UPDATE`` gives the new values,
    the join's side the status each revision had, which its event keeps.
    """
    quote = connection.ops.quote_name
    revisions = quote(PostRevision._meta.db_table)
    events = quote(PublishEvent._meta.db_table)
    return f"""
        , set_aside AS (
            UPDATE {revisions} AS revision
            SET "status" = %s, "closed_at" = %s, "closed_by" = %s, "note" = %s
            FROM {revisions} AS was
            WHERE was."id" = revision."id"
              AND was."post_id" IN (SELECT "id" FROM changed)
              AND was."status" = ANY(%s::varchar[])
            RETURNING revision."post_id", revision."number", was."status"
        ), noted AS (
            INSERT INTO {events}
                ("post_id", "post_title", "kind", "node", "at", "lateness", "detail", "data")
            SELECT "post_id", '', %s, %s, %s, NULL, '',
                   jsonb_build_object(
                       'revision', "number", 'revision_status', "status", 'note', %s::text
                   )
            FROM set_aside
        )"""


def _set_aside_params(change: DueChange) -> list:
    set_aside = change.set_aside
    return [
        PostRevision.Status.SUPERSEDED,
        change.now,
        change.closed_by,
        set_aside.note[:300],
        list(set_aside.statuses),
        PublishEvent.Kind.REVISION_SUPERSEDED,
        change.node,
        change.now,
        set_aside.note,
    ]


def _generic(change: DueChange, ids: list[int]) -> list[tuple[int, float]]:
    rows = list(change.condition.filter(pk__in=ids).values_list("pk", change.planned, "version"))
    if not rows:
        return []
    matching = [(pk, planned) for pk, planned, _ in rows]
    versions = {pk: version + 1 for pk, _, version in rows}
    updated = change.condition.filter(pk__in=[pk for pk, _ in matching]).update(
        **change.values, **counted_fields(change.counters)
    )
    if updated != len(matching):
        raise ConcurrentChange(
            f"{len(matching)} posts matched but {updated} were updated; rolling the batch back"
        )
    changed = [(pk, (change.now - planned).total_seconds()) for pk, planned in matching]
    PublishEvent.objects.bulk_create(
        [
            PublishEvent(
                post_id=pk,
                kind=change.kind,
                node=change.node,
                at=change.now,
                lateness=lateness,
                data={"version": versions[pk]},
            )
            for pk, lateness in changed
        ]
    )
    if change.set_aside:
        _set_aside_generic(change, [pk for pk, _ in changed])
    return changed


def _set_aside_generic(change: DueChange, post_ids: list[int]) -> None:
    set_aside_revisions(
        post_ids, change.set_aside, now=change.now, node=change.node, closed_by=change.closed_by
    )


def set_aside_revisions(
    post_ids: list[int], set_aside: SetAside, *, now: datetime, node: str, closed_by: str
) -> None:
    """Supersede the revisions of ``post_ids`` in ``set_aside.statuses`` and record each.

    Their posts' rows are locked (every revision write locks its post first), so the
    revisions read here are the ones updated.
    """
    pending = PostRevision.objects.filter(post_id__in=post_ids, status__in=set_aside.statuses)
    rows = list(pending.values_list("pk", "post_id", "number", "status"))
    if not rows:
        return
    PostRevision.objects.filter(pk__in=[pk for pk, *_ in rows]).update(
        status=PostRevision.Status.SUPERSEDED,
        closed_at=now,
        closed_by=closed_by,
        note=set_aside.note[:300],
    )
    PublishEvent.objects.bulk_create(
        [
            PublishEvent(
                post_id=post_id,
                kind=PublishEvent.Kind.REVISION_SUPERSEDED,
                node=node,
                at=now,
                data={"revision": number, "revision_status": status, "note": set_aside.note},
            )
            for _, post_id, number, status in rows
        ]
    )


def change_due_revisions(condition: QuerySet, ids: list[int], **values) -> list[int]:
    """Apply ``values`` to the revisions in ``ids`` still matching ``condition``; return them."""
    matching = list(condition.filter(pk__in=ids).values_list("pk", flat=True))
    if not matching:
        return []
    updated = condition.filter(pk__in=matching).update(**values)
    if updated != len(matching):
        raise ConcurrentChange(
            f"{len(matching)} revisions matched but {updated} were updated; rolling back"
        )
    return matching


def copy_revisions_onto_posts(
    revision_ids: list[int], post_ids: list[int], *, now: datetime, updated_by: str
) -> None:
    """Copy each switched revision's content onto its (locked, live) post in one UPDATE."""
    revision = PostRevision.objects.filter(pk__in=revision_ids, post_id=OuterRef("pk"))

    def column(name: str) -> Subquery:
        return Subquery(revision.values(name)[:1])

    updated = Post.objects.filter(pk__in=post_ids, status=Post.Status.PUBLISHED).update(
        title=column("title"),
        body=column("body"),
        body_html=column("body_html"),
        excerpt=column("excerpt"),
        last_error="",
        updated_at=now,
        updated_by=updated_by,
        version=F("version") + 1,
    )
    switched = len(revision_ids)
    if updated != switched:
        raise ConcurrentChange(
            f"{switched} revisions switched but {updated} posts were updated; rolling back"
        )


def record_revision_events(
    kind: str, rows: list, *, node: str, now: datetime, note: str = ""
) -> None:
    """Record one ``kind`` event per revision in ``rows`` (each with ``post_id``, ``number`` and
    ``planned``, the time it was due at), at ``now``, with its lateness."""
    PublishEvent.objects.bulk_create(
        [
            PublishEvent(
                post_id=row.post_id,
                kind=kind,
                node=node,
                at=now,
                lateness=(now - row.planned).total_seconds(),
                data={"revision": row.number, **({"note": note} if note else {})},
            )
            for row in rows
        ]
    )
