"""The publish job's batches: which posts and revisions are due, and one batch of each.

A batch selects the due rows (``FOR UPDATE SKIP LOCKED`` where the database can, so two
replicas, or a replica and an editor, never wait on each other), checks them, and changes
them with one set-based, conditional write (:mod:`publishing.setbased`): a post goes
``scheduled -> published`` only if it is still scheduled and due by the database clock when the
``UPDATE`` runs, so a cancel that wins the race is never published and nothing is published
twice, whichever replica (or stale leader) runs the job. Each batch is one transaction; the
publish job (:mod:`publishing.jobs`) runs its three batches in its run's transaction.

The scheduler of the job's node is recorded as the posts' editor (``updated_by``).
"""

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import NamedTuple

from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Length, Trim

from coordination.clock import database_now
from coordination.metrics import observe_publish_lateness
from publishing import go_live, setbased
from publishing.actions import scheduler_name
from publishing.conf import settings
from publishing.models import PENDING_REVISION, Post, PostRevision, PublishEvent
from publishing.row_locks import skip_locked
from publishing.setbased import DueChange, SetAside, change_due_posts
from publishing.validation import publish_problems

logger = logging.getLogger(__name__)

S = Post.Status
K = PublishEvent.Kind
R = PostRevision.Status

#: Why the unpublish batch sets its posts' pending revisions aside (each "Revision
#: superseded" event says it): written for the version that went down, a revision must not go
#: live over what is published next.
EXPIRED_NOTE = "the post was taken down at its unpublish time"
#: Why the revision switch sets a due revision aside instead of putting it live.
NOT_LIVE_NOTE = "the post was not live at the revision's time, or a newer revision was due"


class DueRow(NamedTuple):
    """A post selected for a due publish or unpublish, with what the cheap checks need.

    A named tuple, not a dataclass: a backlog batch makes 10,000 of them, and a frozen
    dataclass costs several times more to build. No due time: the change computes each
    post's lateness in the database, and reading 10,000 times into Python (Django's
    ``timestamptz`` loader is Python code) held the interpreter from the publish job's
    thread longer than anything else a backlog batch does in Python. A failure, rare, reads
    its post's own.
    """

    pk: int
    title: str = ""
    slug: str = ""
    body_length: int = 0


@dataclass(frozen=True)
class BatchResult:
    """What one batch did. ``more`` means the batch was full: more may be due right now."""

    now: datetime
    selected: int
    done: list[int]
    failed: list[int]
    batch_size: int

    @property
    def more(self) -> bool:
        return self.selected >= self.batch_size

    @classmethod
    def nothing(cls, *, now: datetime, batch_size: int) -> "BatchResult":
        """A batch not run: nothing of its kind was due."""
        return cls(now=now, selected=0, done=[], failed=[], batch_size=batch_size)


def _batch_size(batch_size: int | None) -> int:
    size = int(settings.PUBLISH_BATCH_SIZE) if batch_size is None else int(batch_size)
    if size < 1:
        raise ValueError(f"batch_size must be at least 1, got {size}")
    return size


def select_due_publications(
    *,
    now: datetime,
    batch_size: int,
    recent: timedelta | None = None,
    overdue: timedelta | None = None,
) -> list[DueRow]:
    """Select (and lock) up to ``batch_size`` scheduled posts due at ``now``, newest due first.

    ``recent`` limits them to posts due within that long before ``now`` (the publish job's
    share), ``overdue`` to posts due at least that long before it (the backlog job's). Newest
    first so that what just fell due goes before what is late already. Failed posts are
    skipped until edited. Must run in the transaction that publishes them.
    """
    due = Q(status=S.SCHEDULED, publish_at__lte=now, last_error="")
    if recent is not None:
        due &= Q(publish_at__gt=now - recent)
    if overdue is not None:
        due &= Q(publish_at__lte=now - overdue)
    queryset = (
        Post.objects.filter(due)
        .order_by("-publish_at", "-id")
        .annotate(body_length=Length(Trim("body")))
        .values_list("pk", "title", "slug", "body_length")
    )
    return [DueRow(*row) for row in skip_locked(queryset)[:batch_size]]


