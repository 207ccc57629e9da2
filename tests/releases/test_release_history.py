"""A release tells its editors what happens to it: every step in its history (who, when,
what, in the reader's zone), a stop named in the save that caused it and at the top of the
post's page, and a question before a repair sends a past-due release out at once."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from coordination.clock import database_now
from editors.models import EditorProfile
from publishing import posts
from publishing.models import Post
from releases import actions as releases
from releases.models import Release, ReleaseEvent
from releases.rules import goes_out_on_repair
from tests.publishing.conftest import form_data, make_post, run_publish_job

pytestmark = pytest.mark.django_db

RS = Release.Status
EV = ReleaseEvent.Kind
NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)


def said(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def act_url(release, item) -> str:
    url = reverse("admin:releases_release_act", args=[release.pk])
    return f"{url}?item={item.pk}&seen={Post.objects.get(pk=item.post_id).version}"


def stopped_release(editor, *, title="Pricing", past_due=False) -> tuple[Release, Post]:
    """A scheduled release of one post, stopped by an edit of the post; due already if
    ``past_due``."""
    post = make_post(title=title)
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=post, user=editor)
    releases.schedule_release(
        release=release, release_at=database_now() + timedelta(hours=1), user=editor
    )
    post.body = "Changed after it was added."
    posts.save_post(post=post, user=editor)
    if past_due:
        Release.objects.filter(pk=release.pk).update(
            release_at=database_now() - timedelta(minutes=5)
        )
    release.refresh_from_db()
    assert release.problem
    return release, post


@pytest.mark.parametrize(
    "status, problem, release_at, asks",
    [
        (RS.SCHEDULED, "changed", NOW - timedelta(seconds=1), True),
        (RS.SCHEDULED, "changed", NOW, True),
        (RS.SCHEDULED, "changed", NOW + timedelta(seconds=1), False),
        (RS.SCHEDULED, "", NOW - timedelta(hours=1), False),
        (RS.DRAFT, "changed", NOW - timedelta(hours=1), False),
        (RS.RELEASED, "", NOW - timedelta(hours=1), False),
        (RS.SCHEDULED, "changed", None, False),
    ],
)
def test_a_repair_may_send_a_release_at_once_only_when_stopped_past_its_time(
    status, problem, release_at, asks
):
    assert (
        goes_out_on_repair(status=status, problem=problem, release_at=release_at, now=NOW) is asks
    )


def test_every_step_of_a_release_is_in_its_history_in_the_readers_zone(as_editor, editor):
    EditorProfile.objects.create(user=editor, time_zone="Asia/Tokyo")
    release, post = stopped_release(editor)
    item = release.items.get()
    releases.refresh_item(item=item, user=editor)
    releases.edit_release(
        release=release,
        name="Spring launch",
        release_at=datetime(2099, 3, 1, 3, tzinfo=UTC),
        user=editor,
    )
    releases.release_now(release=Release.objects.get(pk=release.pk), user=editor)

    assert release.events.get(kind=EV.STOPPED).by == editor.username, "the editor's save"
    steps = list(release.events.order_by("at", "id").values_list("kind", flat=True))
    assert steps == [
        EV.CREATED,
        EV.ITEM_ADDED,
        EV.SCHEDULED,
        EV.STOPPED,
        EV.ITEM_REFRESHED,
        EV.READY,
        EV.RENAMED,
        EV.SCHEDULED,
        EV.RELEASED,
    ]
    page = as_editor.get(reverse("admin:releases_release_history", args=[release.pk]))
    text = page.content.decode()
    assert page.status_code == 200
    assert "When (Asia/Tokyo)" in text
    assert "“Launch” → “Spring launch”" in text
    assert "2099-03-01 12:00:00 JST" in text, "the planned time in the reader's zone"
    assert "The post was changed after it was added" in text
    assert "“Pricing”: goes out as it is now" in text
    assert "released now: 1 post published" in text
    assert text.index("Released") < text.index("Created"), "newest first"


def test_a_release_sent_by_the_publish_job_says_when_it_was_due_and_by_whom(editor):
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=make_post(title="Due"), user=editor)
    releases.schedule_release(
        release=release, release_at=database_now() + timedelta(seconds=30), user=editor
    )
    Release.objects.filter(pk=release.pk).update(release_at=database_now() - timedelta(seconds=2))
    run_publish_job()
    event = release.events.get(kind=EV.RELEASED)
    assert "scheduler" in event.by.lower()
    assert event.data["published"] == 1 and event.data["late"] >= 2
    assert "planned" in event.data and "by_hand" not in event.data


def test_a_save_that_stops_a_release_says_which_and_what_to_do(as_editor, editor):
    post = make_post(title="Pricing")
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=post, user=editor)
    releases.schedule_release(
        release=release, release_at=database_now() + timedelta(hours=1), user=editor
    )
    change = reverse("admin:publishing_post_change", args=[post.pk])
    page = as_editor.get(change)
    notice = page.content.decode()
    assert 'id="release-notice"' in notice and "“Launch”" in notice
    assert notice.index('id="release-notice"') < notice.index('name="body"'), "at the top"

    data = form_data(page)
    data["body"] = "Edited while in the release."
    saved = as_editor.post(change, data)
    assert saved.status_code == 302, saved.content.decode()[:2000]
    messages = list(get_messages(saved.wsgi_request))
    stopped = [m for m in messages if "This stops the release “Launch”" in str(m)]
    assert stopped and stopped[0].level_tag == "warning", [str(m) for m in messages]
    assert "refresh this post's item" in str(stopped[0])
    assert Release.objects.get(pk=release.pk).problem


def test_a_save_that_stops_nothing_says_nothing_of_releases(as_editor, editor):
    post = make_post(title="Alone")
    change = reverse("admin:publishing_post_change", args=[post.pk])
    page = as_editor.get(change)
    assert 'id="release-notice"' not in page.content.decode()
    data = form_data(page)
    data["body"] = "Edited."
    saved = as_editor.post(change, data)
    assert not any("release" in m for m in said(saved))


def test_repairing_a_stopped_release_past_its_time_asks_first_and_can_keep_it(as_editor, editor):
    release, post = stopped_release(editor, past_due=True)
    item = release.items.get()

    asked = as_editor.post(act_url(release, item), {"verb": "refresh", "version": "1"})
    assert asked.status_code == 200
    text = asked.content.decode()
    assert "did not go out" in text and "it would go out at once" in text
    assert 'value="send"' in text and 'value="hold"' in text
    assert Release.objects.get(pk=release.pk).problem, "asking changes nothing"

    kept = as_editor.post(act_url(release, item), {"verb": "refresh", "past_due": "hold"})
    assert any("waits as a draft" in m for m in said(kept))
    release.refresh_from_db()
    assert (release.status, release.problem) == (RS.DRAFT, "")
    run_publish_job()
    assert Post.objects.get(pk=post.pk).status == Post.Status.DRAFT, "nothing went out"
    assert release.events.filter(kind=EV.UNSCHEDULED).exists()


def test_repairing_a_stopped_release_past_its_time_sends_it_when_told(as_editor, editor):
    release, post = stopped_release(editor, past_due=True)
    item = release.items.get()
    sent = as_editor.post(act_url(release, item), {"verb": "remove", "past_due": "send"})
    assert any("was taken out of the release" in m for m in said(sent))
    assert Release.objects.get(pk=release.pk).status == RS.SCHEDULED


def test_repairing_a_stopped_release_before_its_time_asks_nothing(as_editor, editor):
    release, _ = stopped_release(editor)
    item = release.items.get()
    done = as_editor.post(act_url(release, item), {"verb": "refresh"})
    assert done.status_code == 302
    assert Release.objects.get(pk=release.pk).problem == ""


def test_with_review_on_an_unapproved_release_offers_no_schedule_and_says_why(
    as_editor, editor, reviews_on
):
    release = releases.create_release(name="Launch", user=editor)
    releases.add_item(release=release, post=make_post(title="Offer"), user=editor)
    page = as_editor.get(reverse("admin:releases_release_change", args=[release.pk]))
    text = page.content.decode()
    assert 'value="submit_review"' in text
    assert 'value="schedule"' not in text and 'value="release_now"' not in text
    assert 'id="release-needs-approval"' in text
