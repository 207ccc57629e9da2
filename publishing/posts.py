"""The editor actions on a post: save, schedule, reschedule, cancel, publish, unpublish, delete.

One code path for the admin, scripts and tests; each action takes the post's row lock and
makes its change through :mod:`publishing.actions`. The publish job's due publish is the same
kind of conditional change in batches (:mod:`publishing.batches`): a post goes ``scheduled ->
published`` only if it is still scheduled and due by the database clock when the ``UPDATE``
runs, so a cancel that wins the race is never published and nothing is published twice,
whichever replica (or stale leader) runs the job.

Actions that schedule, publish or unpublish need the ``publishing.publish_post`` permission
(:func:`publishing.actions.can_publish`).
"""

import logging
from dataclasses import astuple
from datetime import datetime

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now

from coordination.clock import database_now
from publishing import draft_versions, go_live, hooks, revisions
from publishing.actions import (
    can_publish,
    editor_action,
    editor_name,
    require_permission,
    user_or_none,
)
from publishing.exceptions import InvalidContent, InvalidSchedule, InvalidTransition, NotPublishable
from publishing.history import local_time, stored_time
from publishing.models import Post, PublishEvent
from publishing.public_events import announce_events
from publishing.rendering import render
from publishing.validation import (
    body_text_problems,
    publish_problems,
    schedule_problems,
    text_problems,
    time_problems,
)

logger = logging.getLogger(__name__)

S = Post.Status
K = PublishEvent.Kind

# Why a takedown sets the post's pending revisions aside (each "Revision superseded" event
# says it): written for the version that went down, a revision must not go live over what
# is published next.
UNPUBLISHED_NOTE = "the post was unpublished before the revision went live"
DELETED_NOTE = "the post was deleted"


#: What :func:`save_post` writes of the post it is given: its text and the text rendered.
CONTENT_FIELDS = ("title", "slug", "body", "body_html", "excerpt")


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
    if post._state.adding:
        _create_draft(post, user=user)
        post.refresh_from_db()
        return post
    with editor_action(post, user=user, expected_version=expected_version) as action:
        current = action.current
        if current.status in (S.SCHEDULED, S.PUBLISHED):
            require_permission(user, "edit a scheduled or published post")
        content = {name: getattr(post, name) for name in CONTENT_FIELDS}
        if current.status in (S.DRAFT, S.UNPUBLISHED):
            _check_times(post)
            content.update(publish_at=post.publish_at, unpublish_at=post.unpublish_at)
        # A failed post was skipped while failed; it may be due right now.
        wake_at = current.publish_at if current.is_failed else None
        verdicts = hooks.saving(current, post, user=user)
        if current.status == S.SCHEDULED and any(v.back_to_draft for v in verdicts):
            content["status"] = S.DRAFT
        if current.status in (S.DRAFT, S.UNPUBLISHED):
            draft_versions.keep_replaced(current, post)
        action.change(wake_at=wake_at, **content, last_error="")
        hooks.saved(verdicts)
        if current.status == S.PUBLISHED and (post.title, post.body) != (
            current.title,
            current.body,
        ):
            revisions.record_direct_edit(current, post, user=user)
    post.refresh_from_db()
    return post


def _require_may_go_live(current: Post) -> None:
    """Refuse to schedule or publish ``current`` (locked) if a check another app added says it
    may not go live (reviews: not approved as it is now)."""
    problem = go_live.editor_problem(go_live.POST, current)
    if problem:
        raise NotPublishable([problem])


def _create_draft(post: Post, *, user) -> None:
    """Insert ``post`` as a draft at version 1, written by ``user`` (its author unless set).

    The new post is told to the post-changed receivers in the same transaction, as every
    later change is: what they keep of a post (media: the images its text uses) holds from
    its first save, also if a release puts it live without another edit."""
    post.status = S.DRAFT
    post.published_at = None
    post.last_error = ""
    post.version = 1
    post.updated_by = editor_name(user)
    if post.author_id is None:
        post.author = user_or_none(user)
    _check_times(post)
    with transaction.atomic():
        post.save(force_insert=True)
        hooks.post_changed([post.pk], user=user)


def schedule_post(
    *,
    post: Post,
    publish_at: datetime,
    unpublish_at: datetime | None = None,
    user,
    expected_version: int | None = None,
) -> Post:
    """Schedule a draft (or unpublished) post to go live at ``publish_at``."""
    require_permission(user, "schedule posts")
    with editor_action(post, user=user, expected_version=expected_version) as action:
        current = action.current
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
        _require_may_go_live(current)
        action.change(
            K.SCHEDULED,
            data={"publish_at": stored_time(publish_at), "unpublish_at": stored_time(unpublish_at)},
            wake_at=publish_at,
            status=S.SCHEDULED,
            publish_at=publish_at,
            unpublish_at=unpublish_at,
            published_at=None,
            last_error="",
        )
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
    require_permission(user, "reschedule posts")
    with editor_action(post, user=user, expected_version=expected_version) as action:
        current = action.current
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
        data = {
            "publish_at": stored_time(publish_at),
            "previous_publish_at": stored_time(current.publish_at),
        }
        if unpublish_at != current.unpublish_at:
            data["unpublish_at"] = stored_time(unpublish_at)
            data["previous_unpublish_at"] = stored_time(current.unpublish_at)
        action.change(
            K.RESCHEDULED,
            data=data,
            wake_at=publish_at,
            publish_at=publish_at,
            unpublish_at=unpublish_at,
            last_error="",
        )
    post.refresh_from_db()
    return post


