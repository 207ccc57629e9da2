"""What the publish job has to do: the next time of each kind of change, read in one statement.

A run of ``publishing.publish_due`` reads its agenda once before its changes, to know which
of them has anything due (a run for one due post does not look for due takedowns, revisions
and releases it has none of), and once after, to know when it runs next: two statements a
run, where a read per kind would be nine. :func:`next_run` decides from the two readings
(pure); :func:`read_agenda` reads one.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, models
from django.db.models import Value

from publishing.models import Post, PostRevision, Release

#: How soon the job looks again at due work it had to skip because another transaction held
#: its rows (an editor saving the post): a second later, not at once, which would run the job
#: in a loop.
LOCKED_RETRY = timedelta(seconds=1)


@dataclass(frozen=True)
class Agenda:
    """The earliest time of each kind of change the publish job makes (None: none scheduled).

    ``publish`` counts only the job's share (posts due within the on-time window, or later);
    ``backlog`` says whether a post due longer ago waits for the backlog job.
    """

    publish: datetime | None = None
    unpublish: datetime | None = None
    revision: datetime | None = None
    release: datetime | None = None
    backlog: bool = False

    def due(self, kind: str, now: datetime) -> bool:
        """Return whether a change of ``kind`` (a field's name) is due at ``now``."""
        at = getattr(self, kind)
        return at is not None and at <= now

    def anything_due(self, now: datetime) -> bool:
        """Return whether a change of any kind is due at ``now`` (the backlog is not the
        publish job's)."""
        return any(self.due(kind, now) for kind in KINDS)

    def earliest(self) -> datetime | None:
        """Return the earliest time on the agenda (None: nothing is scheduled)."""
        times = [getattr(self, kind) for kind in KINDS if getattr(self, kind) is not None]
        return min(times, default=None)


#: The kinds of change on the agenda, as its fields.
KINDS = ("publish", "unpublish", "revision", "release")


def next_run(
    *, before: Agenda, after: Agenda, now: datetime, more: bool, held: bool
) -> datetime | None:
    """Return when the publish job runs next, given its agenda before and after a run at
    ``now``.

    - ``more``: a batch was full, or releases were left: more may be due, so at once.
    - ``held``: a release's posts were held by another transaction; and anything still due
      after the run was skipped for the same reason: a second later.
    - Otherwise the earliest time on the agenda after the run (None: nothing is scheduled).
    """
    if more:
        return now
    if held or after.anything_due(now):
        return now + LOCKED_RETRY
    return after.earliest()


def read_agenda(*, now: datetime, window: timedelta) -> Agenda:
    """Read the publish job's agenda at ``now``, its share of publishes being the posts due
    after ``now - window``; one statement, an index probe per kind.

    Failed posts and stopped releases are left out until an editor changes them.
    """
    scheduled = Post.objects.filter(status=Post.Status.SCHEDULED, last_error="")
    firsts = {
        "publish": scheduled.filter(publish_at__gt=now - window)
        .order_by("publish_at")
        .values_list("publish_at"),
        "unpublish": Post.objects.filter(status=Post.Status.PUBLISHED, unpublish_at__isnull=False)
        .order_by("unpublish_at")
        .values_list("unpublish_at"),
        "revision": PostRevision.objects.filter(status=PostRevision.Status.SCHEDULED)
        .order_by("publish_at")
        .values_list("publish_at"),
        "release": Release.objects.filter(status=Release.Status.SCHEDULED, problem="")
        .order_by("release_at")
        .values_list("release_at"),
        # Ordered, so that the planner probes the due index rather than filtering another
        # index's every row (34 ms on 100,000 published posts).
        "backlog": scheduled.filter(publish_at__lte=now - window)
        .order_by("publish_at")
        .values_list("publish_at"),
    }
    values = dict(zip(firsts, _first_values(firsts.values()), strict=True))
    return Agenda(**{**values, "backlog": values["backlog"] is not None})


def _first_values(querysets) -> list[datetime | None]:
    """Return the first value of each one-column datetime ``querysets``, in one statement
    (each a scalar subquery), converted as the ORM converts them on this database."""
    parts, params = [], []
    for queryset in querysets:
        sql, part_params = queryset[:1].query.sql_with_params()
        parts.append(f"({sql})")
        params.extend(part_params)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(parts)}", params)
        row = cursor.fetchone()
    expression = Value(None, output_field=models.DateTimeField())
    converters = connection.ops.get_db_converters(expression)
    values = []
    for value in row:
        for convert in converters:
            value = convert(value, expression, connection)
        values.append(value)
    return values
