"""What the publish job has to do: the next time of each kind of change, read in one statement.

A run of ``publishing.publish_due`` reads its agenda once before its changes, to know which
of them has anything due (a run for one due post does not look for due takedowns, revisions
and other apps' due work it has none of), and once after, to know when it runs next: two
statements a run, where a read per kind would be nine. :func:`next_run` decides from the two
readings (pure); :func:`read_agenda` reads one. Other apps' due work
(:mod:`publishing.due_work`, e.g. releases) is on the agenda under its own name.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import connection, models
from django.db.models import Value

from publishing.due_work import due_works
from publishing.models import Post, PostRevision

#: How soon the job looks again at due work it had to skip because another transaction held
#: its rows (an editor saving the post): a second later, not at once, which would run the job
#: in a loop.
LOCKED_RETRY = timedelta(seconds=1)


@dataclass(frozen=True)
class Agenda:
    """The earliest time of each kind of change the publish job makes (None: none scheduled).

    ``publish`` counts only the job's share (posts due within the on-time window, or later);
    ``backlog`` says whether a post due longer ago waits for the backlog job; ``others`` has
    the first time of each other app's due work, by its name.
    """

    publish: datetime | None = None
    unpublish: datetime | None = None
    revision: datetime | None = None
    backlog: bool = False
    others: Mapping[str, datetime | None] = field(default_factory=dict)

    def at(self, kind: str) -> datetime | None:
        """Return the first time of ``kind`` (one of :data:`KINDS` or another app's work)."""
        return getattr(self, kind) if kind in KINDS else self.others.get(kind)

    def due(self, kind: str, now: datetime) -> bool:
        """Return whether a change of ``kind`` is due at ``now``."""
        at = self.at(kind)
        return at is not None and at <= now

    def times(self) -> list[datetime]:
        """Return the first time of every kind that has one (the backlog is not the publish
        job's)."""
        found = [getattr(self, kind) for kind in KINDS] + list(self.others.values())
        return [at for at in found if at is not None]

    def anything_due(self, now: datetime) -> bool:
        """Return whether a change of any kind is due at ``now``."""
        return any(at <= now for at in self.times())

    def earliest(self) -> datetime | None:
        """Return the earliest time on the agenda (None: nothing is scheduled)."""
        return min(self.times(), default=None)


#: Publishing's own kinds of change on the agenda, as its fields.
KINDS = ("publish", "unpublish", "revision")


def next_run(
    *, before: Agenda, after: Agenda, now: datetime, more: bool, held: bool
) -> datetime | None:
    """Return when the publish job runs next, given its agenda before and after a run at
    ``now``.

    - ``more``: a batch was full, or releases were left: more may be due, so at once.
    - ``held``: due work's rows were held by another transaction (a release's posts); and
      anything still due after the run was skipped for the same reason: a second later.
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

    Failed posts (and what other apps' due work leaves out: stopped releases) wait until an
    editor changes them.
    """
    values = _first_values(now - window)
    own = {kind: values.pop(kind) for kind in KINDS}
    backlog = values.pop("backlog") is not None
    return Agenda(**own, backlog=backlog, others=values)


def _firsts(since: datetime) -> dict:
    """Return the one-column query of each kind's first time (the backlog's: posts due by
    ``since``; the publish job's share: after it)."""
    scheduled = Post.objects.filter(status=Post.Status.SCHEDULED, last_error="")
    return {
        "publish": scheduled.filter(publish_at__gt=since)
        .order_by("publish_at")
        .values_list("publish_at"),
        "unpublish": Post.objects.filter(status=Post.Status.PUBLISHED, unpublish_at__isnull=False)
        .order_by("unpublish_at")
        .values_list("unpublish_at"),
        "revision": PostRevision.objects.filter(status=PostRevision.Status.SCHEDULED)
        .order_by("publish_at")
        .values_list("publish_at"),
        **{work.name: work.first_due() for work in due_works()},
        # Ordered, so that the planner probes the due index rather than filtering another
        # index's every row (34 ms on 100,000 published posts).
        "backlog": scheduled.filter(publish_at__lte=since)
        .order_by("publish_at")
        .values_list("publish_at"),
    }


@dataclass(frozen=True)
class _Statement:
    """The agenda's statement for one database: its SQL, its parameters, where among them
    ``since`` goes, and the kind of each column."""

    sql: str
    params: tuple
    since_at: tuple[int, ...]
    kinds: tuple[str, ...]

    def params_for(self, since: datetime) -> list:
        params, value = list(self.params), _as_parameter(since)
        for index in self.since_at:
            params[index] = value
        return params


#: A time no agenda asks about: compiled in its place, it shows where ``since`` goes.
_MARKER = datetime(2000, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

#: The statement of each database (by alias), compiled on first use: building and compiling
#: its querysets costs three times what running their statement does, twice a run.
_statements: dict[str, _Statement | None] = {}


def _statement() -> _Statement | None:
    """Return this database's compiled statement (None: it could not be, then each read
    compiles its own)."""
    if connection.alias not in _statements:
        firsts = _firsts(_MARKER)
        sql, params = _compile(firsts.values())
        marker = _as_parameter(_MARKER)
        since_at = tuple(i for i, value in enumerate(params) if value == marker)
        # ``since`` is in two filters; anything else would mean the marker was not found.
        found = _Statement(sql, tuple(params), since_at, tuple(firsts))
        _statements[connection.alias] = found if len(since_at) == 2 else None
    return _statements[connection.alias]


def _as_parameter(value: datetime):
    """Return ``value`` as a query's parameter on this database (as the ORM passes it)."""
    return Post._meta.get_field("publish_at").get_db_prep_value(value, connection)


def _compile(querysets) -> tuple[str, list]:
    """Return one statement selecting the first value of each of ``querysets`` (each a
    scalar subquery), and its parameters."""
    parts, params = [], []
    for queryset in querysets:
        sql, part_params = queryset[:1].query.sql_with_params()
        parts.append(f"({sql})")
        params.extend(part_params)
    return f"SELECT {', '.join(parts)}", params


def _first_values(since: datetime) -> dict[str, datetime | None]:
    """Return the first time of each kind, in one statement, converted as the ORM converts
    them on this database."""
    statement = _statement()
    if statement is not None:
        sql, params, kinds = statement.sql, statement.params_for(since), statement.kinds
    else:
        firsts = _firsts(since)
        (sql, params), kinds = _compile(firsts.values()), tuple(firsts)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    expression = Value(None, output_field=models.DateTimeField())
    converters = connection.ops.get_db_converters(expression)
    values = []
    for value in row:
        for convert in converters:
            value = convert(value, expression, connection)
        values.append(value)
    return dict(zip(kinds, values, strict=True))