def cancel_schedule(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Take a scheduled post back to draft; it keeps its planned times but never goes live.

    Raises :class:`InvalidTransition` if the publish job published it first.
    """
    require_permission(user, "cancel scheduled posts")
    with editor_action(post, user=user, expected_version=expected_version) as action:
        current = action.current
        if current.status != S.SCHEDULED:
            raise _wrong_state(current, "cancel the schedule of")
        data = {"was_due_at": stored_time(current.publish_at)}
        action.change(K.CANCELLED, data=data, status=S.DRAFT, last_error="")
    post.refresh_from_db()
    return post


def publish_now(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Put a draft, scheduled or unpublished post live at once."""
    require_permission(user, "publish posts")
    with editor_action(post, user=user, expected_version=expected_version) as action:
        current = action.current
        if current.status == S.PUBLISHED:
            raise _wrong_state(current, "publish")
        _check_publishable(current)
        _require_may_go_live(current)
        if current.unpublish_at is not None and current.unpublish_at <= database_now():
            raise InvalidSchedule(
                {"unpublish_at": "The unpublish time has passed; change or clear it first."}
            )
        action.change(
            K.PUBLISHED,
            data={"by_hand": True},
            wake_at=current.unpublish_at,
            status=S.PUBLISHED,
            published_at=Now(),
            last_error="",
        )
    post.refresh_from_db()
    return post


def unpublish_now(*, post: Post, user, expected_version: int | None = None) -> Post:
    """Take a published post down at once; its pending revisions are superseded and its
    preview links end."""
    require_permission(user, "unpublish posts")
    with editor_action(post, user=user, expected_version=expected_version) as action:
        current = action.current
        if current.status != S.PUBLISHED:
            raise InvalidTransition(
                f"Cannot unpublish “{current}”: it is {current.get_status_display()}, not live."
            )
        action.change(
            K.UNPUBLISHED,
            data={"by_hand": True},
            status=S.UNPUBLISHED,
            preview_generation=F("preview_generation") + 1,  # its preview links end
        )
        revisions.supersede(current, revisions.PENDING, note=UNPUBLISHED_NOTE, user=user)
    post.refresh_from_db()
    return post


def set_unpublish_at(
    *, post: Post, unpublish_at: datetime | None, user, expected_version: int | None = None
) -> Post:
    """Set (or clear) when a published post is taken down."""
    require_permission(user, "schedule unpublishing")
    with editor_action(post, user=user, expected_version=expected_version) as action:
        current = action.current
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
        data = {
            "unpublish_at": stored_time(unpublish_at),
            "previous_unpublish_at": stored_time(current.unpublish_at),
        }
        action.change(K.RESCHEDULED, data=data, wake_at=unpublish_at, unpublish_at=unpublish_at)
    post.refresh_from_db()
    return post


def delete_post(*, post: Post, user, expected_version: int | None = None) -> None:
    """Delete ``post``; keep its publish history, named by its title, and record the deletion.

    The events lose their link to the post (``post`` becomes empty) and keep ``post_title``; a
    "Post deleted" event says who deleted it. A post without history leaves no trace
    unless it was live (its going changes the public pages). Pending revisions go with the
    post; each leaves a "Revision superseded" event saying so.
    """
    with editor_action(post, user=user, expected_version=expected_version) as action:
        current = action.current
        if not can_delete(user, current):
            raise PermissionDenied(
                f"“{current}” has a publish history (it was scheduled or published): only a "
                "superuser may delete it."
            )
        title = str(current)[:200]
        revisions.supersede(current, revisions.PENDING, note=DELETED_NOTE, user=user)
        kept = PublishEvent.objects.filter(post=current).update(post_title=title)
        data = {"slug": current.slug, "was": current.status, "post": current.pk}
        pk = current.pk
        hooks.posts_deleting([pk])
        current.delete()
        # A live post always leaves a trace: its going is a change of the public pages.
        if kept or current.status == S.PUBLISHED:
            PublishEvent.objects.create(
                post=None, post_title=title, kind=K.DELETED, user=user_or_none(user), data=data
            )
            if current.status == S.PUBLISHED:
                announce_events()
    logger.info(
        "post %s (slug %r) deleted by %s; %d publish events kept",
        pk,
        current.slug,
        editor_name(user) or "the system",
        kept,
    )
