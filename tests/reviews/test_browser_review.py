"""In Chromium, on a site that requires review: a writer submits a draft for review, a reviewer
reads it and approves it with a comment, an editor schedules it; a change after the approval
sends it back to review.

Screenshots go to ``test-artifacts/`` so a person can check that the pages read well.
"""

from datetime import timedelta

from django.test import override_settings
from django.utils import timezone

from coordination.clock import database_now
from publishing.models import Post
from reviews.models import Review
from tests.publishing.conftest import make_post
from tests.support.browser import screenshot, signed_in


@override_settings(INSTATIC_REQUIRE_REVIEW=True)
def test_a_draft_is_submitted_approved_scheduled_and_a_later_change_sends_it_back(
    live_server, drafter, reviewer, editor, browser, request
):
    post = make_post(title="Budget 2027", body="The *numbers* for next year.")
    change = f"{live_server.url}/admin/publishing/post/{post.pk}/change/"
    writer = signed_in(browser, live_server, "drafter", "pw")
    checker = signed_in(browser, live_server, "reviewer", "pw")
    page = writer
    try:
        writer.goto(change)
        assert "Not reviewed yet" in writer.inner_text("#post-review")
        writer.click("#submit-for-review")
        writer.fill("#id_note", "Numbers checked with finance.")
        writer.click("#submit-review input[type=submit]")
        writer.wait_for_selector(".messagelist .success")
        assert "Waiting for review" in writer.inner_text("#post-review")
        screenshot(writer, "review-submitted")

        page = checker
        checker.goto(f"{live_server.url}/admin/reviews/review/?status__exact=pending")
        checker.click("text=Budget 2027")
        checker.wait_for_selector("#review-content")
        assert "numbers" in checker.inner_text("#review-content")
        assert "Numbers checked with finance." in checker.inner_text("#review")
        checker.fill("#id_comment", "Good to go.")
        screenshot(checker, "review-to-decide")
        checker.click("#decide button[name=_approve]")
        checker.wait_for_selector(".messagelist .success")
        assert "Approved" in checker.inner_text("#review-state")

        page = editor_page = signed_in(browser, live_server, "editor", "pw")
        editor_page.goto(change)
        assert "Approved by reviewer" in editor_page.inner_text("#post-review")
        when = timezone.localtime(database_now() + timedelta(days=1))
        editor_page.fill("#id_publish_at_0", when.strftime("%Y-%m-%d"))
        editor_page.fill("#id_publish_at_1", when.strftime("%H:%M:%S"))
        editor_page.click("button[name=_publishing_action][value=scheduled]")
        editor_page.wait_for_selector(".messagelist .success")
        assert Post.objects.get(pk=post.pk).status == Post.Status.SCHEDULED
        screenshot(editor_page, "review-approved-scheduled")

        editor_page.fill("#id_body", "The *numbers* for next year, revised.")
        editor_page.click("input[name=_save]")
        editor_page.wait_for_selector(".messagelist")
        assert Post.objects.get(pk=post.pk).status == Post.Status.DRAFT
        editor_page.goto(change)
        assert "Waiting for review" in editor_page.inner_text("#post-review")
        assert "Sent back to review" in editor_page.inner_text("body")
        screenshot(editor_page, "review-sent-back")

        # The writer changes the text while it waits: the page says the submission is out
        # of date and what to do, never "Waiting for review" for a text nobody can approve.
        page = writer
        writer.goto(change)
        writer.fill("#id_body", "The *numbers* for next year, revised twice.")
        writer.click("input[name=_continue]")
        writer.wait_for_selector("#review-stale")
        section = writer.inner_text("#post-review")
        assert "is out of date" in section and "Submit it again" in section
        assert "Waiting for review" not in section
        writer.locator("#post-review").scroll_into_view_if_needed()
        screenshot(writer, "review-stale")
    except BaseException:
        screenshot(page, request.node.name)
        raise
    assert Review.objects.filter(post=post, status=Review.Status.PENDING).count() == 1


@override_settings(INSTATIC_REQUIRE_REVIEW=True)
def test_a_release_reviewer_reads_each_items_text_and_a_changed_submission_shows_its_diff(
    live_server, drafter, reviewer, editor, browser, request
):
    from publishing import posts
    from releases import actions as releases
    from reviews import actions as reviews

    rejected = make_post(title="Quarterly results", body="Profits fell 40 percent, unaudited.")
    reviews.decide(
        review=reviews.submit_post(post=rejected, user=drafter),
        user=reviewer,
        approve=False,
        comment="Not before the audit.",
    )
    release = releases.create_release(name="Results day", user=editor)
    releases.add_item(release=release, post=rejected, user=editor)
    releases.add_item(
        release=release, post=make_post(title="Outlook", body="A steady year ahead."), user=editor
    )
    release_review = releases.submit_release(release=release, user=editor)
    draft = make_post(title="Budget 2027", body="The numbers for next year.")
    post_review = reviews.submit_post(post=draft, user=drafter)
    draft = Post.objects.get(pk=draft.pk)
    draft.body = "The numbers for next year, and a paragraph added after submitting."
    posts.save_post(post=draft, user=drafter)

    page = signed_in(browser, live_server, "reviewer", "pw")
    try:
        page.goto(f"{live_server.url}/admin/reviews/review/{release_review.pk}/change/")
        items = page.locator("#release-review-items details")
        assert items.count() == 2
        assert "Rejected as it is by reviewer" in page.inner_text("#release-review-items")
        items.first.locator("summary").click()
        assert page.locator("text=Profits fell 40 percent, unaudited.").is_visible()
        screenshot(page, "review-release-items")

        page.goto(f"{live_server.url}/admin/reviews/review/{post_review.pk}/change/")
        assert "The numbers for next year." in page.inner_text("#review-content")
        assert "paragraph added" not in page.inner_text("#review-content")
        assert "paragraph added" in page.inner_text("#review-diff-since ins")
        assert page.locator("#decide button[name=_approve]").count() == 0
        screenshot(page, "review-changed-since-submitted")
    except BaseException:
        screenshot(page, request.node.name)
        raise
