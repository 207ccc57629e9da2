"""Review before publish (``INSTATIC_REQUIRE_REVIEW``): only what a reviewer approved, exactly as
it was approved, can be scheduled or go live; a change after the approval needs a review again;
every step is a history event and an email to the people concerned."""

from datetime import timedelta

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied
from django.test import override_settings

from coordination.clock import database_now
from publishing import posts, revisions
from publishing.exceptions import InvalidTransition, NotPublishable
from publishing.models import Post, PublishEvent
from releases import actions as releases
from releases.models import Release
from reviews import actions as reviews
from reviews.models import Review
from reviews.rules import (
    decision_problem,
    post_fingerprint,
    release_fingerprint,
    revision_fingerprint,
)
from tests.publishing.conftest import (
    kinds,
    live_post,
    make_post,
    run_publish_job,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("reviews_on")]

S = Post.Status
K = PublishEvent.Kind
RV = Review.Status


def soon(seconds: float = 3600):
    return database_now() + timedelta(seconds=seconds)


# --- the rules -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("may_review", "is_submitter", "status", "says"),
    [
        (True, False, "pending", ""),
        (False, False, "pending", "needs the"),
        (True, True, "pending", "another reviewer decides it"),
        (True, False, "approved", "decided already"),
        (True, False, "withdrawn", "decided already"),
    ],
)
def test_who_may_decide_a_review(may_review, is_submitter, status, says):
    problem = decision_problem(may_review=may_review, is_submitter=is_submitter, status=status)
    assert (says in problem) if says else problem == ""


def test_a_fingerprint_names_exactly_one_content():
    base = post_fingerprint(title="T", slug="s", body="B")
    assert base == post_fingerprint(title="T", slug="s", body="B")
    assert base != post_fingerprint(title="T", slug="s", body="B ")
    assert base != post_fingerprint(title="T", slug="s2", body="B")
    assert revision_fingerprint(post_id=1, title="T", body="B") != revision_fingerprint(
        post_id=2, title="T", body="B"
    )
    items = [(1, "publish", 3, None), (2, "unpublish", 7, None)]
    assert release_fingerprint(items) == release_fingerprint(reversed(items))
    assert release_fingerprint(items) != release_fingerprint([(1, "publish", 4, None)])


# --- posts ---------------------------------------------------------------------------------


def test_a_post_goes_live_only_once_a_reviewer_approved_it(
    drafter, editor, reviewer, django_capture_on_commit_callbacks
):
    post = make_post(title="Budget")
    with pytest.raises(NotPublishable, match="has not been approved"):
        posts.schedule_post(post=post, publish_at=soon(), user=editor)

    with django_capture_on_commit_callbacks(execute=True):
        review = reviews.submit_post(post=post, user=drafter, note="Numbers checked")
    assert [m.to for m in mail.outbox] == [[reviewer.email]]
    assert "drafter asks you to review Post “Budget”" in mail.outbox[0].body
    for may_not in (drafter, editor):  # neither may review
        with pytest.raises(PermissionDenied):
            reviews.decide(review=review, user=may_not, approve=True)

    with django_capture_on_commit_callbacks(execute=True):
        reviews.decide(review=review, user=reviewer, approve=True, comment="Fine")
    assert mail.outbox[-1].to == [drafter.email]
    assert "reviewer approved Post “Budget”" in mail.outbox[-1].body
    assert "Their comment: Fine" in mail.outbox[-1].body

    posts.schedule_post(post=post, publish_at=soon(), user=editor)
    assert kinds(post) == [K.REVIEW_REQUESTED, K.REVIEW_APPROVED, K.SCHEDULED]


def test_a_reviewer_does_not_approve_their_own_submission(reviewer):
    review = reviews.submit_post(post=make_post(), user=reviewer)
    with pytest.raises(InvalidTransition, match="another reviewer decides it"):
        reviews.decide(review=review, user=reviewer, approve=True)
    assert Review.objects.get(pk=review.pk).status == RV.PENDING


