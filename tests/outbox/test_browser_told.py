"""In Chromium: an editor sees on a post's page who was told of its events, in words and in
their zone, and turns their own emails off on "My notifications". Screenshots go to
``test-artifacts/`` so a person can check them."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from editors.models import EditorProfile
from outbox.models import Delivery, Watch, WebhookAttempt, WebhookEndpoint
from publishing.models import PublishEvent
from tests.publishing.conftest import editor, future_post, make_post  # noqa: F401 (the fixture)
from tests.support.browser import screenshot, signed_in

pytestmark = pytest.mark.sqlite


def test_the_post_page_says_who_was_told(live_server, editor, browser, request):  # noqa: F811
    editor.user_permissions.add(Permission.objects.get(codename="view_delivery"))
    EditorProfile.objects.create(user=editor, time_zone="Europe/Berlin")
    post = make_post(status="published", title="Opening hours")
    event = PublishEvent.objects.create(post=post, kind="published", node="web-1")
    endpoint = WebhookEndpoint.objects.create(
        name="Search index", url="https://hooks.example.com/x", events=["published"], secret="s"
    )
    hook = Delivery.objects.create(
        event=event, subscriber=endpoint.ledger_name, post_id=post.pk, kind="published"
    )
    Delivery.objects.filter(pk=hook.pk).update(status="succeeded", attempts=1)
    WebhookAttempt.objects.create(
        delivery=hook, endpoint=endpoint, ok=True, status_code=200, duration=0.05
    )
    Delivery.objects.create(
        event=event, subscriber="outbox.notify_authors", post_id=post.pk, kind="published"
    )
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}")
        told = page.locator("#post-deliveries")
        told.scroll_into_view_if_needed()
        text = told.inner_text()
        assert "Webhook “Search index”" in text and "answered 200" in text
        assert "Emails to the author and watchers" in text and "CET" in text
        assert "webhook:" not in text and "+00:00" not in text
        screenshot(page, "who-was-told-on-the-post-page")
        told.get_by_text("All of this post's deliveries").click()
        page.wait_for_url("**/outbox/delivery/**")
        assert "Webhook “Search index”" in page.locator("#result_list").inner_text()
    except BaseException:
        screenshot(page, request.node.name)
        raise


def test_an_editor_turns_off_the_emails_of_late_posts(live_server, editor, browser, request):  # noqa: F811
    editor.email = "editor@example.com"
    editor.save()
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}{reverse('admin:index')}")
        page.get_by_role("link", name="Notifications").click()
        page.get_by_label("When my scheduled post is late").uncheck()
        screenshot(page, "my-notifications")
        page.get_by_role("button", name="Save").click()
        page.get_by_text("Your email settings are saved.").wait_for()
        profile = EditorProfile.objects.get(user=editor)
        assert (profile.email_published, profile.email_late) == (True, False)
    except BaseException:
        screenshot(page, request.node.name)
        raise


def test_an_editor_watches_a_colleagues_post(live_server, editor, browser, request):  # noqa: F811
    post = future_post(title="Opening hours")
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}")
        page.locator(".object-tools").get_by_role("link", name="Watch", exact=True).click()
        page.get_by_text("to get the emails its author gets").wait_for()
        assert "editor@example.com" in page.locator("#content-main").inner_text()
        screenshot(page, "watch-a-post")
        page.get_by_role("button", name="Watch this post").click()
        page.get_by_text("You are watching “Opening hours”").wait_for()
        assert page.locator(".object-tools").get_by_role("link", name="Watching").is_visible()
        screenshot(page, "watching-a-post")
        assert Watch.objects.filter(post=post, user=editor).exists()
    except BaseException:
        screenshot(page, request.node.name)
        raise
