"""Django's pages every model shares, as an editor reads them: the site's name in the header,
and an object's history with times in the editor's zone and the fields by their labels."""

import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.contrib.admin.models import LogEntry
from django.test import override_settings
from django.urls import reverse

from coordination.clock import database_now
from publishing import posts
from publishing.models import Post
from releases.models import Release
from tests.publishing.conftest import form_data, make_post

pytestmark = pytest.mark.django_db


def test_the_admin_header_and_titles_name_the_site(as_editor):
    html = as_editor.get(reverse("admin:index")).content.decode()
    assert "Django administration" not in html and "Django site admin" not in html
    assert '<a href="/admin/">Instatic</a>' in html
    with override_settings(INSTATIC_SITE_NAME="Harbour News"):
        html = as_editor.get(reverse("admin:index")).content.decode()
    assert '<a href="/admin/">Harbour News</a>' in html
    assert re.search(r"<title>[^<]*\| Harbour News</title>", html)


@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_posts_history_names_fields_by_label_and_times_with_their_zone(as_editor):
    post = make_post(title="Opening hours", body="We open at 9.")
    url = reverse("admin:publishing_post_change", args=[post.pk])
    tab = form_data(as_editor.get(url))
    # A colleague's body meanwhile: the editor's save comes back merged, the body to choose.
    current = Post.objects.get(pk=post.pk)
    current.body = "We open at 10."
    posts.save_post(post=current, user=None, expected_version=current.version)
    merged = as_editor.post(url, {**tab, "title": "Summer hours", "body": "We open at 8."})
    chosen = {**form_data(merged), "keep_body": "mine"}
    assert as_editor.post(url, chosen).status_code == 302

    html = as_editor.get(reverse("admin:publishing_post_history", args=[post.pk])).content
    html = html.decode()
    assert "Changed Title and Body." in html
    for internal in ("opened", "version", "keep_", "Actions"):
        assert internal not in html.split('id="change-history"')[1], internal
    entry = LogEntry.objects.get(object_id=str(post.pk))
    local = entry.action_time.astimezone(ZoneInfo("Europe/Berlin"))
    assert f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}" in html
    assert "Date/time (Europe/Berlin)" in html
    assert " p.m." not in html and " a.m." not in html


@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_released_releases_page_shows_its_times_with_their_zone(as_editor, editor):
    from releases import actions as releases

    planned = database_now() + timedelta(days=3)
    release = releases.create_release(name="Launch", user=editor, release_at=planned)
    releases.add_item(release=release, post=make_post(title="News"), user=editor)
    releases.release_now(release=Release.objects.get(pk=release.pk), user=editor)
    page = as_editor.get(reverse("admin:releases_release_change", args=[release.pk]))
    html = page.content.decode()
    went = Release.objects.get(pk=release.pk).release_at  # released now: the time it went
    local = went.astimezone(ZoneInfo("Europe/Berlin"))
    shown = f'<div class="readonly">{local:%Y-%m-%d %H:%M:%S} {local.tzname()}</div>'
    assert shown in html, "the read-only time, 24-hour and zoned"
    assert " p.m." not in html and " a.m." not in html
