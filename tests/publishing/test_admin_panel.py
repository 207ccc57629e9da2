"""The publishing panel's words for each state of a post (a table), what the post page
offers whom (buttons for the actions a state allows, none to a drafter), and how its history
names the scheduler and a lateness under a second."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse

from publishing import batches
from publishing.admin.panel import PostState, state_text
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import due_post, form_data, future_post, make_post

S = Post.Status
TOKYO = ZoneInfo("Asia/Tokyo")
NOW = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)  # Wed 2 Dec, 02:00 JST


@pytest.mark.parametrize(
    ("state", "text"),
    [
        (PostState(S.DRAFT), "Draft: the public does not see it"),
        (
            PostState(S.SCHEDULED, publish_at=NOW + timedelta(hours=3, minutes=12, seconds=5)),
            "Scheduled: goes live Wed 2 Dec, 05:12 JST, in 3 h 12 min",
        ),
        (
            PostState(
                S.SCHEDULED,
                publish_at=NOW + timedelta(hours=1),
                unpublish_at=NOW + timedelta(days=2),
            ),
            "Scheduled: goes live Wed 2 Dec, 03:00 JST, in 1 h; comes down Fri 4 Dec, "
            "02:00 JST, in 2 d",
        ),
        (
            PostState(S.SCHEDULED, publish_at=NOW - timedelta(minutes=4, seconds=10)),
            "Late: was due Wed 2 Dec, 01:55 JST (4 min 10 s ago); the scheduler has not "
            "published it yet",
        ),
        (
            PostState(S.SCHEDULED, publish_at=NOW, error="the title is empty"),
            "Late: was due Wed 2 Dec, 02:00 JST (now); the scheduler could not publish it: the "
            "title is empty. Fix the post and save it, and the scheduler tries again.",
        ),
        (
            PostState(S.PUBLISHED, published_at=datetime(2025, 6, 1, 3, 0, tzinfo=UTC)),
            "Live since Sun 1 Jun 2025, 12:00 JST",
        ),
        (
            PostState(S.UNPUBLISHED, taken_down_at=NOW - timedelta(days=1)),
            "Taken down on Tue 1 Dec, 02:00 JST; the public does not see it",
        ),
        (PostState(S.UNPUBLISHED), "Taken down; the public does not see it"),
    ],
)
def test_the_panel_says_where_the_post_is_in_the_editors_zone(state, text):
    assert state_text(state, zone=TOKYO, now=NOW) == text


def change_url(post: Post) -> str:
    return reverse("admin:publishing_post_change", args=[post.pk])


def action_buttons(html: str) -> list[str]:
    return [part.split('"', 1)[0] for part in html.split('name="_publishing_action" value="')[1:]]


@pytest.mark.parametrize(
    ("status", "buttons"),
    [
        (S.DRAFT, ["scheduled", "published"]),
        (S.SCHEDULED, ["published", "draft"]),
        (S.PUBLISHED, ["unpublished"]),
        (S.UNPUBLISHED, ["scheduled", "published"]),
    ],
)
def test_each_state_offers_its_actions_as_buttons(as_editor, status, buttons):
    post = make_post(status=status) if status != S.SCHEDULED else future_post()
    html = as_editor.get(change_url(post)).content.decode()
    assert action_buttons(html) == buttons
    assert ("Schedule a revision" in html) == (status == S.PUBLISHED)


def test_a_drafter_sees_the_state_and_no_publishing_buttons(as_drafter):
    html = as_drafter.get(change_url(make_post())).content.decode()
    assert "Draft: the public does not see it" in html
    assert action_buttons(html) == []
    assert "ask an editor who has it to schedule or publish this post" in html


def test_a_button_saves_the_text_stays_on_the_post_and_says_when_it_goes_out(as_editor):
    post = make_post(title="Opening hours")
    data = form_data(as_editor.get(change_url(post)))
    data.update(
        title="Opening hours (winter)",
        publish_at_0="2099-01-05",
        publish_at_1="09:30:00",
        _publishing_action=S.SCHEDULED,
    )
    response = as_editor.post(change_url(post), data, follow=True)
    assert response.redirect_chain[-1][0] == change_url(post)
    (message,) = [str(m) for m in response.context["messages"]]
    assert message.startswith(
        "“Opening hours (winter)”: Scheduled: goes live Mon 5 Jan 2099, 09:30"
    )
    post.refresh_from_db()
    assert (post.title, post.status) == ("Opening hours (winter)", S.SCHEDULED)


def test_the_history_names_the_scheduler_and_a_sub_second_lateness_is_on_time(as_editor):
    post = due_post(seconds_ago=0.2)
    assert batches.publish_due(node="vm:11206").done == [post.pk]
    PublishEvent.objects.filter(post=post).update(lateness=0.35)
    html = as_editor.get(change_url(post)).content.decode()
    history = html.split('id="events-group"', 1)[1]
    assert "Scheduler (node vm:11206)" in history
    assert "on time" in history
    assert "0.35 s late" not in history
