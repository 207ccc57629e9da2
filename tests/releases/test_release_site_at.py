"""A release in the site at a moment: what it puts live by then, and a stopped release shown as
not going out, with why (the banner's "will not happen"), its post not live."""

from datetime import timedelta

import pytest
from django.urls import reverse

from coordination.clock import database_now
from publishing import posts
from releases import actions as releases
from tests.publishing.conftest import make_post

pytestmark = pytest.mark.django_db

SITE_AT = reverse("admin:publishing_post_site_at")


def scheduled_launch(editor):
    draft = make_post(title="New product", body="It is here.")
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=draft, user=editor)
    at = database_now() + timedelta(hours=1)
    releases.schedule_release(release=release, release_at=at, user=editor)
    return draft, at


def site_after(client, at) -> str:
    return client.get(SITE_AT, {"at": (at + timedelta(minutes=1)).isoformat()}).content.decode()


def test_a_scheduled_release_puts_its_posts_live_at_its_time(as_editor, editor):
    draft, at = scheduled_launch(editor)
    page = site_after(as_editor, at)
    assert ">New product</a> goes live at" in page and "(the release “Launch”)" in page
    assert f'href="{reverse("admin:publishing_post_site_at_post", args=[draft.slug])}' in page
    assert "will not happen" not in page


def test_a_stopped_release_is_shown_as_not_going_out_with_why(as_editor, editor):
    draft, at = scheduled_launch(editor)
    draft.body = "Changed after it was added."
    posts.save_post(post=draft, user=editor)  # the release stops: its item no longer applies
    page = site_after(as_editor, at)
    banner = page[page.index('id="site-at-banner"') : page.index("</aside>")]
    assert "will not happen" in banner and "the release is stopped" in banner
    assert "changed after it was added" in banner
    listed = page[page.index("</aside>") :]
    assert "New product" not in listed