def publish_selected(
    *, rows: list[DueRow], now: datetime, node: str = "", batch_size: int | None = None
) -> BatchResult:
    """Publish the selected posts that are still scheduled and due; record failures.

    The change re-checks status and due time, so a post cancelled or rescheduled after it was
    selected is left alone. ``published_at`` is ``now``, the database time read in this
    transaction. With reviews required, a post whose content as it is now no reviewer
    approved is held (a failure that approving it clears), checked here with its row locked.
    """
    good: list[DueRow] = []
    failed: list[int] = []
    max_chars = int(settings.POST_BODY_MAX_CHARS)
    for row in rows:
        problems = publish_problems(
            title=row.title, slug=row.slug, body_length=row.body_length, max_chars=max_chars
        )
        if not problems:
            good.append(row)
        elif _record_failure(row, "; ".join(problems), node=node, now=now):
            failed.append(row.pk)
    # Their rows are locked by this transaction: the content approved is what goes live.
    held = go_live.why_not(go_live.POST, [row.pk for row in good])
    if held:
        good = [row for row in good if row.pk not in held]
        failed += [
            row.pk
            for row in rows
            if row.pk in held and _record_failure(row, held[row.pk], node=node, now=now)
        ]
    published: list[tuple[int, float]] = []
    if good:
        published = _change_as_scheduler(
            good,
            Post.objects.filter(status=S.SCHEDULED, publish_at__lte=now, last_error=""),
            planned="publish_at",
            kind=K.PUBLISHED,
            node=node,
            now=now,
            status=S.PUBLISHED,
            published_at=now,
        )
        # Feed the lateness histogram only once the publish is committed.
        lateness = [seconds for _, seconds in published]
        transaction.on_commit(partial(_observe_lateness, lateness))
    return BatchResult(
        now=now,
        selected=len(rows),
        done=[pk for pk, _ in published],
        failed=failed,
        batch_size=_batch_size(batch_size),
    )


def _change_as_scheduler(
    rows: list[DueRow],
    condition: QuerySet,
    *,
    planned: str,
    kind: str,
    node: str,
    now: datetime,
    set_aside: SetAside | None = None,
    counters: tuple[str, ...] = ("version",),
    **values,
) -> list[tuple[int, float]]:
    """Apply a due change (``values``) to the posts of ``rows`` still matching ``condition``.

    The publish and the unpublish batches differ only in their condition, times, values and
    the revisions they set aside; both record the scheduler of ``node`` as the editor, at
    ``now``. Return ``(post id, lateness)`` of the posts changed (see :func:`change_due_posts`).
    """
    change = DueChange(
        condition=condition,
        planned=planned,
        values={**values, "updated_at": now, "updated_by": scheduler_name(node)},
        kind=kind,
        node=node,
        now=now,
        set_aside=set_aside,
        counters=counters,
    )
    return change_due_posts(change, [row.pk for row in rows])


def _observe_lateness(seconds: list[float]) -> None:
    for value in seconds:
        observe_publish_lateness(value)


def _record_failure(row: DueRow, message: str, *, node: str, now: datetime) -> bool:
    """Mark a due post as failed (it stays scheduled, visible in the admin); log it."""
    marked = Post.objects.filter(pk=row.pk, status=S.SCHEDULED, last_error="").update(
        last_error=message,
        updated_at=now,
        updated_by=scheduler_name(node),
        version=F("version") + 1,
    )
    if not marked:
        return False
    planned = Post.objects.values_list("publish_at", flat=True).get(pk=row.pk)
    PublishEvent.objects.create(
        post_id=row.pk,
        kind=K.FAILED,
        node=node,
        at=now,
        lateness=(now - planned).total_seconds(),
        data={"error": message},
    )
    logger.error(
        "post %s (slug %r) due at %s failed to publish: %s; it stays scheduled and is "
        "skipped until an editor changes it",
        row.pk,
        row.slug,
        planned.isoformat(),
        message,
    )
    return True


@contextmanager
def _batch_transaction(now: datetime | None):
    """Open a scheduler batch's transaction and yield the database time it runs at.

    Inside a caller's transaction (the publish job runs its three batches in its run's
    transaction) no savepoint is made: a batch that fails fails the run, which rolls back
    as a whole, so a savepoint would only add two round trips per batch. ``now`` given by
    the caller (read once per run) saves reading the clock again.
    """
    with transaction.atomic(savepoint=False):
        yield database_now() if now is None else now


