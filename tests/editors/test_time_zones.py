"""Each editor sees and enters times in their own time zone, set by them or by an admin.

The zone lives on a small profile (``editors.EditorProfile``) and is activated for admin
requests by ``editors.middleware.EditorTimeZoneMiddleware``; without one, the site's
``INSTATIC_TIME_ZONE`` applies. Every date the publishing admin shows names its zone.
"""

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from editors.models import EditorProfile
from publishing import posts
from publishing.models import Post
from tests.publishing.conftest import form_data, make_post

pytestmark = pytest.mark.django_db

S = Post.Status
ADD_URL = reverse("admin:publishing_post_add")
LIST_URL = reverse("admin:publishing_post_changelist")
MY_ZONE_URL = reverse("my_time_zone")
LAUNCH = datetime(2099, 1, 15, 3, 0, tzinfo=UTC)  # 12:00 JST, 04:00 CET


def change_url(post: Post) -> str:
    return reverse("admin:publishing_post_change", args=[post.pk])


def in_zone(user: User, zone: str) -> User:
    EditorProfile.objects.update_or_create(user=user, defaults={"time_zone": zone})
    return user


@pytest.fixture
def tokyo_editor(client, editor):
    in_zone(editor, "Asia/Tokyo")
    client.force_login(editor)
    return client


@override_settings(TIME_ZONE="Europe/Berlin")
def test_an_editor_sees_the_post_list_form_and_history_in_their_own_zone(tokyo_editor, editor):
    post = make_post(title="Launch", body="Hello.")
    posts.schedule_post(post=post, publish_at=LAUNCH, user=editor)

    listing = tokyo_editor.get(LIST_URL).content.decode()
    assert "Scheduled for (Asia/<wbr>Tokyo)" in listing
    assert "2099-01-15 12:00:00 JST" in listing
    assert "Europe/Berlin" not in listing
    assert "Updated (Asia/<wbr>Tokyo)" in listing, "the list's last-change column names its zone"
    assert '<td class="field-scheduled_for">2099-01-15 12:00 JST</td>' in listing

    page = tokyo_editor.get(change_url(post))
    html = page.content.decode()
    assert "HH:MM, 24-hour clock, Asia/Tokyo" in html, "the time inputs name the zone"
    assert "Times are in Asia/Tokyo." in html
    assert "When (Asia/Tokyo)" in html, "the publish history names its zone"
    data = form_data(page)
    assert (data["publish_at_0"], data["publish_at_1"]) == ("2099-01-15", "12:00:00")


@override_settings(TIME_ZONE="Europe/Berlin")
def test_times_an_editor_enters_are_read_in_their_zone(tokyo_editor):
    page = tokyo_editor.get(ADD_URL)
    data = form_data(page)
    data.update(
        title="Morning",
        slug="morning",
        body="Good morning.",
        target_status=S.SCHEDULED,
        publish_at_0="2099-01-15",
        publish_at_1="12:00:00",
    )
    assert tokyo_editor.post(ADD_URL, data).status_code == 302
    assert Post.objects.get(slug="morning").publish_at == LAUNCH


@override_settings(TIME_ZONE="Europe/Berlin")
def test_without_a_profile_the_site_zone_applies(client, editor):
    make_post(title="Launch", status=S.SCHEDULED, publish_at=LAUNCH)
    client.force_login(editor)
    listing = client.get(LIST_URL).content.decode()
    assert "Scheduled for (Europe/<wbr>Berlin)" in listing
    assert "2099-01-15 04:00:00 CET" in listing


@override_settings(TIME_ZONE="Europe/Berlin")
def test_the_zone_is_only_active_for_that_editors_admin_request(tokyo_editor):
    tokyo_editor.get(LIST_URL)
    assert timezone.get_current_timezone_name() == "Europe/Berlin"
    make_post(title="Live", status=S.PUBLISHED)
    # The public site is the same for everyone (and cacheable): never in a visitor's zone.
    assert tokyo_editor.get("/").status_code == 200


@override_settings(TIME_ZONE="Europe/Berlin")
def test_an_editor_sets_their_own_zone(client, drafter):
    client.force_login(drafter)
    page = client.get(MY_ZONE_URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Europe/Berlin" in html
    response = client.post(MY_ZONE_URL, {"time_zone": "America/Chicago"}, follow=True)
    assert response.status_code == 200
    assert EditorProfile.objects.get(user=drafter).time_zone == "America/Chicago"
    assert "America/Chicago" in response.content.decode()
    # Every admin page names the zone in its header, with a link to change it.
    index = client.get(reverse("admin:index")).content.decode()
    assert "Time zone: America/Chicago" in index
    assert MY_ZONE_URL in index


def test_an_unknown_zone_is_refused(client, drafter):
    client.force_login(drafter)
    response = client.post(MY_ZONE_URL, {"time_zone": "Mars/Olympus_Mons"})
    assert response.status_code == 200
    assert not EditorProfile.objects.filter(user=drafter).exists()
    assert "Select a valid choice" in response.content.decode()


def test_the_zone_page_needs_a_staff_login(client, db):
    response = client.get(MY_ZONE_URL)
    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]


def test_an_admin_sets_an_editors_zone_on_the_user_page(admin_client, editor):
    url = reverse("admin:auth_user_change", args=[editor.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    data = form_data(page, "user_form")
    prefix = next(k for k in data if k.endswith("-TOTAL_FORMS")).removesuffix("-TOTAL_FORMS")
    data[f"{prefix}-0-time_zone"] = "Asia/Tokyo"
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert EditorProfile.objects.get(user=editor).time_zone == "Asia/Tokyo"


def test_a_zone_no_longer_known_falls_back_to_the_site_zone(client, editor, caplog):
    EditorProfile.objects.create(user=editor, time_zone="Nowhere/Gone")
    client.force_login(editor)
    with override_settings(TIME_ZONE="Europe/Berlin"):
        page = client.get(reverse("admin:index")).content.decode()
    assert "Time zone: Europe/Berlin" in page
    assert "Nowhere/Gone" in caplog.text


def test_the_middleware_after_authentication_is_a_system_check():
    middleware = [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "editors.middleware.EditorTimeZoneMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
    ]
    with override_settings(MIDDLEWARE=middleware):
        ids = [m.id for m in run_checks()]
    assert "editors.E001" in ids
    with override_settings(MIDDLEWARE=middleware[::2]):
        ids = [m.id for m in run_checks()]
    assert "editors.W001" in ids
