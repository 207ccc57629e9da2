"""A review approves a snapshot: what the reviewer read is exactly what goes live, on every path.

Each test reproduces a way a text nobody approved went live, or a reviewer or writer was shown
something other than what they were told, through the real actions, admin pages and publish
job (on every vendor the suite runs).
"""

from datetime import timedelta

import pytest
from django.core import mail
from django.test import override_settings
from django.urls import reverse

from coordination.clock import database_now
from publishing import posts, revisions
from publishing.exceptions import InvalidTransition
from publishing.models import Post, PostRevision
from releases import actions as releases
from releases.models import Release, ReleaseItem
from reviews import actions as reviews
from reviews.models import Review
from tests.publishing.conftest import (
    live_post,
    make_due,
    make_post,
    run_publish_job,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("reviews_on")]

S = Post.Status
RV = Review.Status


@pytest.fixture
def as_reviewer(client, reviewer):
    client.force_login(reviewer)
    return client


def soon(seconds: float = 3600):
    return database_now() + timedelta(seconds=seconds)


def approve(review: Review, reviewer) -> Review:
    return reviews.decide(review=review, user=reviewer, approve=True)


def review_page(client, review: Review) -> str:
    page = client.get(reverse("admin:reviews_review_change", args=[review.pk]))
    assert page.status_code == 200
    return page.content.decode()


def due_now(release: Release) -> None:
    Release.objects.filter(pk=release.pk).update(release_at=database_now())


# --- releases ------------------------------------------------------------------------------


def test_a_release_review_shows_each_items_text_and_a_text_rejected_before(
    drafter, editor, reviewer, as_reviewer
):
    post = make_post(title="Quarterly results", body="Profits fell 40 percent, unaudited.")
    reviews.decide(
        review=reviews.submit_post(post=post, user=drafter),
        user=reviewer,
        approve=False,
        comment="Not before the audit",
    )
    release = releases.create_release(name="Results day", user=editor)
    releases.add_item(release=release, post=post, user=editor)
    review = releases.submit_release(release=release, user=editor)

    page = review_page(as_reviewer, review)
    assert "Profits fell 40 percent, unaudited." in page
    assert "Rejected as it is by reviewer" in page and "Not before the audit" in page


def test_a_release_goes_out_only_with_the_texts_its_reviewer_read(editor, reviewer):
    post = make_post(title="Launch", body="The approved announcement.")
    release = releases.create_release(name="Launch day", user=editor)
    releases.add_item(release=release, post=post, user=editor)
    approve(releases.submit_release(release=release, user=editor), reviewer)
    releases.schedule_release(release=release, release_at=soon(), user=editor)
    # A script rewrites the text without moving the post's version: no action sees it.
    Post.objects.filter(pk=post.pk).update(body="A text no reviewer read.")
    due_now(release)
    run_publish_job()

    release.refresh_from_db()
    assert release.status == Release.Status.SCHEDULED
    assert "not approved by a reviewer" in release.problem
    assert Post.objects.get(pk=post.pk).status == S.DRAFT


def test_a_writer_cannot_replace_the_revision_a_release_goes_out_with(drafter, editor, reviewer):
    post = live_post(title="Pricing", body="Old prices.")
    approve(
        reviews.submit_revision(post=post, title="Pricing", body="New prices.", user=drafter),
        reviewer,
    )
    release = releases.create_release(name="Price change", user=editor)
    releases.add_item(release=release, post=post, user=editor)
    approve(releases.submit_release(release=release, user=editor), reviewer)
    releases.schedule_release(release=release, release_at=soon(), user=editor)

    with pytest.raises(InvalidTransition, match="goes out with the release “Price change”"):
        reviews.submit_revision(post=post, title="Pricing", body="Rejected prices.", user=drafter)

    release.refresh_from_db()
    assert (release.status, release.problem) == (Release.Status.SCHEDULED, "")
    pinned = ReleaseItem.objects.get(release=release).revision
    assert (pinned.body, pinned.status) == ("New prices.", PostRevision.Status.DRAFT)


def test_a_refreshed_item_sends_its_release_back_to_review_with_the_new_text(
    drafter, editor, reviewer, as_reviewer
):
    post = make_post(title="Launch", body="First text.")
    release = releases.create_release(name="Launch day", user=editor)
    item = releases.add_item(release=release, post=post, user=editor)
    approve(releases.submit_release(release=release, user=editor), reviewer)
    releases.schedule_release(release=release, release_at=soon(), user=editor)
    edited = Post.objects.get(pk=post.pk)
    edited.body = "Second text, written after the approval."
    posts.save_post(post=edited, user=drafter)  # stops the release
    releases.refresh_item(item=item, user=editor)

    release.refresh_from_db()
    assert release.status == Release.Status.DRAFT
    again = Review.objects.get(release_id=release.pk, status=RV.PENDING)
    assert "Second text, written after the approval." in review_page(as_reviewer, again)
    due_now(release)
    with pytest.raises(Exception, match="not been approved"):
        releases.release_now(release=release, user=editor)
    assert Post.objects.get(pk=post.pk).status == S.DRAFT


# --- the review page -------------------------------------------------------------------


