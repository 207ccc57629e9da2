"""Review before publish: submit, approve or reject, and the gates on scheduling and publishing.

Off unless ``INSTATIC_REQUIRE_REVIEW`` is on. Then nothing goes live that a reviewer has not
approved as it is: scheduling or publishing a post and scheduling a revision (and what other
apps add, such as releases) each ask :func:`require_approved` for an approval of the exact content
(:mod:`reviews.rules` fingerprints it). An editor without the publish permission
submits a post or a revision (written as a draft revision, which the post keeps);
a reviewer (the ``publishing.review_post`` permission, never the submitter) approves or
rejects it with a comment. A change after the approval sends it back: a scheduled post whose
text changes goes back to draft with a new submission, and a live post's text changes only
through a reviewed revision. Other apps add kinds of content to review (releases:
:func:`add_subject`). Each step is a history event of the post, and an email to the people
concerned (:mod:`reviews.mail`).
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now

from coordination.services import request_wakeup
from publishing import go_live
from publishing.actions import editor_action, record_event, user_or_none
from publishing.conf import settings
from publishing.exceptions import InvalidTransition, NotPublishable
from publishing.job_names import PUBLISH_JOB
from publishing.models import Post, PostRevision, PublishEvent
from publishing.rendering import render
from publishing.revisions import write_draft
from reviews import mail as review_mail
from reviews.models import Review, ReviewTarget
from reviews.rules import (
    decision_problem,
    post_fingerprint,
    revision_fingerprint,
    snapshot_fingerprint,
    unapproved_problem,
)

logger = logging.getLogger(__name__)

S = Post.Status
K = PublishEvent.Kind
T = Review.Target
RS = Review.Status
REVIEW_PERMISSION = "publishing.review_post"


@dataclass(frozen=True)
class Subject:
    """What reviews need to know of a kind of content another app submits for review (a
    release): how to lock it while a review of it is decided, whether it is still what a
    review names, and what its review's page shows."""

    lock: Callable[[Review], None]
    is_current: Callable[[Review], bool]
    content: Callable[[Review], dict]


_subjects: dict[str, Subject] = {}


def add_subject(target: str, subject: Subject) -> None:
    """Let content of ``target`` (one of :class:`ReviewTarget`) be reviewed, as ``subject``
    says (from the app's ``AppConfig.ready``)."""
    _subjects[target] = subject


def subject(target: str) -> Subject | None:
    """Return how reviews handle content of ``target`` another app submits (None: posts and
    revisions, which reviews know themselves, or an app not installed)."""
    return _subjects.get(target)


def required() -> bool:
    """Return True if this site requires a review before anything goes live."""
    return bool(settings.REQUIRE_REVIEW)


def can_review(user) -> bool:
    """Return True if ``user`` may approve or reject reviews (None: the system)."""
    return user is None or user.has_perm(REVIEW_PERMISSION)


def snapshot_of_post(post: Post) -> dict:
    """Return what a review of ``post`` keeps: its title, slug and body as they are."""
    return {"title": post.title, "slug": post.slug, "body": post.body}


def fingerprint_of_post(post: Post) -> str:
    return post_fingerprint(title=post.title, slug=post.slug, body=post.body)


def is_approved(**lookup) -> bool:
    """Return True if a review of ``lookup`` (target, fingerprint, post or other) approved."""
    return _approved(**lookup)


def _approved(**lookup) -> bool:
    return Review.objects.filter(status=RS.APPROVED, **lookup).exists()


def require_approved(*, target: str, fingerprint: str, what: str, **lookup) -> None:
    """Raise :class:`NotPublishable` unless review is off or this content was approved."""
    if required() and not _approved(target=target, fingerprint=fingerprint, **lookup):
        raise NotPublishable([unapproved_problem(what)])


#: Why the publish job holds a due post: nobody approved its content as it is now.
HELD_PROBLEM = (
    "Not approved by a reviewer as it is now, and reviews are required on this site: it stays "
    "scheduled and goes live at once when a reviewer approves it. Submit it for review."
)
#: Why the publish job sets a due revision aside: nobody approved its text.
REVISION_HELD_NOTE = (
    "it was not approved by a reviewer, and reviews are required on this site; restore it "
    "to submit it for review"
)


