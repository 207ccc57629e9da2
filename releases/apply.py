"""A release going out: every item's change in one transaction, exactly once, never early.

:func:`go_out_due` is the publish job's share (:data:`DUE_WORK`, :mod:`publishing.due_work`),
run in the job's transaction with its run-ledger row; :func:`apply` is the one code path for
a release going out, whoever sends it (the job at its time, an editor's "release now").

It locks the release (``SKIP LOCKED``: two replicas never wait on each other) and every
item's post, checks every item against what it pinned (:mod:`releases.stopping`), and
then changes the posts with one conditional ``UPDATE`` per kind of change, whose row count
must be every item's or the whole transaction rolls back. The posts' events are one
multi-row ``INSERT``, and the release is marked ``released`` only if it is still scheduled and
due by the database clock. A public reader on another connection sees all of it or none; a
second replica, a stale leader or a racing editor finds it released and changes nothing.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils.translation import gettext as _

from coordination.services import request_wakeup
from publishing import go_live
from publishing.actions import editor_name, scheduler_name, user_or_none
from publishing.due_work import Done, DueWork
from publishing.job_names import PUBLISH_JOB
from publishing.models import PENDING_REVISION, Post, PostRevision, PublishEvent
from publishing.public_events import announce_events
from publishing.row_locks import skip_locked
from publishing.setbased import (
    TAKEDOWN_COUNTERS,
    ConcurrentChange,
    SetAside,
    copy_revisions_onto_posts,
    set_aside_revisions,
)
from releases import history as release_history
from releases import stopping as checks
from releases.models import ItemAction, Release, ReleaseEvent, ReleaseItem, ReleaseStatus
from releases.setbased import ReleaseChange, change_release_posts

logger = logging.getLogger(__name__)

A = ItemAction
S = Post.Status
R = PostRevision.Status
RS = ReleaseStatus
K = PublishEvent.Kind
PENDING = checks.PENDING
#: Why a release's takedown sets the post's pending revisions aside.
TAKEN_DOWN_NOTE = "the post was taken down by a release"


@dataclass(frozen=True)
class GoneOut:
    """What :func:`go_out_due` did in one run: releases applied, stopped, or left for later."""

    released: list[int]
    stopped: list[int]
    held: list[int]
    more: bool

    @classmethod
    def nothing(cls) -> "GoneOut":
        """A run with no release due."""
        return cls(released=[], stopped=[], held=[], more=False)


#: Releases sent out per run of the publish job (each in full, however many items it has); a
#: run that finds more due runs again at once.
RELEASES_PER_RUN = 3


def first_due():
    """Return the scheduled releases' times, earliest first (the publish job's agenda reads
    the first); a stopped release waits for an editor."""
    return (
        Release.objects.filter(status=RS.SCHEDULED, problem="")
        .order_by("release_at")
        .values_list("release_at")
    )


def run_due(*, now: datetime, node: str) -> Done:
    """Send out the releases due at ``now`` (the publish job's due work, in its run)."""
    gone = go_out_due(now=now, node=node, limit=RELEASES_PER_RUN)
    return Done(more=gone.more, held=bool(gone.held))


DUE_WORK = DueWork(name="release", first_due=first_due, run=run_due)


def go_out_due(*, now: datetime, node: str, limit: int) -> GoneOut:
    """Apply up to ``limit`` scheduled releases due at ``now`` (in the caller's transaction).

    A release whose posts another transaction holds (an editor saving one) is left for the
    next run; one whose items can no longer apply is stopped and its owner told.
    """
    due = (
        Release.objects.filter(status=RS.SCHEDULED, problem="", release_at__lte=now)
        .order_by("release_at", "id")
        .values_list("pk", "name", "release_at")
    )
    rows = list(skip_locked(due)[:limit])
    more = len(rows) == limit  # perhaps more: the job runs again at once and looks
    items = checks.item_rows([pk for pk, _, _ in rows])
    released, stopped, held = [], [], []
    for pk, name, planned in rows:
        checked = checks.check_items(items[pk], now=now, lock=True, release_id=pk)
        if checked.held:
            held.append(pk)
            continue
        release = Release(pk=pk, name=name, release_at=planned)
        problem = _problem(release, checked)
        if not problem:
            problem = _apply_or_why_not(release, checked, now=now, planned=planned, node=node)
            if not problem:
                released.append(pk)
                continue
        if checks.stop(pk, problem, at=planned, wait=False, by=scheduler_name(node)):
            stopped.append(pk)
    return GoneOut(released=released, stopped=stopped, held=held, more=more)


def _problem(release: Release, checked: checks.Checked) -> str:
    """Return why ``release`` cannot go out now (empty when it can)."""
    if not checked.items:
        return _("The release has no items.")
    held = go_live.why_not(go_live.RELEASE, [release.pk])
    return held.get(release.pk) or checked.problem


def _apply_or_why_not(
    release: Release, checked: checks.Checked, *, now: datetime, planned: datetime, node: str
) -> str:
    """Apply ``release`` in a savepoint; return why it could not go out (empty when it did).

    A release whose change the database refuses (a constraint, a row count that does not
    match) rolls back alone and is stopped with the reason: it must not fail the publish
    job's run, or every post due after it would wait behind it. A lost connection still
    fails the run, which the engine runs again.
    """
    try:
        with transaction.atomic():
            apply(release, checked, now=now, planned=planned, node=node, user=None)
    except (ConcurrentChange, IntegrityError) as refused:
        logger.exception("[publish-scheduler] release %s could not go out", release.pk)
        return _("It could not go out, and nothing of it did: %(why)s") % {"why": refused}
    return ""


def apply(
    release: Release,
    checked: checks.Checked,
    *,
    now: datetime,
    planned: datetime | None,
    node: str,
    user,
) -> None:
    """Make every change of ``checked`` (its posts locked and checked) and mark it released.

    ``planned`` is the release's time when the job sends it (its lateness is recorded),
    ``None`` for an editor's "release now".
    """
    by = editor_name(user) if user is not None else scheduler_name(node)
    by_action: dict[str, list[checks.ItemRow]] = {action: [] for action in A.values}
    for item in checked.items:
        by_action[item.action].append(item)
    lateness = (now - planned).total_seconds() if planned is not None else None
    context = {
        "release": release.pk,
        "release_name": release.name,
        **({} if planned is not None else {"by_hand": True}),
    }
    common = {"updated_at": now, "updated_by": by[:200]}

    def change(
        kind: str, items: list[checks.ItemRow], from_statuses, counters=("version",), **values
    ) -> None:
        if not items:
            return
        ids = [item.post_id for item in items]
        changed = change_release_posts(
            ReleaseChange(
                release_id=release.pk,
                action=items[0].action,
                from_statuses=tuple(from_statuses),
                values={**values, **common},
                kind=kind,
                node=node,
                user_id=user_or_none(user).pk if user_or_none(user) else None,
                now=now,
                lateness=lateness,
                data=context,
                counters=counters,
            )
        )
        if changed != len(ids):
            raise ConcurrentChange(
                f"{len(ids)} posts to change but {changed} changed; rolling back"
            )

    publish = by_action[A.PUBLISH]
    change(
        K.PUBLISHED,
        publish,
        (S.DRAFT, S.UNPUBLISHED),
        status=S.PUBLISHED,
        published_at=now,
        publish_at=planned or now,
        last_error="",
    )
    down = by_action[A.UNPUBLISH]
    # A takedown ends the post's preview links too.
    change(K.UNPUBLISHED, down, (S.PUBLISHED,), TAKEDOWN_COUNTERS, status=S.UNPUBLISHED)
    if down:
        set_aside_revisions(
            [item.post_id for item in down],
            SetAside(statuses=PENDING_REVISION, note=TAKEN_DOWN_NOTE),
            now=now,
            node=node,
            closed_by=by[:200],
        )
    revised = by_action[A.REVISION]
    if revised:
        _switch_revisions(revised, now=now, by=by)
        numbers = dict(
            PostRevision.objects.filter(pk__in=[i.revision_id for i in revised]).values_list(
                "pk", "number"
            )
        )
        PublishEvent.objects.bulk_create(
            [
                PublishEvent(
                    post_id=item.post_id,
                    kind=K.REVISION_PUBLISHED,
                    user=user_or_none(user),
                    node=node,
                    at=now,
                    lateness=lateness,
                    data={
                        "version": item.pinned_version + 1,
                        "revision": numbers[item.revision_id],
                        **context,
                    },
                )
                for item in revised
            ],
            batch_size=2000,
        )
    marked = Release.objects.filter(
        Q(release_at__lte=now) if planned is not None else Q(),
        pk=release.pk,
        status__in=(RS.SCHEDULED,) if planned is not None else PENDING,
    ).update(
        status=RS.RELEASED,
        released_at=now,
        release_at=planned or now,
        problem="",
        updated_at=now,
        updated_by=by[:200],
        version=F("version") + 1,
    )
    if marked != 1:
        raise ConcurrentChange(f"release {release.pk} changed while going out; rolling back")
    release_history.record(
        release.pk,
        ReleaseEvent.Kind.RELEASED,
        by=by,
        **({"planned": planned, "late": lateness} if planned is not None else {"by_hand": True}),
        published=len(publish),
        revisions=len(revised),
        taken_down=len(down),
    )
    announce_events()
    published = ReleaseItem.objects.filter(release_id=release.pk, action=A.PUBLISH)
    takedown = (
        Post.objects.filter(pk__in=published.values("post_id"), unpublish_at__isnull=False)
        .order_by("unpublish_at")
        .values_list("unpublish_at", flat=True)
        .first()
    )
    if takedown is not None:
        request_wakeup(PUBLISH_JOB, at=takedown)
    transaction.on_commit(
        partial(
            logger.info,
            "[publish-scheduler] release %s (%r) went out: %d published, %d revision(s), "
            "%d taken down",
            release.pk,
            release.name,
            len(publish),
            len(revised),
            len(down),
        )
    )


def _switch_revisions(items: list[checks.ItemRow], *, now: datetime, by: str) -> None:
    """Put the items' pinned revisions live on their (locked, live) posts."""
    revision_ids = [item.revision_id for item in items]
    updated = PostRevision.objects.filter(pk__in=revision_ids, status__in=PENDING_REVISION).update(
        status=R.PUBLISHED, published_at=now, closed_at=now, closed_by=by[:200]
    )
    if updated != len(revision_ids):
        raise ConcurrentChange("a release's revisions changed while it went out; rolling back")
    copy_revisions_onto_posts(
        revision_ids, [item.post_id for item in items], now=now, updated_by=by[:200]
    )
