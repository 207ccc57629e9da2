"""Every change to a post's publishing state: one code path for the admin, the job and tests.

Each action locks the post's row, checks the state it starts from, makes a *conditional*
change (``UPDATE ... WHERE status = <expected>``) and writes a :class:`PublishEvent` in the same
transaction. The publish job's due publish is the same kind of change in batches: a post goes
``scheduled -> published`` only if it is still scheduled and due by the database clock when
the ``UPDATE`` runs, so a cancel that wins the race is never published and nothing is
published twice, whichever replica (or stale leader) runs the job.

``user`` is the person acting; ``None`` means the system (the publish job, scripts, tests).
Actions that schedule, publish or unpublish need the ``publishing.publish_post`` permission.

Every write adds one to the post's ``version`` and records who made it (``updated_by``). An
action given ``expected_version`` (the admin always gives the version its form was loaded with)
compares it with the row's version under the row lock and raises :class:`EditConflict` when
someone else changed the post meanwhile, so a stale tab can neither undo a colleague's status
change nor overwrite their text. Callers that give no version (the job, scripts) act on the
current row.
"""

import logging
from dataclasses import astuple, dataclass
from datetime import datetime
from functools import partial

from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Length, Now, Trim

from coordination.clock import database_now
from coordination.metrics import observe_publish_lateness
from coordination.services import request_wakeup
from publishing.conf import settings
from publishing.exceptions import (
    EditConflict,
    InvalidSchedule,
    InvalidTransition,
    NotPublishable,
)
from publishing.models import Post, PublishEvent
from publishing.rendering import render
from publishing.validation import publish_problems, schedule_problems, time_problems

logger = logging.getLogger(__name__)

PUBLISH_JOB = "publishing.publish_due"
PUBLISH_PERMISSION = "publishing.publish_post"

S = Post.Status
K = PublishEvent.Kind


# --- permissions ------------------------------------------------------------------------


def can_publish(user) -> bool:
    """Return True if ``user`` may schedule, publish and unpublish posts (None: the system)."""
    return user is None or user.has_perm(PUBLISH_PERMISSION)


def _require_permission(user, action: str) -> None:
    if not can_publish(user):
        raise PermissionDenied(
            f"{user.get_username() or 'This user'} may not {action}: that needs the "
            "“Can schedule and publish posts” permission (publishing.publish_post)."
        )


def has_history(post: Post) -> bool:
    """Return True if ``post`` was ever scheduled or published (it has publish events)."""
    return post.pk is not None and PublishEvent.objects.filter(post=post).exists()


def can_delete(user, post: Post) -> bool:
    """Return True if ``user`` may delete ``post`` (model permissions aside).

    A post with a publish history may be deleted by a superuser only: deleting it takes away
    what readers saw. A scheduled or live post without history needs the publish permission.
    """
    if has_history(post):
        return user is None or user.is_superuser
    if post.status in (S.SCHEDULED, S.PUBLISHED):
        return can_publish(user)
    return True


# --- helpers ----------------------------------------------------------------------------


def edit_conflict(current: Post, expected_version: int | None) -> EditConflict | None:
    """Return the conflict of an edit made against ``expected_version`` of ``current``, if any.

    ``None`` as the expected version means "whatever is there now" (jobs, scripts). The admin's
    form calls this too, to show the conflict before saving; the services call it under the
    row lock, which is what makes it hold.
    """
    if expected_version is None or expected_version == current.version:
        return None
    return EditConflict(
        title=str(current),
        changed_by=current.updated_by,
        changed_at=current.updated_at,
        status_label=current.get_status_display(),
        version=current.version,
    )


def _lock(post: Post, expected_version: int | None = None) -> Post:
    """Return the post's current row, locked until the transaction ends.

    Raise :class:`EditConflict` if its version is not ``expected_version`` (when given).
    """
    current = Post.objects.select_for_update().get(pk=post.pk)
    conflict = edit_conflict(current, expected_version)
    if conflict is not None:
        raise conflict
    return current


def _editor_name(user) -> str:
    """Return the name recorded as a post's last editor (empty for the system)."""
    return user.get_username() if _user_or_none(user) is not None else ""


def _scheduler_name(node: str) -> str:
    return (f"the scheduler ({node})" if node else "the scheduler")[:200]


def _next_version() -> F:
    return F("version") + 1