def test_the_review_page_shows_what_was_submitted_and_what_changed_since(
    drafter, reviewer, as_reviewer
):
    post = make_post(title="Budget", body="The submitted sentence.")
    review = reviews.submit_post(post=post, user=drafter)
    edited = Post.objects.get(pk=post.pk)
    edited.body = "The submitted sentence. Added later, never submitted."
    posts.save_post(post=edited, user=drafter)

    page = review_page(as_reviewer, review)
    submitted = page[page.index('id="review-content"') : page.index("</article>")]
    assert "The submitted sentence." in submitted
    assert "never submitted" not in submitted
    assert 'id="review-since"' in page and "<ins>. Added later, never submitted</ins>" in page
    assert 'name="_approve"' not in page


def test_a_writer_sees_that_their_pending_review_is_out_of_date(as_drafter, drafter):
    post = make_post(title="Budget", body="Submitted.")
    reviews.submit_post(post=post, user=drafter)
    edited = Post.objects.get(pk=post.pk)
    edited.body = "Changed after submitting."
    posts.save_post(post=edited, user=drafter)

    page = as_drafter.get(reverse("admin:publishing_post_change", args=[post.pk]))
    text = page.content.decode()
    assert 'id="review-stale"' in text and "Submit it again" in text
    assert "Waiting for review since" not in text


def test_reviewers_are_not_told_a_system_sentence_as_the_writers_note(
    drafter, editor, reviewer, django_capture_on_commit_callbacks
):
    post = make_post(title="Budget", body="Approved.")
    approve(reviews.submit_post(post=post, user=drafter), reviewer)
    posts.schedule_post(post=post, publish_at=soon(), user=editor)
    edited = Post.objects.get(pk=post.pk)
    edited.body = "Changed after the approval."
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        posts.save_post(post=edited, user=editor)

    assert Post.objects.get(pk=post.pk).status == S.DRAFT
    (told,) = [m for m in mail.outbox if m.to == [reviewer.email]]
    assert "Their note" not in told.body
    assert "needs a review again" in told.body


# --- turning review on ---------------------------------------------------------------------


def test_a_post_scheduled_before_reviews_were_required_is_held_until_approved(
    drafter, editor, reviewer
):
    with override_settings(INSTATIC_REQUIRE_REVIEW=False):
        post = make_post(title="Old plan", body="Scheduled before reviews.")
        posts.schedule_post(post=post, publish_at=soon(), user=editor)
    Post.objects.filter(pk=post.pk).update(publish_at=database_now() - timedelta(seconds=5))
    run_publish_job()

    held = Post.objects.get(pk=post.pk)
    assert (held.status, held.last_error) == (S.SCHEDULED, reviews.HELD_PROBLEM)
    approve(reviews.submit_post(post=held, user=drafter), reviewer)
    assert Post.objects.get(pk=post.pk).last_error == ""
    run_publish_job()
    assert Post.objects.get(pk=post.pk).status == S.PUBLISHED


def test_a_revision_scheduled_before_reviews_were_required_does_not_go_live(editor):
    post = live_post(title="Pricing", body="Old prices.")
    with override_settings(INSTATIC_REQUIRE_REVIEW=False):
        revision = revisions.schedule_revision(
            post=post, title="Pricing", body="Unreviewed prices.", publish_at=soon(), user=editor
        )
    make_due(revision)
    run_publish_job()

    assert Post.objects.get(pk=post.pk).body == "Old prices."
    revision.refresh_from_db()
    assert revision.status == PostRevision.Status.SUPERSEDED
    assert "not approved by a reviewer" in revision.note


def test_saving_an_approved_scheduled_post_with_a_new_text_says_it_went_back_to_review(
    drafter, editor, reviewer, as_editor
):
    from tests.publishing.test_admin import change_url, submit

    post = make_post(title="Budget", body="Approved.")
    approve(reviews.submit_post(post=post, user=drafter), reviewer)
    posts.schedule_post(post=post, publish_at=soon(), user=editor)

    done = submit(as_editor, change_url(post), body="Changed after the approval.")
    shown = [str(m) for m in done.wsgi_request._messages]
    assert Post.objects.get(pk=post.pk).status == S.DRAFT
    assert not any("Cannot reschedule" in m for m in shown), shown
    assert any("went back to draft" in m and "review" in m for m in shown), shown


def test_a_refused_publish_now_is_one_message_that_says_the_text_was_saved(editor, as_editor):
    from tests.publishing.test_admin import change_url, submit

    post = make_post(title="Budget", body="Never reviewed.")
    done = submit(as_editor, change_url(post), _publishing_action="published")
    shown = [(m.level_tag, str(m)) for m in done.wsgi_request._messages]
    assert Post.objects.get(pk=post.pk).status == S.DRAFT
    assert len(shown) == 1, shown
    level, text = shown[0]
    assert level == "error" and "were saved" in text and "not been approved" in text


def test_schedule_and_publish_now_are_offered_only_once_the_text_is_approved(
    drafter, reviewer, as_editor
):
    from tests.publishing.test_admin import change_url

    post = make_post(title="Budget", body="Not reviewed yet.")
    page = as_editor.get(change_url(post)).content.decode()
    assert 'value="scheduled"' not in page and 'value="published"' not in page
    assert 'id="needs-approval"' in page

    approve(reviews.submit_post(post=post, user=drafter), reviewer)
    page = as_editor.get(change_url(post)).content.decode()
    assert 'name="_publishing_action" value="scheduled"' in page
    assert 'id="needs-approval"' not in page
