"""In Chromium: an operator adds a webhook endpoint, choosing its events as checkboxes, is
shown its generated secret once, and reads its latest attempts in words. The screenshot goes
to ``test-artifacts/``."""

import pytest
from django.urls import reverse

from outbox.models import Delivery, WebhookAttempt, WebhookEndpoint
from publishing.models import PublishEvent
from tests.publishing.conftest import make_post
from tests.support.browser import screenshot, signed_in

pytestmark = pytest.mark.sqlite


def test_an_operator_adds_an_endpoint_and_reads_its_attempts(live_server, browser, request):
    from django.contrib.auth.models import User

    User.objects.create_superuser("ops", "ops@example.com", "pw")
    page = signed_in(browser, live_server, "ops", "pw")
    try:
        page.goto(f"{live_server.url}{reverse('admin:outbox_webhookendpoint_add')}")
        page.get_by_label("Name").fill("Search index")
        page.get_by_label("URL").fill("https://hooks.example.com/instatic")
        page.get_by_role("checkbox", name="published", exact=True).check()
        page.get_by_role("checkbox", name="late").check()
        page.get_by_role("button", name="Save and continue editing").click()
        page.get_by_text("was added successfully").wait_for()
        endpoint = WebhookEndpoint.objects.get()
        assert endpoint.events == ["published", "late"] and endpoint.active
        assert endpoint.secret.startswith("whsec_")
        assert endpoint.secret in page.get_by_text("new secret is").inner_text()
        page.reload()
        assert endpoint.secret not in page.content()
        assert f"whsec_…{endpoint.secret[-4:]}" in page.content()
        post = make_post(status="published")
        event = PublishEvent.objects.create(post=post, kind="published", node="web-1")
        delivery = Delivery.objects.create(
            event=event, subscriber=endpoint.ledger_name, post_id=post.pk, kind="published"
        )
        WebhookAttempt.objects.create(
            delivery=delivery,
            endpoint=endpoint,
            ok=False,
            status_code=503,
            duration=0.21,
            response_head="Service unavailable",
        )
        page.reload()
        attempts = page.locator(".inline-group")
        attempts.scroll_into_view_if_needed()
        text = attempts.inner_text()
        assert "HTTP 503: failed" in text and "Service unavailable" in text and "UTC" in text
        screenshot(page, "webhook-endpoint-with-attempts")
    except BaseException:
        screenshot(page, request.node.name)
        raise
