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
from contextlib import contextmanager
from dataclasses import astuple, dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import NamedTuple

from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import F, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Length, Now, Trim
from django.urls import reverse

from coordination.clock import database_now
from coordination.metrics import observe_publish_lateness
from coordination.services import request_wakeup
from coordination.wording import scheduler_text
from publishing import previews
from publishing.conf import settings
from publishing.exceptions import (
    EditConflict,
    InvalidContent,
    InvalidSchedule,
    InvalidTransition,
    NotPublishable,
)
from publishing.history import local_time, stored_time
from publishing.models import Post, PostRevision, PublishEvent
from publishing.rendering import render
from publishing.setbased import ConcurrentChange, DueChange, SetAside, change_due_posts
from publishing.validation import (
    body_text_problems,
    publish_problems,
    schedule_problems,
    text_problems,
    time_problems,
)

logger = logging.getLogger(__name__)

PUBLISH_JOB = "publishing.publish_due"
BACKLOG_JOB = "publishing.publish_backlog"
PUBLISH_PERMISSION = "publishing.publish_post"

S = Post.Status
K = PublishEvent.Kind
R = PostRevision.Status
PENDING = (R.DRAFT, R.SCHEDULED)

# Why a takedown sets the post's pending revisions aside (each "Revision superseded" event
# says it): written for the version that went down, a revision must not go live over what
# is published next.
UNPUBLISHED_NOTE = "the post was unpublished before the revision went live"
EXPIRED_NOTE = "the post was taken down at its unpublish time"
DELETED_NOTE = "the post was deleted"


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
    # Scheduling a revision or revoking preview links changes the version but not
    # updated_at (the public pages' Last-Modified); their events say when they happened.
    last_event = PublishEvent.objects.filter(post=current).aggregate(at=Max("at"))["at"]
    changed_at = max(filter(None, [current.updated_at, last_event]))
    return EditConflict(
        title=str(current),
        changed_by=current.updated_by,
        changed_at=changed_at,
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
    return (scheduler_text(node) if node else "Scheduler")[:200]


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


def _event(post: Post, kind: str, *, user=None, node: str = "", data=None, lateness=None):
    """Record a publish event; ``data`` holds its typed details (see :mod:`publishing.history`)."""
    return PublishEvent.objects.create(
        post=post,
        kind=kind,
        user=_user_or_none(user),
        node=node,
        data=data or {},
        lateness=lateness,
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
        when = f" at {local_time(current.published_at)}" if current.published_at else ""
        return InvalidTransition(
            f"Cannot {action} “{current}”: it is already published{when}. Unpublish it instead."
        )
    return InvalidTransition(f"Cannot {action} “{current}”: it is {current.get_status_display()}.")


def _check_times(post: Post) -> None:
    """Refuse planned times no page could show (and naive ones) before they are stored."""
    errors = time_problems(publish_at=post.publish_at, unpublish_at=post.unpublish_at)
    if errors:
        raise InvalidSchedule(errors)


def _check_text(post: Post) -> None:
    """Refuse a title, slug or body holding characters no page can carry, naming the field."""
    errors = text_problems(title=post.title, slug=post.slug, body=post.body)
    if errors:
        raise InvalidContent(errors)


def _check_publishable(post: Post) -> None:
    problems = publish_problems(title=post.title, slug=post.slug, body_length=len(post.body))
    problems += body_text_problems(post.body)
    if problems:
        raise NotPublishable(problems)


# --- editor actions ---------------------------------------------------------------------


def save_post(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Create ``post`` as a draft, or save its content (title, slug, body).

    Publishing state is never written here: ``status`` and ``published_at`` only change through
    the actions below, so a stale admin form cannot undo a publish. Drafts and unpublished
    posts keep their planned times; a scheduled post's times change through
    :func:`reschedule_post`. Saving clears a failed publish, so the job tries the post again.
    Planned times kept on a draft must still be ones every time zone can show, and the text
    may hold no character a page or feed cannot carry (:class:`InvalidContent`). The body is
    rendered here, outside the transaction, and stored: page views never render Markdown.
    """
    _check_text(post)
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
            if current.status == S.PUBLISHED and (post.title, post.body) != (
                current.title,
                current.body,
            ):
                _record_direct_edit(current, post, user=user)
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
        data = {"publish_at": stored_time(publish_at), "unpublish_at": stored_time(unpublish_at)}
        _event(current, K.SCHEDULED, user=user, data=data)
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
        data = {
            "publish_at": stored_time(publish_at),
            "previous_publish_at": stored_time(current.publish_at),
        }
        if unpublish_at != current.unpublish_at:
            data["unpublish_at"] = stored_time(unpublish_at)
            data["previous_unpublish_at"] = stored_time(current.unpublish_at)
        _event(current, K.RESCHEDULED, user=user, data=data)
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
        _event(
            current, K.CANCELLED, user=user, data={"was_due_at": stored_time(current.publish_at)}
        )
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
        _event(current, K.PUBLISHED, user=user, data={"by_hand": True})
        if current.unpublish_at is not None:
            request_wakeup(PUBLISH_JOB, at=current.unpublish_at)
    post.refresh_from_db()
    return post


def unpublish_now(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Take a published post down at once; its pending revisions are superseded."""
    _require_permission(user, "unpublish posts")
    with transaction.atomic():
        current = _lock(post, expected_version)
        if current.status != S.PUBLISHED:
            raise InvalidTransition(
                f"Cannot unpublish “{current}”: it is {current.get_status_display()}, not live."
            )
        _conditional_update(current, user=user, status=S.UNPUBLISHED)
        _event(current, K.UNPUBLISHED, user=user, data={"by_hand": True})
        _supersede(current, PENDING, by=_editor_name(user), note=UNPUBLISHED_NOTE, user=user)
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
        data = {
            "unpublish_at": stored_time(unpublish_at),
            "previous_unpublish_at": stored_time(current.unpublish_at),
        }
        _event(current, K.RESCHEDULED, user=user, data=data)
        if unpublish_at is not None:
            request_wakeup(PUBLISH_JOB, at=unpublish_at)
    post.refresh_from_db()
    return post


def delete_post(*, post: Post, user, expected_version: int | None = None) -> None:
    """Delete ``post``; keep its publish history, named by its title, and record the deletion.

    The events lose their link to the post (``post`` becomes empty) and keep ``post_title``; a
    "Post deleted" event says who deleted it. A post without history leaves no trace
    unless it was live (its going changes the public pages). Pending revisions go with the
    post; each leaves a "Revision superseded" event saying so.
    """
    with transaction.atomic():
        current = _lock(post, expected_version)
        if not can_delete(user, current):
            raise PermissionDenied(
                f"“{current}” has a publish history (it was scheduled or published): only a "
                "superuser may delete it."
            )
        title = str(current)[:200]
        _supersede(current, PENDING, by=_editor_name(user), note=DELETED_NOTE, user=user)
        kept = PublishEvent.objects.filter(post=current).update(post_title=title)
        data = {"slug": current.slug, "was": current.status}
        pk = current.pk
        current.delete()
        # A live post always leaves a trace: its going is a change of the public pages.
        if kept or current.status == S.PUBLISHED:
            PublishEvent.objects.create(
                post=None, post_title=title, kind=K.DELETED, user=_user_or_none(user), data=data
            )
    logger.info(
        "post %s (slug %r) deleted by %s; %d publish events kept",
        pk,
        current.slug,
        _editor_name(user) or "the system",
        kept,
    )


# --- scheduled revisions of live posts ----------------------------------------------------
#
# A live post's new title and body go live at a planned time as a revision. A post has at
# most one scheduled and one draft revision: a newer one supersedes the one before, under the
# post's row lock, which every revision write takes first (the publish job too, with SKIP
# LOCKED), so no two writers wait for each other in a cycle. Scheduling, cancelling and
# restoring change the post's version (a stale form is refused) but not ``updated_at``: that
# is the public pages' Last-Modified, and a planned change must not show there.


def _touch(current: Post, *, user, **values) -> None:
    """Add one to ``current``'s version (and set ``values``) without moving ``updated_at``."""
    updated = Post.objects.filter(pk=current.pk, version=current.version).update(
        updated_by=_editor_name(user), version=_next_version(), **values
    )
    if not updated:
        # Unreachable while the row lock is held; kept so a change can never be blind.
        raise InvalidTransition(f"“{current}” changed while being saved; reload and try again.")


def _next_number(post: Post) -> int:
    """Return the post's next revision number (call under the post's row lock)."""
    last = PostRevision.objects.filter(post=post).aggregate(n=Max("number"))["n"]
    return (last or 0) + 1


def _ensure_baseline(current: Post) -> None:
    """Record the live content as revision 1 if the post has none, so it can be restored."""
    if PostRevision.objects.filter(post=current).exists():
        return
    PostRevision.objects.create(
        post=current,
        number=1,
        title=current.title,
        body=current.body,
        body_html=current.body_html,
        excerpt=current.excerpt,
        status=R.PUBLISHED,
        publish_at=current.publish_at,
        published_at=current.published_at,
        created_by=current.author,
        closed_at=current.published_at,
        note="the live version before the first revision",
    )


def _supersede(current: Post, statuses, *, by: str, note: str, user=None) -> None:
    """Set aside the post's revisions in ``statuses`` (call under the post's row lock)."""
    replaced = list(
        PostRevision.objects.filter(post=current, status__in=statuses).values_list(
            "pk", "number", "status"
        )
    )
    if not replaced:
        return
    PostRevision.objects.filter(pk__in=[pk for pk, _, _ in replaced]).update(
        status=R.SUPERSEDED, closed_at=Now(), closed_by=by[:200], note=note[:300]
    )
    for _, number, status in replaced:
        data = {"revision": number, "revision_status": status, "note": note}
        _event(current, K.REVISION_SUPERSEDED, user=user, data=data)


def _record_direct_edit(current: Post, saved: Post, *, user) -> None:
    """Record a live post's edited title and body as a revision that went live now.

    Publishing a change directly supersedes a scheduled revision (as in Wagtail): it would
    otherwise overwrite this edit at its time with text written before it.
    """
    _ensure_baseline(current)
    number = _next_number(current)
    _supersede(
        current,
        PENDING,
        by=_editor_name(user),
        note=f"the live post was edited directly (revision {number})",
        user=user,
    )
    PostRevision.objects.create(
        post=current,
        number=number,
        title=saved.title,
        body=saved.body,
        body_html=saved.body_html,
        excerpt=saved.excerpt,
        status=R.PUBLISHED,
        published_at=Now(),
        created_by=_user_or_none(user),
        closed_at=Now(),
        closed_by=_editor_name(user),
        note="edited directly",
    )


def _live_post_for_revisions(current: Post, action: str) -> None:
    if current.status != S.PUBLISHED:
        raise InvalidTransition(
            f"Cannot {action} “{current}”: it is {current.get_status_display()}, not live; "
            "edit the post itself."
        )


def revision_problems(*, post: Post, title: str, body: str) -> list[str]:
    """Return why a revision with this title and body could not go live (empty when it can)."""
    problems = publish_problems(title=title, slug=post.slug, body_length=len(body.strip()))
    return problems + body_text_problems(body)


def schedule_revision(
    *,
    post: Post,
    title: str,
    body: str,
    publish_at: datetime,
    user,
    expected_version: int | None = None,
) -> PostRevision:
    """Schedule a new title and body for live ``post`` to go live at ``publish_at``.

    The public site shows the current version until the publish job switches the revision in
    (at its time by the database clock, exactly once, and only if it is still scheduled and
    the post still live). A pending revision of the post is superseded by this one.
    """
    _require_permission(user, "schedule revisions")
    rendered = render(body)
    with transaction.atomic():
        current = _lock(post, expected_version)
        _live_post_for_revisions(current, "schedule a revision of")
        errors = schedule_problems(publish_at=publish_at, unpublish_at=None, now=database_now())
        if not errors and current.unpublish_at and publish_at >= current.unpublish_at:
            errors["publish_at"] = (
                "The revision would go live after the post is taken down: choose a time "
                "before the post's unpublish time."
            )
        if errors:
            raise InvalidSchedule(errors)
        problems = revision_problems(post=current, title=title, body=body)
        if problems:
            raise NotPublishable(problems)
        _ensure_baseline(current)
        number = _next_number(current)
        _supersede(
            current,
            PENDING,
            by=_editor_name(user),
            note=f"revision {number} was scheduled",
            user=user,
        )
        revision = PostRevision.objects.create(
            post=current,
            number=number,
            title=title,
            body=body,
            body_html=rendered.html,
            excerpt=rendered.excerpt,
            status=R.SCHEDULED,
            publish_at=publish_at,
            created_by=_user_or_none(user),
        )
        _touch(current, user=user)
        data = {"revision": number, "publish_at": stored_time(publish_at)}
        _event(current, K.REVISION_SCHEDULED, user=user, data=data)
        request_wakeup(PUBLISH_JOB, at=publish_at)
    revision.refresh_from_db()
    post.refresh_from_db()
    return revision


def _closed_reason(revision: PostRevision) -> str:
    if revision.status == R.PUBLISHED:
        return f"it went live at {local_time(revision.published_at)}"
    return f"it is {revision.get_status_display().lower()}"


def cancel_revision(
    *, revision: PostRevision, user, expected_version: int | None = None
) -> PostRevision:
    """Cancel a scheduled (or discard a draft) revision; it never goes live.

    Raises :class:`InvalidTransition` if the publish job switched it in first.
    """
    _require_permission(user, "cancel revisions")
    with transaction.atomic():
        current = _lock(revision.post, expected_version)
        was = PostRevision.objects.get(pk=revision.pk)
        if was.status not in PENDING:
            raise InvalidTransition(f"Cannot cancel revision {was.number}: {_closed_reason(was)}.")
        PostRevision.objects.filter(pk=was.pk, status=was.status).update(
            status=R.CANCELLED, closed_at=Now(), closed_by=_editor_name(user)
        )
        _touch(current, user=user)
        data = {"revision": was.number, "revision_status": was.status}
        if was.status == R.SCHEDULED:
            data["was_due_at"] = stored_time(was.publish_at)
        _event(current, K.REVISION_CANCELLED, user=user, data=data)
    revision.refresh_from_db()
    return revision


def restore_revision(
    *, revision: PostRevision, user, expected_version: int | None = None
) -> PostRevision:
    """Copy an earlier revision's title and body into a new draft revision of its live post.

    The draft supersedes a pending draft (not a scheduled revision); schedule it to put it
    live. Its body is rendered again, with today's rules.
    """
    _require_permission(user, "restore revisions")
    rendered = render(revision.body)
    with transaction.atomic():
        current = _lock(revision.post, expected_version)
        _live_post_for_revisions(current, "restore a revision of")
        source = PostRevision.objects.get(pk=revision.pk)
        number = _next_number(current)
        note = f"revision {number} restores revision {source.number}"
        _supersede(current, [R.DRAFT], by=_editor_name(user), note=note, user=user)
        draft = PostRevision.objects.create(
            post=current,
            number=number,
            title=source.title,
            body=source.body,
            body_html=rendered.html,
            excerpt=rendered.excerpt,
            status=R.DRAFT,
            created_by=_user_or_none(user),
            restored_from=source,
            note=f"restored from revision {source.number}",
        )
        _touch(current, user=user)
    return draft


# --- preview links ------------------------------------------------------------------------


def can_preview(user) -> bool:
    """Return True if ``user`` may hand out (and revoke) preview links: editors of posts."""
    return user is None or user.has_perm("publishing.change_post")


def preview_url(*, post: Post, user, expires_in: timedelta, now: datetime | None = None) -> str:
    """Return the path of a signed link that shows ``post``'s next version until it expires.

    Anyone with the link sees the newest pending revision (draft or scheduled) or else the
    post as it is, marked as a preview. The link expires ``expires_in`` after ``now`` (the
    database's time) and dies with :func:`revoke_preview_links`; see :mod:`publishing.previews`.
    """
    if not can_preview(user):
        raise PermissionDenied(
            f"{user.get_username() or 'This user'} may not share previews: that needs the "
            "“Can change post” permission (publishing.change_post)."
        )
    previews.check_lifetime(expires_in)
    now = database_now() if now is None else now
    generation = Post.objects.values_list("preview_generation", flat=True).get(pk=post.pk)
    token = previews.make_token(post_id=post.pk, generation=generation, expires_at=now + expires_in)
    logger.info(
        "preview link for post %s made by %s, valid until %s",
        post.pk,
        _editor_name(user) or "the system",
        _iso(now + expires_in),
    )
    return reverse("publishing:preview", kwargs={"token": token})


def revoke_preview_links(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Make every preview link of ``post`` given out so far a 404."""
    if not can_preview(user):
        raise PermissionDenied(
            f"{user.get_username() or 'This user'} may not revoke previews: that needs the "
            "“Can change post” permission (publishing.change_post)."
        )
    with transaction.atomic():
        current = _lock(post, expected_version)
        _touch(current, user=user, preview_generation=F("preview_generation") + 1)
        _event(current, K.PREVIEWS_REVOKED, user=user)
    post.refresh_from_db()
    return post


# --- the publish job's batches -----------------------------------------------------------


class DueRow(NamedTuple):
    """A post selected for a due publish or unpublish, with what the cheap checks need.

    A named tuple, not a dataclass: a backlog batch makes 10,000 of them, and a frozen
    dataclass costs several times more to build.
    """

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
    max_chars = int(settings.POST_BODY_MAX_CHARS)
    for row in rows:
        problems = publish_problems(
            title=row.title, slug=row.slug, body_length=row.body_length, max_chars=max_chars
        )
        if not problems:
            good.append(row)
        elif _record_failure(row, "; ".join(problems), node=node, now=now):
            failed.append(row.pk)
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
        values={**values, "updated_at": now, "updated_by": _scheduler_name(node)},
        kind=kind,
        node=node,
        now=now,
        set_aside=set_aside,
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
        data={"error": message},
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
        .values_list("pk", "unpublish_at")
    )
    return [DueRow(*row) for row in _skip_locked(queryset)[:batch_size]]


def unpublish_selected(
    *, rows: list[DueRow], now: datetime, node: str = "", batch_size: int | None = None
) -> BatchResult:
    """Take down the selected posts that are still published and past their unpublish time.

    Their pending revisions are superseded in the same change (see :class:`SetAside`).
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
            set_aside=SetAside(statuses=PENDING, note=EXPIRED_NOTE),
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
    rows = [DueRevision(*row) for row in _skip_locked(queryset)[:batch_size]]
    if not rows:
        return [], {}
    posts = Post.objects.filter(pk__in={row.post_id for row in rows}).values_list("pk", "status")
    statuses = dict(_skip_locked(posts))
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
    and of two due revisions of one post (which the services never leave) only the newest
    goes live. ``now`` is the database time read in this transaction.
    """
    newest: dict[int, DueRevision] = {}
    for row in rows:
        if post_statuses.get(row.post_id) == S.PUBLISHED:
            newest[row.post_id] = row  # rows come oldest first
    winners = list(newest.values())
    losers = [row for row in rows if newest.get(row.post_id) is not row]
    switched: list[DueRevision] = []
    if winners:
        by_pk = {row.pk: row for row in winners}
        still_due = PostRevision.objects.filter(status=R.SCHEDULED, publish_at__lte=now)
        matched = _conditional_revision_update(
            still_due,
            list(by_pk),
            status=R.PUBLISHED,
            published_at=now,
            closed_at=now,
            closed_by=_scheduler_name(node),
        )
        switched = [by_pk[pk] for pk in matched]
    if switched:
        _copy_revisions_onto_posts(switched, now=now, node=node)
        _insert_revision_events(K.REVISION_PUBLISHED, switched, node=node, now=now, note="")
    if losers:
        still_due = PostRevision.objects.filter(status=R.SCHEDULED, publish_at__lte=now)
        by_pk = {row.pk: row for row in losers}
        note = "the post was not live at the revision's time, or a newer revision was due"
        matched = _conditional_revision_update(
            still_due,
            list(by_pk),
            status=R.SUPERSEDED,
            closed_at=now,
            closed_by=_scheduler_name(node),
            note=note,
        )
        superseded = [by_pk[pk] for pk in matched]
        _insert_revision_events(K.REVISION_SUPERSEDED, superseded, node=node, now=now, note=note)
        for row in superseded:
            logger.warning(
                "revision %s of post %s due at %s did not go live: %s",
                row.number,
                row.post_id,
                row.planned.isoformat(),
                note,
            )
    return BatchResult(
        now=now,
        selected=len(rows),
        done=[row.pk for row in switched],
        failed=[],
        batch_size=_batch_size(batch_size),
    )


def _conditional_revision_update(condition: QuerySet, ids: list[int], **values) -> list[int]:
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


def _copy_revisions_onto_posts(rows: list[DueRevision], *, now: datetime, node: str) -> None:
    """Copy each switched revision's content onto its (locked, live) post in one UPDATE."""
    revision = PostRevision.objects.filter(pk__in=[row.pk for row in rows], post_id=OuterRef("pk"))

    def column(name: str) -> Subquery:
        return Subquery(revision.values(name)[:1])

    updated = Post.objects.filter(pk__in=[row.post_id for row in rows], status=S.PUBLISHED).update(
        title=column("title"),
        body=column("body"),
        body_html=column("body_html"),
        excerpt=column("excerpt"),
        last_error="",
        updated_at=now,
        updated_by=_scheduler_name(node),
        version=_next_version(),
    )
    if updated != len(rows):
        raise ConcurrentChange(
            f"{len(rows)} revisions switched but {updated} posts were updated; rolling back"
        )


def _insert_revision_events(
    kind: str, rows: list[DueRevision], *, node: str, now: datetime, note: str
) -> None:
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