def publish_due(
    *,
    batch_size: int | None = None,
    node: str = "",
    recent: timedelta | None = None,
    overdue: timedelta | None = None,
    now: datetime | None = None,
) -> BatchResult:
    """Publish up to ``batch_size`` due scheduled posts in one transaction.

    ``recent`` and ``overdue`` choose which due posts (see :func:`select_due_publications`);
    neither means all of them. ``now`` is the database time of the caller's transaction when
    it has read it already (see :func:`_batch_transaction`).
    """
    size = _batch_size(batch_size)
    with _batch_transaction(now) as now:
        rows = select_due_publications(now=now, batch_size=size, recent=recent, overdue=overdue)
        return publish_selected(rows=rows, now=now, node=node, batch_size=size)


def select_due_unpublications(*, now: datetime, batch_size: int) -> list[DueRow]:
    """Select (and lock) up to ``batch_size`` published posts past their unpublish time.

    Newest due first, like :func:`select_due_publications`.
    """
    queryset = (
        Post.objects.filter(status=S.PUBLISHED, unpublish_at__lte=now)
        .order_by("-unpublish_at", "-id")
        .values_list("pk", flat=True)
    )
    return [DueRow(pk) for pk in skip_locked(queryset)[:batch_size]]


def unpublish_selected(
    *, rows: list[DueRow], now: datetime, node: str = "", batch_size: int | None = None
) -> BatchResult:
    """Take down the selected posts that are still published and past their unpublish time.

    Their pending revisions are superseded in the same change (see :class:`SetAside`), and
    their preview links end (``preview_generation`` moves on).
    """
    unpublished: list[tuple[int, float]] = []
    if rows:
        unpublished = _change_as_scheduler(
            rows,
            Post.objects.filter(status=S.PUBLISHED, unpublish_at__lte=now),
            planned="unpublish_at",
            kind=K.UNPUBLISHED,
            node=node,
            now=now,
            set_aside=SetAside(statuses=PENDING_REVISION, note=EXPIRED_NOTE),
            counters=setbased.TAKEDOWN_COUNTERS,
            status=S.UNPUBLISHED,
        )
    return BatchResult(
        now=now,
        selected=len(rows),
        done=[pk for pk, _ in unpublished],
        failed=[],
        batch_size=_batch_size(batch_size),
    )


def unpublish_due(
    *, batch_size: int | None = None, node: str = "", now: datetime | None = None
) -> BatchResult:
    """Unpublish up to ``batch_size`` published posts whose unpublish time has passed."""
    size = _batch_size(batch_size)
    with _batch_transaction(now) as now:
        rows = select_due_unpublications(now=now, batch_size=size)
        return unpublish_selected(rows=rows, now=now, node=node, batch_size=size)


@dataclass(frozen=True)
class DueRevision:
    """A scheduled revision selected for its switch."""

    pk: int
    post_id: int
    planned: datetime
    number: int


def select_due_revisions(*, now: datetime, batch_size: int) -> tuple[list[DueRevision], dict]:
    """Select (and lock) up to ``batch_size`` scheduled revisions due at ``now``, and their posts.

    Return the revisions whose post could be locked too, and each such post's status. Both
    selections skip rows other transactions hold (an editor cancelling a revision holds its
    post), so the job never waits for an editor and an editor never deadlocks with it: that
    revision is looked at again on a later run. Must run in the transaction that switches them.
    """
    queryset = (
        PostRevision.objects.filter(status=R.SCHEDULED, publish_at__lte=now)
        .order_by("publish_at", "id")
        .values_list("pk", "post_id", "publish_at", "number")
    )
    rows = [DueRevision(*row) for row in skip_locked(queryset)[:batch_size]]
    if not rows:
        return [], {}
    posts = Post.objects.filter(pk__in={row.post_id for row in rows}).values_list("pk", "status")
    statuses = dict(skip_locked(posts))
    return [row for row in rows if row.post_id in statuses], statuses


