"""The post's admin page says who was told of its events: webhooks with their last attempt,
the author's email, subscribers; and the delivery list names them in words."""

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from outbox.models import Delivery, WebhookAttempt, WebhookEndpoint
from publishing.models import PublishEvent
from tests.publishing.conftest import make_post

pytestmark = pytest.mark.django_db


@pytest.fixture
def delivered_post():
    post = make_post(status="published", title="Opening hours")
    event = PublishEvent.objects.create(post=post, kind="published", node="web-1")
    endpoint = WebhookEndpoint.objects.create(
        name="Search index", url="https://hooks.example.com/x", events=["published"], secret="s"
    )
    hook = Delivery.objects.create(
        event=event,
        subscriber=endpoint.ledger_name,
        post_id=post.pk,
        kind="published",
        attempts=2,
        last_error="answered 503",
    )
    WebhookAttempt.objects.create(
        delivery=hook, endpoint=endpoint, ok=False, status_code=503, duration=0.2
    )
    Delivery.objects.create(
        event=event, subscriber="outbox.notify_authors", post_id=post.pk, kind="published"
    )
    Delivery.objects.create(
        event=event, subscriber="demo.reindex", post_id=post.pk, kind="published"
    )
    other = make_post(status="published")
    Delivery.objects.create(
        event=PublishEvent.objects.create(post=other, kind="published"),
        subscriber="demo.reindex",
        post_id=other.pk,
        kind="published",
    )
    return post


def test_the_post_page_shows_who_was_told_with_the_last_attempt(admin_client, delivered_post):
    page = admin_client.get(reverse("admin:publishing_post_change", args=[delivered_post.pk]))
    html = page.content.decode()
    section = html[html.index('id="post-deliveries"') :]
    assert "Who was told" in section
    assert "Webhook “Search index”" in section and "answered 503" in section
    assert "Emails to the author and watchers" in section and "Subscriber demo.reindex" in section
    assert section.count("<tr>") == 1 + 3, "the header and this post's three deliveries"
    assert f"?post_id={delivered_post.pk}" in section


def test_the_section_is_left_out_for_editors_who_may_not_see_deliveries(client, delivered_post):
    editor = User.objects.create_user("ed", is_staff=True)
    editor.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_post", "change_post"])
    )
    client.force_login(editor)
    page = client.get(reverse("admin:publishing_post_change", args=[delivered_post.pk]))
    assert page.status_code == 200
    assert b"post-deliveries" not in page.content


def test_a_post_without_deliveries_has_no_section(admin_client):
    post = make_post()
    page = admin_client.get(reverse("admin:publishing_post_change", args=[post.pk]))
    assert b"post-deliveries" not in page.content


def test_the_delivery_list_names_who_each_is_for_in_words(admin_client, delivered_post):
    page = admin_client.get(
        reverse("admin:outbox_delivery_changelist") + f"?post_id={delivered_post.pk}"
    )
    html = page.content.decode()
    assert "Webhook “Search index”" in html and "Emails to the author and watchers" in html
    cells = re.findall(r'<td class="field-to">([^<]*)</td>', html)
    assert sorted(cells) == [
        "Emails to the author and watchers",
        "Subscriber demo.reindex",
        "Webhook “Search index”",
    ]
    assert "UTC" in html, "times with their zone"
