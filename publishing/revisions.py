"""Scheduled revisions of live posts: schedule, cancel and restore, and what sets them aside.

A live post's new title and body go live at a planned time as a revision. A post has at most
one scheduled and one draft revision: a newer one supersedes the one before, under the post's
row lock, which every revision write takes first (the publish job too, with SKIP LOCKED), so
no two writers wait for each other in a cycle. Scheduling, cancelling and restoring change the
post's version (a stale form is refused) but not ``updated_at``: that is the public pages'
Last-Modified, and a planned change must not show there (a change with ``public=False``,
:meth:`publishing.actions.EditorAction.change`). The publish job switches due revisions in
(:func:`publishing.batches.switch_due_revisions`).
"""

from datetime import datetime

from django.db.models import Max
from django.db.models.functions import Now

from coordination.clock import database_now
from publishing import go_live, hooks
from publishing.actions import (
    editor_action,
    editor_name,
    record_event,
    require_permission,
    user_or_none,
)
from publishing.exceptions import InvalidSchedule, InvalidTransition, NotPublishable
from publishing.history import local_time, stored_time
from publishing.models import PENDING_REVISION, Post, PostRevision, PublishEvent
from publishing.rendering import render
from publishing.validation import body_text_problems, publish_problems, schedule_problems

S = Post.Status
K = PublishEvent.Kind
R = PostRevision.Status
#: A post's revisions that have not gone live and may still: what a takedown sets aside.
PENDING = PENDING_REVISION


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


def supersede(current: Post, statuses, *, note: str, user=None) -> None:
    """Set aside the post's revisions in ``statuses`` (call under the post's row lock).

    Each gets ``note`` and a "Revision superseded" event; ``user`` closes them.
    """
    replaced = list(
        PostRevision.objects.filter(post=current, status__in=statuses).values_list(
            "pk", "number", "status"
        )
    )
    if not replaced:
        return
    PostRevision.objects.filter(pk__in=[pk for pk, _, _ in replaced]).update(
        status=R.SUPERSEDED, closed_at=Now(), closed_by=editor_name(user)[:200], note=note[:300]
    )
    for _, number, status in replaced:
        data = {"revision": number, "revision_status": status, "note": note}
        record_event(current, K.REVISION_SUPERSEDED, user=user, data=data)


def record_direct_edit(current: Post, saved: Post, *, user) -> None:
    """Record a live post's edited title and body as a revision that went live now.

    Publishing a change directly supersedes a scheduled revision (as in Wagtail): it would
    otherwise overwrite this edit at its time with text written before it.
    """
    _ensure_baseline(current)
    number = _next_number(current)
    note = f"the live post was edited directly (revision {number})"
    supersede(current, PENDING, note=note, user=user)
    PostRevision.objects.create(
        post=current,
        number=number,
        title=saved.title,
        body=saved.body,
        body_html=saved.body_html,
        excerpt=saved.excerpt,
        status=R.PUBLISHED,
        published_at=Now(),
        created_by=user_or_none(user),
        closed_at=Now(),
        closed_by=editor_name(user),
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
    require_permission(user, "schedule revisions")
    rendered = render(body)
    with editor_action(post, user=user, expected_version=expected_version) as action:
        current = action.current
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
        problem = go_live.editor_problem(go_live.REVISION, current, title=title, body=body)
        if problem:
            raise NotPublishable([problem])
        _ensure_baseline(current)
        number = _next_number(current)
        supersede(current, PENDING, note=f"revision {number} was scheduled", user=user)
        revision = _create(
            current,
            number=number,
            title=title,
            body=body,
            rendered=rendered,
            user=user,
            status=R.SCHEDULED,
            publish_at=publish_at,
        )
        data = {"revision": number, "publish_at": stored_time(publish_at)}
        action.change(K.REVISION_SCHEDULED, data=data, wake_at=publish_at, public=False)
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
    require_permission(user, "cancel revisions")
    with editor_action(revision.post, user=user, expected_version=expected_version) as action:
        was = PostRevision.objects.get(pk=revision.pk)
        if was.status not in PENDING:
            raise InvalidTransition(f"Cannot cancel revision {was.number}: {_closed_reason(was)}.")
        PostRevision.objects.filter(pk=was.pk, status=was.status).update(
            status=R.CANCELLED, closed_at=Now(), closed_by=editor_name(user)
        )
        data = {"revision": was.number, "revision_status": was.status}
        if was.status == R.SCHEDULED:
            data["was_due_at"] = stored_time(was.publish_at)
        action.change(K.REVISION_CANCELLED, data=data, public=False)
    revision.refresh_from_db()
    return revision


def write_draft(
    current: Post,
    *,
    title: str,
    body: str,
    rendered,
    user,
    restored_from: PostRevision | None = None,
    note: str = "",
) -> PostRevision:
    """Write a draft revision of live ``current`` (locked), replacing a pending draft.

    The caller moves the post's version (``action.change(public=False)``) in the same
    transaction.
    """
    problem = hooks.new_draft_problem(current)
    if problem:
        raise InvalidTransition(problem)
    number = _next_number(current)
    reason = (
        f"revision {number} restores revision {restored_from.number}"
        if restored_from
        else f"revision {number} was written"
    )
    supersede(current, [R.DRAFT], note=reason, user=user)
    return _create(
        current,
        number=number,
        title=title,
        body=body,
        rendered=rendered,
        user=user,
        status=R.DRAFT,
        restored_from=restored_from,
        note=note,
    )


def _create(current: Post, *, number: int, title: str, body: str, rendered, user, **values):
    """Insert revision ``number`` of ``current`` with its rendered body, written by ``user``."""
    return PostRevision.objects.create(
        post=current,
        number=number,
        title=title,
        body=body,
        body_html=rendered.html,
        excerpt=rendered.excerpt,
        created_by=user_or_none(user),
        **values,
    )


def restore_revision(
    *, revision: PostRevision, user, expected_version: int | None = None
) -> PostRevision:
    """Copy an earlier revision's title and body into a new draft revision of its live post.

    The draft supersedes a pending draft (not a scheduled revision); schedule it to put it
    live. Its body is rendered again, with today's rules.
    """
    require_permission(user, "restore revisions")
    rendered = render(revision.body)
    with editor_action(revision.post, user=user, expected_version=expected_version) as action:
        current = action.current
        _live_post_for_revisions(current, "restore a revision of")
        source = PostRevision.objects.get(pk=revision.pk)
        draft = write_draft(
            current,
            title=source.title,
            body=source.body,
            rendered=rendered,
            user=user,
            restored_from=source,
            note=f"restored from revision {source.number}",
        )
        action.change(public=False)
    return draft