def _skip_locked(queryset: QuerySet) -> QuerySet:
    """Lock the selected rows and skip rows other transactions hold, where the database can.

    PostgreSQL and MySQL support ``FOR UPDATE SKIP LOCKED``, so two replicas (or a replica and
    an editor) never wait on each other's rows. SQLite has no row locks: a write transaction
    holds the whole database, so the selection and the update cannot interleave with another
    writer there anyway.
    """
    if connection.features.has_select_for_update_skip_locked:
        return queryset.select_for_update(skip_locked=True)
    return queryset


def _user_or_none(user):
    return user if user is not None and getattr(user, "pk", None) is not None else None


def _event(post: Post, kind: str, *, user=None, node: str = "", detail: str = "", lateness=None):
    return PublishEvent.objects.create(
        post=post, kind=kind, user=_user_or_none(user), node=node, detail=detail, lateness=lateness
    )


def _iso(value: datetime | None) -> str:
    return value.isoformat() if value is not None else "none"


def _conditional_update(current: Post, *, user, **values) -> None:
    """Update ``current`` only if its status and version are unchanged; raise otherwise."""
    updated = Post.objects.filter(
        pk=current.pk, status=current.status, version=current.version
    ).update(updated_at=Now(), updated_by=_editor_name(user), version=_next_version(), **values)
    if not updated:
        # Unreachable while the row lock is held; kept so a change can never be blind.
        raise InvalidTransition(f"“{current}” changed while being saved; reload and try again.")


def _wrong_state(current: Post, action: str) -> InvalidTransition:
    if current.status == S.PUBLISHED:
        when = f" at {current.published_at.isoformat()}" if current.published_at else ""
        return InvalidTransition(
            f"Cannot {action} “{current}”: it is already published{when}. Unpublish it instead."
        )
    return InvalidTransition(f"Cannot {action} “{current}”: it is {current.get_status_display()}.")


def _check_times(post: Post) -> None:
    """Refuse planned times no page could show (and naive ones) before they are stored."""
    errors = time_problems(publish_at=post.publish_at, unpublish_at=post.unpublish_at)
    if errors:
        raise InvalidSchedule(errors)


def _check_publishable(post: Post) -> None:
    problems = publish_problems(title=post.title, slug=post.slug, body_length=len(post.body))
    if problems:
        raise NotPublishable(problems)


# --- editor actions ---------------------------------------------------------------------