def test_a_rejected_post_cannot_be_published(drafter, editor, reviewer):
    post = make_post()
    review = reviews.submit_post(post=post, user=drafter)
    reviews.decide(review=review, user=reviewer, approve=False, comment="Sources missing")
    with pytest.raises(NotPublishable):
        posts.publish_now(post=post, user=editor)
    assert PublishEvent.objects.get(post=post, kind=K.REVIEW_REJECTED).data["comment"] == (
        "Sources missing"
    )


def test_a_change_after_approval_takes_a_scheduled_post_back_to_draft_and_to_review(
    drafter, editor, reviewer
):
    post = make_post(title="Budget", body="Numbers.")
    reviews.decide(review=reviews.submit_post(post=post, user=drafter), user=reviewer, approve=True)
    posts.schedule_post(post=post, publish_at=soon(60), user=editor)

    post = Post.objects.get(pk=post.pk)
    post.body = "Other numbers."
    posts.save_post(post=post, user=editor)

    post.refresh_from_db()
    assert post.status == S.DRAFT
    assert kinds(post)[-1] == K.REVIEW_RESET
    pending = Review.objects.get(post=post, status=RV.PENDING)
    assert pending.fingerprint == reviews.fingerprint_of_post(post)
    Post.objects.filter(pk=post.pk).update(publish_at=database_now())
    run_publish_job()
    assert Post.objects.get(pk=post.pk).status == S.DRAFT
    with pytest.raises(NotPublishable):
        posts.schedule_post(post=post, publish_at=soon(), user=editor)


def test_saving_a_scheduled_post_unchanged_keeps_it_scheduled(drafter, editor, reviewer):
    post = make_post()
    reviews.decide(review=reviews.submit_post(post=post, user=drafter), user=reviewer, approve=True)
    posts.schedule_post(post=post, publish_at=soon(), user=editor)
    posts.save_post(post=Post.objects.get(pk=post.pk), user=editor)
    assert Post.objects.get(pk=post.pk).status == S.SCHEDULED


# --- revisions -----------------------------------------------------------------------------


def test_a_live_posts_text_changes_only_through_an_approved_revision(drafter, editor, reviewer):
    post = live_post(title="Pricing", body="Old prices.")
    edited = Post.objects.get(pk=post.pk)
    edited.body = "Sneaky new prices."
    with pytest.raises(InvalidTransition, match="through a revision"):
        posts.save_post(post=edited, user=editor)
    with pytest.raises(NotPublishable, match="has not been approved"):
        revisions.schedule_revision(
            post=post, title="Pricing", body="New prices.", publish_at=soon(), user=editor
        )

    review = reviews.submit_revision(post=post, title="Pricing", body="New prices.", user=drafter)
    assert review.revision.status == "draft"
    reviews.decide(review=review, user=reviewer, approve=True)
    with pytest.raises(NotPublishable):  # not what was approved
        revisions.schedule_revision(
            post=post, title="Pricing", body="Other prices.", publish_at=soon(), user=editor
        )
    revision = revisions.schedule_revision(
        post=post, title="Pricing", body="New prices.", publish_at=soon(), user=editor
    )
    assert revision.status == "scheduled"


# --- releases ------------------------------------------------------------------------------


def test_a_release_is_scheduled_only_as_approved_and_a_change_sends_it_back(
    drafter, editor, reviewer
):
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=make_post(title="One"), user=editor)
    with pytest.raises(NotPublishable, match="The release “Launch” has not been approved"):
        releases.schedule_release(release=release, release_at=soon(), user=editor)
    with pytest.raises(NotPublishable):
        releases.release_now(release=release, user=editor)

    review = releases.submit_release(release=release, user=editor)
    reviews.decide(review=review, user=reviewer, approve=True)
    releases.schedule_release(release=release, release_at=soon(), user=editor)
    assert Release.objects.get(pk=release.pk).status == Release.Status.SCHEDULED

    releases.add_item(release=release, post=make_post(title="Two"), user=editor)
    release.refresh_from_db()
    assert release.status == Release.Status.DRAFT
    again = Review.objects.get(release_id=release.pk, status=RV.PENDING)
    assert again.reason.startswith("its posts")
    assert again.note == ""  # Instatic's sentence is never a person's note


