"""Shared links to the site at a moment: anyone holding one sees it until it expires, the plan
changes or a shown post's preview links are revoked; anything wrong with one is a 404."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from coordination.clock import database_now
from publishing import previews
from publishing.site_at_facts import touched
from publishing.site_at_links import SharedMoment, make_token, plan_digest
from publishing.sitemaps import PostSitemap, id_page
from tests.publishing.conftest import future_post, live_post

pytestmark = pytest.mark.django_db

SITE_AT = reverse("admin:publishing_post_site_at")
SHARE = reverse("admin:publishing_post_site_at_share")


def share(client, at, hours: int = 24) -> str:
    """Make a link as an editor does; return its address from the page it is shown on."""
    query = f"?at={at.isoformat().replace('+', '%2B')}"
    response = client.post(SHARE + query, {"hours": hours})
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    start = page.index('id="site-at-shared-url"')
    value = page[page.index('value="', start) + 7 :]
    return value[: value.index('"')]


def test_a_shared_link_shows_the_moment_to_someone_without_an_account(as_editor, client):
    at = database_now() + timedelta(hours=2)
    coming = future_post(seconds_ahead=3600, title="Spring menu", body="Fresh *peas*.")
    link = share(as_editor, at)
    as_editor.logout()
    response = client.get(link)
    page = response.content.decode()
    assert response.status_code == 200
    assert "Spring menu" in page and 'id="site-at-banner"' in page
    assert 'id="site-at-leave"' not in page and "site-at-share" not in page
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert "no-store" in response["Cache-Control"]
    post = client.get(f"{link}posts/{coming.slug}/").content.decode()
    assert "<em>peas</em>" in post
    feed = client.get(f"{link}feed/").content.decode()
    assert "Spring menu" in feed and f"{link}posts/{coming.slug}/" in feed
    sitemap = client.get(f"{link}sitemap.xml")
    assert sitemap["X-Robots-Tag"] == "noindex, nofollow"
    sections = re.findall(r"<loc>(.*?)</loc>", sitemap.content.decode())
    assert sections[0].endswith(f"{link}sitemap-pages.xml")
    # The posts section is paged by post id: the post is on its id's page, wherever the
    # database's sequence stands.
    page = id_page(coming.pk, PostSitemap.limit)
    posts = client.get(f"{link}sitemap-posts.xml", {"p": page} if page > 1 else {})
    assert f"{link}posts/{coming.slug}/</loc>" in posts.content.decode()
    assert posts["X-Robots-Tag"] == "noindex, nofollow" and "no-store" in posts["Cache-Control"]
    # Shown once to the editor who made it.
    assert (
        'id="site-at-shared-url"'
        not in as_editor.get(SITE_AT, {"at": at.isoformat()}).content.decode()
    )


def test_revoking_a_shown_posts_preview_links_ends_the_shared_link(as_editor, client, editor):
    at = database_now() + timedelta(hours=2)
    coming = future_post(seconds_ahead=3600, title="Spring menu")
    link = share(as_editor, at)
    assert client.get(link).status_code == 200
    previews.revoke_preview_links(post=coming, user=editor)
    assert client.get(link).status_code == 404


def test_a_change_of_the_plan_ends_the_shared_link(as_editor, client):
    at = database_now() + timedelta(hours=2)
    future_post(seconds_ahead=3600, title="Spring menu")
    link = share(as_editor, at)
    live_post(title="Sale", unpublish_at=database_now() + timedelta(hours=1))
    assert client.get(link).status_code == 404


@pytest.mark.parametrize("broken", ["expired", "tampered", "garbage"])
def test_a_broken_shared_link_is_the_sites_404(client, broken):
    at = (database_now() + timedelta(hours=2)).replace(microsecond=0)
    expires = database_now() + (timedelta(hours=-1) if broken == "expired" else timedelta(hours=1))
    token = make_token(SharedMoment(at, expires, plan_digest(touched(at))))
    if broken == "tampered":
        token = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    if broken == "garbage":
        token = "x" * 300
    url = reverse("publishing:site_at_shared", kwargs={"token": token})
    assert client.get(url).status_code == 404


def test_only_editors_who_may_preview_make_links(client):
    User.objects.create_user("visitor", password="pw", is_staff=True)
    client.login(username="visitor", password="pw")
    at = database_now() + timedelta(hours=2)
    response = client.post(f"{SHARE}?at={at.isoformat().replace('+', '%2B')}", {"hours": 1})
    assert response.status_code == 403


def test_a_links_life_is_bounded(as_editor):
    at = database_now() + timedelta(hours=2)
    query = f"?at={at.isoformat().replace('+', '%2B')}"
    response = as_editor.post(SHARE + query, {"hours": 24 * 365}, follow=True)
    assert 'id="site-at-shared-url"' not in response.content.decode()
    assert "less than or equal to" in response.content.decode()


def test_a_shared_page_reads_the_moments_releases_once(as_editor, client):
    at = database_now() + timedelta(hours=2)
    coming = future_post(seconds_ahead=3600, title="Spring menu")
    link = share(as_editor, at)
    as_editor.logout()
    for page in (link, f"{link}posts/{coming.slug}/"):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(page).status_code == 200
        table = f"FROM {connection.ops.quote_name('publishing_release')}"
        releases = [q for q in queries.captured_queries if table in q["sql"]]
        assert len(releases) == 1, "the link's check and the page share one read"


def test_a_shared_page_counts_the_changes_as_the_editors_page_does_with_the_links_check(
    as_editor, client
):
    at = database_now() + timedelta(hours=2)
    coming = future_post(seconds_ahead=3600, title="Spring menu")
    # Published and taken down again by then: two changes of one post.
    future_post(
        seconds_ahead=1200, title="Pop-up", unpublish_at=database_now() + timedelta(hours=1)
    )
    live_post(title="Sale", unpublish_at=database_now() + timedelta(minutes=30))
    said = "4 changes from now"
    assert said in as_editor.get(SITE_AT, {"at": at.isoformat()}).content.decode()
    link = share(as_editor, at)
    as_editor.logout()
    for page in (link, f"{link}posts/{coming.slug}/"):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(page)
        assert said in response.content.decode()
        counts = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
        assert counts == [], "the link's check reads the changes; the page counts those"