def go_live_check(kind: str, ids: list[int]) -> dict[int, str]:
    """Hold what no reviewer approved as it is now (a go-live check, :mod:`publishing.go_live`);
    nothing when reviews are off."""
    if not required():
        return {}
    if kind == go_live.POST:
        return dict.fromkeys(unapproved_posts(ids), HELD_PROBLEM)
    if kind == go_live.REVISION:
        return dict.fromkeys(unapproved_revisions(ids), REVISION_HELD_NOTE)
    return {}


def unapproved_posts(post_ids: list[int]) -> set[int]:
    """Return those of ``post_ids`` whose content as it is now no review approved.

    Called by the publish job in the transaction that puts them live, with their rows
    locked, so what it checks is what goes live. Empty when reviews are off.
    """
    if not required() or not post_ids:
        return set()
    approved = set(
        Review.objects.filter(target=T.POST, status=RS.APPROVED, post_id__in=post_ids).values_list(
            "post_id", "fingerprint"
        )
    )
    contents = Post.objects.filter(pk__in=post_ids).values_list("pk", "title", "slug", "body")
    return {
        pk
        for pk, title, slug, body in contents
        if (pk, post_fingerprint(title=title, slug=slug, body=body)) not in approved
    }


def unapproved_revisions(revision_ids: list[int]) -> set[int]:
    """Return those of ``revision_ids`` whose text no review approved (see
    :func:`unapproved_posts`)."""
    if not required() or not revision_ids:
        return set()
    contents = list(
        PostRevision.objects.filter(pk__in=revision_ids).values_list(
            "pk", "post_id", "title", "body"
        )
    )
    approved = set(
        Review.objects.filter(
            target=T.REVISION,
            status=RS.APPROVED,
            post_id__in={post_id for _, post_id, _, _ in contents},
        ).values_list("post_id", "fingerprint")
    )
    return {
        pk
        for pk, post_id, title, body in contents
        if (post_id, revision_fingerprint(post_id=post_id, title=title, body=body)) not in approved
    }


def submit_snapshot(
    *, target: str, snapshot: dict, title: str, user, note: str = "", reason: str = "", **lookup
) -> Review:
    """Record a pending review of ``snapshot`` (replacing a pending one of the same thing);
    tell reviewers. ``note`` is the submitter's own words, ``reason`` Instatic's."""
    post = lookup.get("post")
    fingerprint = snapshot_fingerprint(target, snapshot, post_id=post.pk if post else None)
    if _approved(target=target, fingerprint=fingerprint, **lookup):
        raise InvalidTransition(f"“{title}” is approved as it is already.")
    Review.objects.filter(target=target, status=RS.PENDING, **lookup).update(
        status=RS.WITHDRAWN, decided_at=Now()
    )
    review = Review.objects.create(
        target=target,
        fingerprint=fingerprint,
        snapshot=snapshot,
        title=title[:200],
        note=note,
        reason=reason[:300],
        submitted_by=user_or_none(user),
        **lookup,
    )
    transaction.on_commit(partial(review_mail.tell_reviewers, review.pk), robust=True)
    return review


def submit_post(*, post: Post, user, note: str = "") -> Review:
    """Submit ``post``'s content as it is now for review (a draft, unpublished or scheduled)."""
    with editor_action(post, user=user, expected_version=None) as action:
        current = action.current
        if current.status == S.PUBLISHED:
            raise InvalidTransition(
                f"“{current}” is live: submit a revision of it for review instead."
            )
        review = submit_snapshot(
            target=T.POST,
            snapshot=snapshot_of_post(current),
            title=str(current),
            user=user,
            note=note,
            post=current,
        )
        record_event(current, K.REVIEW_REQUESTED, user=user, data=event_data(review))
    return review


