"""In Chromium: what an editor sees when a body is too large to compare in full, and when a
title holds an invisible control character. Screenshots go to ``test-artifacts/``.
"""

from datetime import timedelta

from coordination.clock import database_now
from publishing.models import Post, PostRevision
from tests.publishing.conftest import live_post
from tests.publishing.test_diffs import largest_bodies
from tests.support.browser import screenshot, signed_in


def test_the_compare_page_of_the_largest_bodies_says_it_is_too_large(
    live_server, editor, browser, request
):
    old, new = largest_bodies(every=2)
    post = live_post(title="Long read", body=old)
    for number, body in ((1, old), (2, new)):
        PostRevision.objects.create(
            post=post,
            number=number,
            title="Long read",
            body=body,
            status=PostRevision.Status.SCHEDULED if number == 2 else PostRevision.Status.PUBLISHED,
            publish_at=database_now() + timedelta(hours=1),
        )
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}/admin/publishing/post/{post.pk}/revisions/")
        page.click("input[value='Compare the two chosen revisions']")
        assert page.inner_text(".diff-note").startswith("Too large to compare in full")
        assert page.locator("#diff .added").count() <= 1000
        screenshot(page, "compare-too-large")
    except BaseException:
        screenshot(page, request.node.name)
        raise


def test_a_title_with_a_control_character_is_refused_beside_the_field(
    live_server, editor, browser, request
):
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}/admin/publishing/post/add/")
        page.fill("#id_title", "Pasted \x01 title")
        page.fill("#id_body", "A body.")
        page.click("input[name=_save]")
        page.wait_for_selector(".errorlist")
        assert "The title contains a control character (U+0001) at position 8" in (
            page.inner_text(".field-title .errorlist")
        )
        assert page.input_value("#id_body") == "A body.", "nothing the editor wrote is lost"
        screenshot(page, "control-character-title")
        assert not Post.objects.exists()
    except BaseException:
        screenshot(page, request.node.name)
        raise