def switch_selected_revisions(
    *,
    rows: list[DueRevision],
    post_statuses: dict,
    now: datetime,
    node: str = "",
    batch_size: int | None = None,
) -> BatchResult:
    """Put the selected revisions live on their posts, if still scheduled, due and live.

    One ``UPDATE`` marks the revisions (re-checking status and due time, so one cancelled or
    superseded since it was selected is left alone), one copies their title, body and
    rendered HTML onto their posts (re-checking that each is still published) and bumps the
    posts' versions. A revision whose post is not live at its time is superseded (every
    takedown supersedes its post's revisions already, so only one written some other way),
    and of two due revisions of one post (which the editor actions never leave) only the newest
    goes live. With reviews required, a revision whose text no reviewer approved is
    superseded too, checked here with its post locked. ``now`` is the database time read in
    this transaction.
    """
    winners, losers = _newest_of_live_posts(rows, post_statuses)
    scheduler = scheduler_name(node)
    unapproved = go_live.why_not(go_live.REVISION, [row.pk for row in winners])
    held = [row for row in winners if row.pk in unapproved]
    winners = [row for row in winners if row.pk not in unapproved]
    switched = _close_still_due(
        winners, now=now, status=R.PUBLISHED, published_at=now, closed_at=now, closed_by=scheduler
    )
    if switched:
        setbased.copy_revisions_onto_posts(
            [row.pk for row in switched],
            [row.post_id for row in switched],
            now=now,
            updated_by=scheduler,
        )
        setbased.record_revision_events(K.REVISION_PUBLISHED, switched, node=node, now=now)
    _set_aside_due(losers, NOT_LIVE_NOTE, now=now, node=node)
    for note in sorted({unapproved[row.pk] for row in held}):
        _set_aside_due(
            [row for row in held if unapproved[row.pk] == note], note, now=now, node=node
        )
    return BatchResult(
        now=now,
        selected=len(rows),
        done=[row.pk for row in switched],
        failed=[],
        batch_size=_batch_size(batch_size),
    )


def _set_aside_due(rows: list[DueRevision], note: str, *, now: datetime, node: str) -> None:
    """Supersede those of ``rows`` still scheduled and due, each with ``note`` and an event."""
    superseded = _close_still_due(
        rows, now=now, status=R.SUPERSEDED, closed_at=now, closed_by=scheduler_name(node), note=note
    )
    if superseded:
        setbased.record_revision_events(
            K.REVISION_SUPERSEDED, superseded, node=node, now=now, note=note
        )
    for row in superseded:
        logger.warning(
            "revision %s of post %s due at %s did not go live: %s",
            row.number,
            row.post_id,
            row.planned.isoformat(),
            note,
        )


def _newest_of_live_posts(
    rows: list[DueRevision], post_statuses: dict
) -> tuple[list[DueRevision], list[DueRevision]]:
    """Split due revisions (oldest first) into those that go live and those set aside.

    The newest due revision of each live post goes live; the others, and every revision of a
    post that is not live, are set aside.
    """
    newest: dict[int, DueRevision] = {}
    for row in rows:
        if post_statuses.get(row.post_id) == S.PUBLISHED:
            newest[row.post_id] = row
    losers = [row for row in rows if newest.get(row.post_id) is not row]
    return list(newest.values()), losers


def _close_still_due(rows: list[DueRevision], *, now: datetime, **values) -> list[DueRevision]:
    """Set ``values`` on those of ``rows`` still scheduled and due at ``now``; return them."""
    if not rows:
        return []
    by_pk = {row.pk: row for row in rows}
    still_due = PostRevision.objects.filter(status=R.SCHEDULED, publish_at__lte=now)
    return [by_pk[pk] for pk in setbased.change_due_revisions(still_due, list(by_pk), **values)]


def switch_due_revisions(
    *, batch_size: int | None = None, node: str = "", now: datetime | None = None
) -> BatchResult:
    """Switch up to ``batch_size`` due scheduled revisions in one transaction."""
    size = _batch_size(batch_size)
    with _batch_transaction(now) as now:
        rows, statuses = select_due_revisions(now=now, batch_size=size)
        return switch_selected_revisions(
            rows=rows, post_statuses=statuses, now=now, node=node, batch_size=size
        )