def decide(*, review: Review, user, approve: bool, comment: str = "") -> Review:
    """Approve or reject ``review`` with ``comment``; tell its submitter."""
    with transaction.atomic():
        current = Review.objects.select_for_update().get(pk=review.pk)
        _lock_target(current)
        problem = decision_problem_for(current, user)
        if not problem and approve and not is_current(current):
            problem = (
                "It has changed since it was submitted, so what you read is not what was "
                "submitted: nothing was approved. It needs a new submission."
            )
        if problem:
            raise PermissionDenied(problem) if not can_review(user) else InvalidTransition(problem)
        status = RS.APPROVED if approve else RS.REJECTED
        Review.objects.filter(pk=current.pk, status=RS.PENDING).update(
            status=status, decided_by=user_or_none(user), decided_at=Now(), comment=comment
        )
        if approve and current.target == T.POST:
            _let_held_post_go(current.post_id)
        if current.post_id is not None:
            post = Post.objects.get(pk=current.post_id)
            kind = K.REVIEW_APPROVED if approve else K.REVIEW_REJECTED
            data = {**event_data(current), "comment": comment}
            if current.revision_id:
                data["revision"] = PostRevision.objects.get(pk=current.revision_id).number
            record_event(post, kind, user=user, data=data)
        transaction.on_commit(partial(review_mail.tell_submitter, current.pk), robust=True)
    review.refresh_from_db()
    return review


def _let_held_post_go(post_id: int) -> None:
    """Let the publish job take a scheduled post it held for want of this approval."""
    at = (
        Post.objects.filter(pk=post_id, status=S.SCHEDULED, last_error=HELD_PROBLEM)
        .values_list("publish_at", flat=True)
        .first()
    )
    if at is None:
        return
    Post.objects.filter(pk=post_id, last_error=HELD_PROBLEM).update(
        last_error="", version=F("version") + 1
    )
    request_wakeup(PUBLISH_JOB, at=at, skip_locked=True)


def _lock_target(review: Review) -> None:
    """Lock what a review is about, so it cannot change while it is decided."""
    other = subject(review.target)
    if other is not None:
        other.lock(review)
    elif review.post_id is not None:
        Post.objects.select_for_update().filter(pk=review.post_id).first()


def send_back(current: Post, *, user, reason: str) -> None:
    """Record that ``current`` (locked, changed after approval) needs a review again."""
    review = submit_snapshot(
        target=T.POST,
        snapshot=snapshot_of_post(Post.objects.get(pk=current.pk)),
        title=str(current),
        user=user,
        reason=reason,
        post=current,
    )
    record_event(current, K.REVIEW_RESET, user=user, data=event_data(review))


def latest(**lookup) -> Review | None:
    """Return the newest review of a post, revision or other subject (not a replaced one)."""
    return Review.objects.filter(**lookup).exclude(status=RS.WITHDRAWN).first()


def decision_problem_for(review: Review, user) -> str:
    """Return why ``user`` may not decide ``review`` now (empty when they may)."""
    return decision_problem(
        may_review=can_review(user),
        is_submitter=user is not None and review.submitted_by_id == getattr(user, "pk", None),
        status=review.status,
    )


def is_current(review: Review) -> bool:
    """Return True if what ``review`` is about is still the content it names."""
    other = subject(review.target)
    if other is not None:
        return other.is_current(review)
    if review.target == T.REVISION:
        revision = review.revision
        return revision is not None and review.fingerprint == revision_fingerprint(
            post_id=revision.post_id, title=revision.title, body=revision.body
        )
    return review.post is not None and fingerprint_of_post(review.post) == review.fingerprint


def event_data(review: Review) -> dict:
    """Return a review event's data: a person's note and Instatic's reason kept apart."""
    data = {"review": review.pk, "target": review.target, "note": review.note}
    if review.reason:
        data["reason"] = review.reason
    return data


def submit_revision(*, post: Post, title: str, body: str, user, note: str = "") -> Review:
    """Write a new title and body for live ``post`` as a draft revision and submit it.

    The draft replaces a pending draft revision; once approved, an editor who may publish
    schedules it (the revisions page offers it).
    """
    rendered = render(body)
    with editor_action(post, user=user, expected_version=None) as action:
        current = action.current
        if current.status != S.PUBLISHED:
            raise InvalidTransition(f"“{current}” is not live: submit the post itself instead.")
        draft = write_draft(current, title=title, body=body, rendered=rendered, user=user)
        action.change(public=False)
        review = submit_snapshot(
            target=ReviewTarget.REVISION,
            snapshot={"title": title, "body": body},
            title=f"{title} (revision {draft.number})",
            user=user,
            note=note,
            post=current,
            revision=draft,
        )
        record_event(
            current,
            K.REVIEW_REQUESTED,
            user=user,
            data={**event_data(review), "revision": draft.number},
        )
    return review