def save_post(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Create ``post`` as a draft, or save its content (title, slug, body).

    Publishing state is never written here: ``status`` and ``published_at`` only change through
    the actions below, so a stale admin form cannot undo a publish. Drafts and unpublished
    posts keep their planned times; a scheduled post's times change through
    :func:`reschedule_post`. Saving clears a failed publish, so the job tries the post again.
    Planned times kept on a draft must still be ones every time zone can show. The body is
    rendered here, outside the transaction, and stored: page views never render Markdown.
    """
    post.body_html, post.excerpt = astuple(render(post.body))
    with transaction.atomic():
        if post._state.adding:
            post.status = S.DRAFT
            post.published_at = None
            post.last_error = ""
            post.version = 1
            post.updated_by = _editor_name(user)
            if post.author_id is None:
                post.author = _user_or_none(user)
            _check_times(post)
            post.save(force_insert=True)
        else:
            current = _lock(post, expected_version)
            if current.status in (S.SCHEDULED, S.PUBLISHED):
                _require_permission(user, "edit a scheduled or published post")
            fields = ["title", "slug", "body", "last_error", "updated_at", "updated_by", "version"]
            fields += ["body_html", "excerpt"]
            if current.status in (S.DRAFT, S.UNPUBLISHED):
                _check_times(post)
                fields += ["publish_at", "unpublish_at"]
            post.last_error = ""
            post.updated_at = Now()
            post.updated_by = _editor_name(user)
            post.version = _next_version()
            post.save(update_fields=fields)
            if current.is_failed:
                # It was skipped while failed; it may be due right now.
                request_wakeup(PUBLISH_JOB, at=current.publish_at)
    post.refresh_from_db()
    return post


def schedule_post(
    *,
    post: Post,
    publish_at: datetime,
    unpublish_at: datetime | None = None,
    user,
    expected_version: int | None = None,
) -> Post:
    """Schedule a draft (or unpublished) post to go live at ``publish_at``."""
    _require_permission(user, "schedule posts")
    with transaction.atomic():
        current = _lock(post, expected_version)
        if current.status not in (S.DRAFT, S.UNPUBLISHED):
            if current.status == S.SCHEDULED:
                raise InvalidTransition(f"“{current}” is already scheduled; reschedule it.")
            raise _wrong_state(current, "schedule")
        errors = schedule_problems(
            publish_at=publish_at, unpublish_at=unpublish_at, now=database_now()
        )
        if errors:
            raise InvalidSchedule(errors)
        _check_publishable(current)
        _conditional_update(
            current,
            user=user,
            status=S.SCHEDULED,
            publish_at=publish_at,
            unpublish_at=unpublish_at,
            published_at=None,
            last_error="",
        )
        detail = f"publish at {_iso(publish_at)}"
        if unpublish_at is not None:
            detail += f", unpublish at {_iso(unpublish_at)}"
        _event(current, K.SCHEDULED, user=user, detail=detail)
        request_wakeup(PUBLISH_JOB, at=publish_at)
    post.refresh_from_db()
    return post


def reschedule_post(
    *,
    post: Post,
    publish_at: datetime,
    unpublish_at: datetime | None = None,
    user,
    expected_version: int | None = None,
) -> Post:
    """Move a scheduled post's publish (and unpublish) time; clear a failed publish."""
    _require_permission(user, "reschedule posts")
    with transaction.atomic():
        current = _lock(post, expected_version)
        if current.status != S.SCHEDULED:
            raise _wrong_state(current, "reschedule")
        if (publish_at, unpublish_at) == (current.publish_at, current.unpublish_at):
            post.refresh_from_db()
            return post
        errors = schedule_problems(
            publish_at=publish_at,
            unpublish_at=unpublish_at,
            now=database_now(),
            check_publish_future=publish_at != current.publish_at,
            check_unpublish_future=unpublish_at != current.unpublish_at,
        )
        if errors:
            raise InvalidSchedule(errors)
        _conditional_update(
            current, user=user, publish_at=publish_at, unpublish_at=unpublish_at, last_error=""
        )
        detail = f"publish at {_iso(current.publish_at)} -> {_iso(publish_at)}"
        if unpublish_at != current.unpublish_at:
            detail += f"; unpublish at {_iso(current.unpublish_at)} -> {_iso(unpublish_at)}"
        _event(current, K.RESCHEDULED, user=user, detail=detail)
        request_wakeup(PUBLISH_JOB, at=publish_at)
    post.refresh_from_db()
    return post


def cancel_schedule(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Take a scheduled post back to draft; it keeps its planned times but never goes live.

    Raises :class:`InvalidTransition` if the publish job published it first.
    """
    _require_permission(user, "cancel scheduled posts")
    with transaction.atomic():
        current = _lock(post, expected_version)
        if current.status != S.SCHEDULED:
            raise _wrong_state(current, "cancel the schedule of")
        _conditional_update(current, user=user, status=S.DRAFT, last_error="")
        _event(current, K.CANCELLED, user=user, detail=f"was due at {_iso(current.publish_at)}")
    post.refresh_from_db()
    return post


def publish_now(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Put a draft, scheduled or unpublished post live at once."""
    _require_permission(user, "publish posts")
    with transaction.atomic():
        current = _lock(post, expected_version)
        if current.status == S.PUBLISHED:
            raise _wrong_state(current, "publish")
        _check_publishable(current)
        if current.unpublish_at is not None and current.unpublish_at <= database_now():
            raise InvalidSchedule(
                {"unpublish_at": "The unpublish time has passed; change or clear it first."}
            )
        _conditional_update(
            current, user=user, status=S.PUBLISHED, published_at=Now(), last_error=""
        )
        _event(current, K.PUBLISHED, user=user, detail="published now")
        if current.unpublish_at is not None:
            request_wakeup(PUBLISH_JOB, at=current.unpublish_at)
    post.refresh_from_db()
    return post


def unpublish_now(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Take a published post down at once."""
    _require_permission(user, "unpublish posts")
    with transaction.atomic():
        current = _lock(post, expected_version)
        if current.status != S.PUBLISHED:
            raise InvalidTransition(
                f"Cannot unpublish “{current}”: it is {current.get_status_display()}, not live."
            )
        _conditional_update(current, user=user, status=S.UNPUBLISHED)
        _event(current, K.UNPUBLISHED, user=user, detail="unpublished now")
    post.refresh_from_db()
    return post


def set_unpublish_at(
    *, post: Post, unpublish_at: datetime | None, user, expected_version: int | None = None
) -> Post:
    """Set (or clear) when a published post is taken down."""
    _require_permission(user, "schedule unpublishing")
    with transaction.atomic():
        current = _lock(post, expected_version)
        if current.status != S.PUBLISHED:
            raise InvalidTransition(
                f"“{current}” is {current.get_status_display()}; set its times in the form."
            )
        if unpublish_at == current.unpublish_at:
            post.refresh_from_db()
            return post
        errors = schedule_problems(
            publish_at=current.publish_at,
            unpublish_at=unpublish_at,
            now=database_now(),
            publish_required=False,
            check_publish_future=False,
        )
        if errors:
            raise InvalidSchedule(errors)
        _conditional_update(current, user=user, unpublish_at=unpublish_at)
        detail = f"unpublish at {_iso(current.unpublish_at)} -> {_iso(unpublish_at)}"
        _event(current, K.RESCHEDULED, user=user, detail=detail)
        if unpublish_at is not None:
            request_wakeup(PUBLISH_JOB, at=unpublish_at)
    post.refresh_from_db()
    return post


def delete_post(*, post: Post, user, expected_version: int | None = None) -> None:
    """Delete ``post``; keep its publish history, named by its title, and record the deletion.

    The events lose their link to the post (``post`` becomes empty) and keep ``post_title``; a
    "Post deleted" event says who deleted it. A post without history leaves no trace.
    """
    with transaction.atomic():
        current = _lock(post, expected_version)
        if not can_delete(user, current):
            raise PermissionDenied(
                f"“{current}” has a publish history (it was scheduled or published): only a "
                "superuser may delete it."
            )
        title = str(current)[:200]
        kept = PublishEvent.objects.filter(post=current).update(post_title=title)
        detail = f"slug {current.slug}, was {current.get_status_display().lower()}"
        pk = current.pk
        current.delete()
        if kept:
            PublishEvent.objects.create(
                post=None, post_title=title, kind=K.DELETED, user=_user_or_none(user), detail=detail
            )
    logger.info(
        "post %s (slug %r) deleted by %s; %d publish events kept",
        pk,
        current.slug,
        _editor_name(user) or "the system",
        kept,
    )


# --- the publish job's batches -----------------------------------------------------------


@dataclass(frozen=True)
class DueRow:
    """A post selected for a due publish or unpublish, with what the cheap checks need."""

    pk: int
    planned: datetime
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


def _batch_size(batch_size: int | None) -> int:
    size = int(settings.PUBLISH_BATCH_SIZE) if batch_size is None else int(batch_size)
    if size < 1:
        raise ValueError(f"batch_size must be at least 1, got {size}")
    return size


def select_due_publications(*, now: datetime, batch_size: int) -> list[DueRow]:
    """Select (and lock) up to ``batch_size`` scheduled posts due at ``now``, oldest first.

    Failed posts are skipped until edited. Must run in the transaction that publishes them.
    """
    queryset = (
        Post.objects.filter(status=S.SCHEDULED, publish_at__lte=now, last_error="")
        .order_by("publish_at", "id")
        .annotate(body_length=Length(Trim("body")))
        .values_list("pk", "publish_at", "title", "slug", "body_length")
    )
    return [DueRow(*row) for row in _skip_locked(queryset)[:batch_size]]


def publish_selected(
    *, rows: list[DueRow], now: datetime, node: str = "", batch_size: int | None = None
) -> BatchResult:
    """Publish the selected posts that are still scheduled and due; record failures.

    The change re-checks status and due time, so a post cancelled or rescheduled after it was
    selected is left alone. ``published_at`` is ``now``, the database time read in this
    transaction.
    """
    good: list[DueRow] = []
    failed: list[int] = []
    for row in rows:
        problems = publish_problems(title=row.title, slug=row.slug, body_length=row.body_length)
        if not problems:
            good.append(row)
        elif _record_failure(row, "; ".join(problems), node=node, now=now):
            failed.append(row.pk)
    published: list[tuple[int, datetime]] = []
    if good:
        still_due = Post.objects.filter(status=S.SCHEDULED, publish_at__lte=now, last_error="")
        published = _conditional_batch_update(
            still_due,
            [row.pk for row in good],
            planned="publish_at",
            status=S.PUBLISHED,
            published_at=now,
            updated_at=now,
            updated_by=_scheduler_name(node),
            version=_next_version(),
        )
        _insert_events(K.PUBLISHED, published, node=node, now=now)
        # Feed the lateness histogram only once the publish is committed.
        lateness = [(now - planned).total_seconds() for _, planned in published]
        transaction.on_commit(partial(_observe_lateness, lateness))
    return BatchResult(
        now=now,
        selected=len(rows),
        done=[pk for pk, _ in published],
        failed=failed,
        batch_size=_batch_size(batch_size),
    )


def _observe_lateness(seconds: list[float]) -> None:
    for value in seconds:
        observe_publish_lateness(value)


def _insert_events(
    kind: str, posts: list[tuple[int, datetime]], *, node: str, now: datetime
) -> None:
    """Insert one ``kind`` event at ``now`` per ``(post id, planned time)``, with its lateness."""
    PublishEvent.objects.bulk_create(
        [
            PublishEvent(
                post_id=pk,
                kind=kind,
                node=node,
                at=now,
                lateness=(now - planned).total_seconds(),
            )
            for pk, planned in posts
        ]
    )


class ConcurrentChange(RuntimeError):
    """Rows changed between two statements of one batch; the batch rolls back and reruns."""


def _conditional_batch_update(
    condition: QuerySet, ids: list[int], *, planned: str, **values
) -> list[tuple[int, datetime]]:
    """Apply ``values`` to the posts in ``ids`` that still match ``condition``.

    Return ``(pk, planned time)`` of exactly the posts changed. The rows were locked when
    selected (SQLite: the transaction holds the database), so nothing can change them between
    the re-check and the ``UPDATE``, which repeats the condition anyway; if the two ever
    disagree the batch is rolled back rather than recorded wrongly.
    """
    matching = list(condition.filter(pk__in=ids).order_by(planned, "id").values_list("pk", planned))
    if not matching:
        return []
    updated = condition.filter(pk__in=[pk for pk, _ in matching]).update(**values)
    if updated != len(matching):
        raise ConcurrentChange(
            f"{len(matching)} posts matched but {updated} were updated; rolling the batch back"
        )
    return matching


def _record_failure(row: DueRow, message: str, *, node: str, now: datetime) -> bool:
    """Mark a due post as failed (it stays scheduled, visible in the admin); log it."""
    marked = Post.objects.filter(pk=row.pk, status=S.SCHEDULED, last_error="").update(
        last_error=message,
        updated_at=now,
        updated_by=_scheduler_name(node),
        version=_next_version(),
    )
    if not marked:
        return False
    PublishEvent.objects.create(
        post_id=row.pk,
        kind=K.FAILED,
        node=node,
        at=now,
        lateness=(now - row.planned).total_seconds(),
        detail=message,
    )
    logger.error(
        "post %s (slug %r) due at %s failed to publish: %s; it stays scheduled and is "
        "skipped until an editor changes it",
        row.pk,
        row.slug,
        row.planned.isoformat(),
        message,
    )
    return True


def publish_due(*, batch_size: int | None = None, node: str = "") -> BatchResult:
    """Publish up to ``batch_size`` due scheduled posts in one transaction."""
    size = _batch_size(batch_size)
    with transaction.atomic():
        now = database_now()
        rows = select_due_publications(now=now, batch_size=size)
        return publish_selected(rows=rows, now=now, node=node, batch_size=size)


def select_due_unpublications(*, now: datetime, batch_size: int) -> list[DueRow]:
    """Select (and lock) up to ``batch_size`` published posts whose unpublish time passed."""
    queryset = (
        Post.objects.filter(status=S.PUBLISHED, unpublish_at__lte=now)
        .order_by("unpublish_at", "id")
        .values_list("pk", "unpublish_at")
    )
    return [DueRow(*row) for row in _skip_locked(queryset)[:batch_size]]


def unpublish_selected(
    *, rows: list[DueRow], now: datetime, node: str = "", batch_size: int | None = None
) -> BatchResult:
    """Take down the selected posts that are still published and past their unpublish time."""
    unpublished: list[tuple[int, datetime]] = []
    if rows:
        still_due = Post.objects.filter(status=S.PUBLISHED, unpublish_at__lte=now)
        unpublished = _conditional_batch_update(
            still_due,
            [row.pk for row in rows],
            planned="unpublish_at",
            status=S.UNPUBLISHED,
            updated_at=now,
            updated_by=_scheduler_name(node),
            version=_next_version(),
        )
        _insert_events(K.UNPUBLISHED, unpublished, node=node, now=now)
    return BatchResult(
        now=now,
        selected=len(rows),
        done=[pk for pk, _ in unpublished],
        failed=[],
        batch_size=_batch_size(batch_size),
    )


def unpublish_due(*, batch_size: int | None = None, node: str = "") -> BatchResult:
    """Unpublish up to ``batch_size`` published posts whose unpublish time has passed."""
    size = _batch_size(batch_size)
    with transaction.atomic():
        now = database_now()
        rows = select_due_unpublications(now=now, batch_size=size)
        return unpublish_selected(rows=rows, now=now, node=node, batch_size=size)
