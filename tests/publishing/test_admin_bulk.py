"""Scheduling many posts at once from the post list: one time in the editor's zone, the single
form's daylight-saving rules, and each post through the same action as its own form."""

from datetime import UTC, datetime

import pytest
from django.contrib.messages import get_messages
from django.test import override_settings
from django.urls import reverse

from publishing.admin.bulk import Step, plan
from publishing.models import Post
from tests.publishing.conftest import form_data, live_post, make_post

pytestmark = pytest.mark.django_db

S = Post.Status
LIST = reverse("admin:publishing_post_changelist")


@pytest.mark.parametrize(
    ("status", "step"),
    [
        (S.DRAFT, Step.SCHEDULE),
        (S.UNPUBLISHED, Step.SCHEDULE),
        (S.SCHEDULED, Step.RESCHEDULE),
        (S.PUBLISHED, Step.REFUSE),
    ],
)
def test_what_a_bulk_schedule_does_to_a_post_of_each_status(status, step):
    assert plan(status) == step


def open_page(client, chosen):
    chose = client.post(
        LIST, {"action": "bulk_schedule_action", "_selected_action": [p.pk for p in chosen]}
    )
    assert chose.status_code == 302, chose.content.decode()[:500]
    page = client.get(chose.url)
    assert page.status_code == 200
    return page


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@override_settings(TIME_ZONE="Europe/Berlin")
def test_selected_posts_are_scheduled_or_moved_and_a_live_one_is_named(as_editor):
    drafts = [make_post(title=f"Draft {n}") for n in range(3)]
    moved = make_post(
        title="Moved", status=S.SCHEDULED, publish_at=datetime(2099, 1, 1, tzinfo=UTC)
    )
    live = live_post(title="Live one")
    page = open_page(as_editor, [*drafts, moved, live])
    html = page.content.decode()
    assert "Left as it is: it is live" in html and "Moved to the new time" in html

    data = form_data(page, "bulk-schedule")
    data.update(publish_at_0="2099-06-01", publish_at_1="09:00:00")
    done = as_editor.post(page.wsgi_request.path, data)
    assert done.status_code == 302
    assert "3 posts scheduled." in said(done) and "1 post rescheduled." in said(done)
    assert any("“Live one”" in m for m in said(done))
    nine_in_berlin = datetime(2099, 6, 1, 7, 0, tzinfo=UTC)
    planned = Post.objects.exclude(pk=live.pk).values_list("status", "publish_at")
    assert set(planned) == {(S.SCHEDULED, nine_in_berlin)}
    assert Post.objects.get(pk=live.pk).status == S.PUBLISHED


@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_time_the_clocks_skip_is_refused_and_one_they_pass_twice_asks_which(as_editor):
    chosen = [make_post(title=f"Draft {n}") for n in range(2)]
    page = open_page(as_editor, chosen)
    data = form_data(page, "bulk-schedule")

    gap = as_editor.post(
        page.wsgi_request.path, {**data, "publish_at_0": "2099-03-29", "publish_at_1": "02:30"}
    )
    assert gap.status_code == 200
    assert "02:30 does not exist on 2099-03-29 in Europe/Berlin" in gap.content.decode()
    assert set(Post.objects.values_list("status", flat=True)) == {S.DRAFT}

    fold = as_editor.post(
        page.wsgi_request.path, {**data, "publish_at_0": "2099-10-25", "publish_at_1": "02:30"}
    )
    html = fold.content.decode()
    assert "02:30 happens twice on 2099-10-25 in Europe/Berlin" in html
    assert "This time happens twice (clocks go back). Which one?" in html
    second = datetime(2099, 10, 25, 1, 30, tzinfo=UTC)  # 02:30 CET, after the clocks go back
    picked = as_editor.post(
        page.wsgi_request.path,
        {
            **data,
            "publish_at_0": "2099-10-25",
            "publish_at_1": "02:30",
            "publish_at_2": second.isoformat(),
        },
    )
    assert picked.status_code == 302
    assert set(Post.objects.values_list("publish_at", flat=True)) == {second}


def test_editors_who_may_not_publish_cannot_schedule_in_bulk(as_drafter):
    post = make_post()
    chose = as_drafter.post(LIST, {"action": "bulk_schedule_action", "_selected_action": [post.pk]})
    assert chose.status_code in (200, 302)
    page = as_drafter.get(reverse("admin:publishing_post_bulk_schedule") + f"?ids={post.pk}")
    assert page.status_code == 403
    assert Post.objects.get(pk=post.pk).status == S.DRAFT