def test_a_release_changed_behind_its_approval_is_stopped_at_its_time(editor, reviewer):
    release = releases.create_release(name="Launch", user=editor)
    item = releases.add_item(release=release, post=make_post(title="One"), user=editor)
    reviews.decide(
        review=releases.submit_release(release=release, user=editor), user=reviewer, approve=True
    )
    releases.schedule_release(release=release, release_at=soon(), user=editor)
    # A script swaps the item's post without any action seeing it.
    other = make_post(title="Unreviewed")
    type(item).objects.filter(pk=item.pk).update(post=other, pinned_version=other.version)
    Release.objects.filter(pk=release.pk).update(release_at=database_now())
    run_publish_job()

    release.refresh_from_db()
    assert release.status == Release.Status.SCHEDULED
    assert "not approved by a reviewer" in release.problem
    assert Post.objects.get(pk=other.pk).status == S.DRAFT


# --- the admin pages -------------------------------------------------------------------


def test_a_writer_submits_a_new_text_of_a_live_post_from_its_page(as_drafter, drafter):
    from django.urls import reverse

    post = live_post(title="Pricing", body="Old prices.")
    url = reverse("admin:reviews_review_submit_revision", args=[post.pk])
    page = as_drafter.get(url)
    assert page.status_code == 200 and "Old prices." in page.content.decode()
    done = as_drafter.post(url, {"title": "Pricing", "body": "New prices.", "note": "Q3"})
    assert done.status_code == 302
    review = Review.objects.get(post=post, target=Review.Target.REVISION)
    assert (review.revision.body, review.revision.status, review.note) == (
        "New prices.",
        "draft",
        "Q3",
    )
    assert Post.objects.get(pk=post.pk).body == "Old prices."


def test_the_review_queue_is_offered_only_when_reviews_are_required(as_editor):
    from django.urls import reverse

    index = as_editor.get(reverse("admin:index")).content.decode()
    assert reverse("admin:reviews_review_changelist") in index
    with override_settings(INSTATIC_REQUIRE_REVIEW=False):
        index = as_editor.get(reverse("admin:index")).content.decode()
    assert reverse("admin:reviews_review_changelist") not in index


def test_a_text_changed_after_its_submission_cannot_be_approved(drafter, editor, reviewer):
    post = make_post(title="Budget", body="Submitted text.")
    review = reviews.submit_post(post=post, user=drafter)
    post = Post.objects.get(pk=post.pk)
    post.body = "A harmless text shown while the review waits."
    posts.save_post(post=post, user=drafter)
    with pytest.raises(InvalidTransition, match="changed since it was submitted"):
        reviews.decide(review=review, user=reviewer, approve=True)
    assert Review.objects.get(pk=review.pk).status == RV.PENDING
    reviews.decide(review=review, user=reviewer, approve=False, comment="Changed meanwhile")
    assert Review.objects.get(pk=review.pk).status == RV.REJECTED


def test_going_back_to_an_approved_text_keeps_a_scheduled_post_scheduled(drafter, editor, reviewer):
    post = make_post(title="Budget", body="Approved text.")
    reviews.decide(review=reviews.submit_post(post=post, user=drafter), user=reviewer, approve=True)
    posts.schedule_post(post=post, publish_at=soon(), user=editor)
    post = Post.objects.get(pk=post.pk)
    post.body = "Approved text."  # saved unchanged in text: no review needed
    post.title = "Budget"
    posts.save_post(post=post, user=editor)
    assert Post.objects.get(pk=post.pk).status == S.SCHEDULED


def test_only_editors_who_may_publish_submit_a_release(drafter, editor):
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=make_post(), user=editor)
    with pytest.raises(PermissionDenied):
        releases.submit_release(release=release, user=drafter)
