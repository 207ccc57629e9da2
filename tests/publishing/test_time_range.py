"""Times a post can be given: ones every time zone can show, and never naive ones.

9999-12-31 is a valid UTC instant but not a valid local time east of UTC: shown in such a zone
it overflows and the page fails. The services refuse such times (so the admin, which checks
through the same validation, refuses them too), and a naive datetime is a clear ValueError.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.urls import reverse

from coordination.clock import database_now
from publishing import posts
from publishing.exceptions import InvalidSchedule
from publishing.models import Post
from publishing.validation import LATEST_TIME
from tests.publishing.conftest import form_data, future_post, make_post

pytestmark = pytest.mark.django_db

S = Post.Status
END_OF_TIME = datetime(9999, 12, 31, 12, 0, tzinfo=UTC)
ZONES = ["Pacific/Kiritimati", "Etc/GMT+12", "Europe/Berlin"]


def test_scheduling_at_the_end_of_time_is_refused(editor):
    post = make_post()
    with pytest.raises(InvalidSchedule, match="cannot be shown in every time zone"):
        posts.schedule_post(post=post, publish_at=END_OF_TIME, user=editor)
    with pytest.raises(InvalidSchedule, match="cannot be shown in every time zone"):
        posts.schedule_post(
            post=post,
            publish_at=database_now() + timedelta(hours=1),
            unpublish_at=END_OF_TIME,
            user=editor,
        )
    post.refresh_from_db()
    assert (post.status, post.publish_at) == (S.DRAFT, None)


def test_rescheduling_and_setting_an_unpublish_time_refuse_it_too(editor):
    with pytest.raises(InvalidSchedule, match="cannot be shown in every time zone"):
        posts.reschedule_post(post=future_post(), publish_at=END_OF_TIME, user=editor)
    with pytest.raises(InvalidSchedule, match="cannot be shown in every time zone"):
        posts.set_unpublish_at(
            post=make_post(status=S.PUBLISHED), unpublish_at=END_OF_TIME, user=editor
        )


def test_a_draft_cannot_keep_such_a_time_either(editor):
    post = make_post()
    post.publish_at = END_OF_TIME
    with pytest.raises(InvalidSchedule, match="cannot be shown in every time zone"):
        posts.save_post(post=post, user=editor)
    assert Post.objects.get(pk=post.pk).publish_at is None


@pytest.mark.parametrize(
    "call",
    [
        lambda p, u, t: posts.schedule_post(post=p, publish_at=t, user=u),
        lambda p, u, t: posts.schedule_post(
            post=p, publish_at=datetime(2099, 1, 1, tzinfo=UTC), unpublish_at=t, user=u
        ),
        lambda p, u, t: posts.save_post(post=_with_publish_at(p, t), user=u),
    ],
    ids=["schedule publish_at", "schedule unpublish_at", "draft publish_at"],
)
def test_a_naive_datetime_is_a_clear_value_error(editor, call):
    naive = datetime(2099, 1, 1, 12, 0)
    with pytest.raises(ValueError, match="aware datetime .* time zone"):
        call(make_post(), editor, naive)


def _with_publish_at(post: Post, when: datetime) -> Post:
    post.publish_at = when
    return post


def test_the_naive_check_covers_reschedule_and_unpublish_times(editor):
    naive = datetime(2099, 1, 1, 12, 0)
    with pytest.raises(ValueError, match="aware datetime"):
        posts.reschedule_post(post=future_post(), publish_at=naive, user=editor)
    with pytest.raises(ValueError, match="aware datetime"):
        posts.set_unpublish_at(post=make_post(status=S.PUBLISHED), unpublish_at=naive, user=editor)


@override_settings(TIME_ZONE="Pacific/Kiritimati")
def test_the_admin_refuses_it_and_its_pages_keep_working(client, editor):
    client.force_login(editor)
    post = make_post()
    url = reverse("admin:publishing_post_change", args=[post.pk])
    data = form_data(client.get(url))
    data.update(target_status=S.SCHEDULED, publish_at_0="9999-12-31", publish_at_1="23:00:00")
    response = client.post(url, data)
    assert response.status_code == 200
    assert "cannot be shown in every time zone" in response.content.decode()
    data.update(target_status=S.DRAFT)
    assert "cannot be shown in every time zone" in client.post(url, data).content.decode()
    assert Post.objects.get(pk=post.pk).publish_at is None
    assert client.get(reverse("admin:index")).status_code == 200


@pytest.mark.parametrize("zone", ZONES)
def test_the_latest_accepted_time_shows_in_every_zone(client, editor, zone):
    scheduled = posts.schedule_post(post=make_post(), publish_at=LATEST_TIME, user=editor)
    live = posts.publish_now(post=make_post(slug="live"), user=editor)
    posts.set_unpublish_at(post=live, unpublish_at=LATEST_TIME, user=editor)
    client.force_login(editor)
    with override_settings(TIME_ZONE=zone):
        for url in [
            reverse("admin:index"),
            reverse("admin:publishing_post_changelist"),
            reverse("admin:publishing_post_change", args=[scheduled.pk]),
            reverse("admin:publishing_post_change", args=[live.pk]),
            "/",
            live.get_absolute_url(),
            "/feed/",
        ]:
            assert client.get(url).status_code == 200, url
