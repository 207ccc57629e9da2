"""The editors' admin through the test client: forms, actions, permission, banner, lineup."""

from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.test import override_settings
from django.urls import reverse

from coordination.clock import database_now
from coordination.models import Node
from publishing import batches, posts
from publishing.models import Post, PublishEvent
from publishing.rendering import RenderError
from tests.publishing.conftest import due_post, form_data, future_post, kinds, live_node, make_post

pytestmark = pytest.mark.django_db

S = Post.Status
K = PublishEvent.Kind
ADD_URL = reverse("admin:publishing_post_add")
LIST_URL = reverse("admin:publishing_post_changelist")
INDEX_URL = reverse("admin:index")
BANNER = (
    "No scheduler is running: scheduled posts will not go out until the scheduler is back. "
    "Tell your site's operator."
)
OPERATOR_HINT = "python manage.py runscheduler"


def change_url(post: Post) -> str:
    return reverse("admin:publishing_post_change", args=[post.pk])


def submit(client, url: str, **changes):
    """Load the form at ``url``, change some fields like an editor would, submit it."""
    page = client.get(url)
    assert page.status_code == 200
    data = form_data(page)
    data.update(changes)
    return client.post(url, data)


def run_action(client, action: str, *posts: Post):
    return client.post(
        LIST_URL,
        {"action": action, "_selected_action": [p.pk for p in posts], "index": 0},
        follow=True,
    )


def page_errors(response) -> str:
    assert response.status_code == 200, "the form should have been shown again with errors"
    return response.content.decode()


# --- creating and scheduling -----------------------------------------------------------


def test_editor_creates_a_draft(as_editor, editor):
    response = submit(as_editor, ADD_URL, title="First", slug="first", body="Hello")
    assert response.status_code == 302
    post = Post.objects.get(slug="first")
    assert (post.status, post.author, post.publish_at) == (S.DRAFT, editor, None)
    assert kinds(post) == []


@override_settings(TIME_ZONE="Europe/Berlin")
def test_editor_schedules_in_their_time_zone(as_editor, editor):
    add_page = as_editor.get(ADD_URL).content.decode()
    assert "HH:MM, 24-hour clock, Europe/Berlin" in add_page
    response = submit(
        as_editor,
        ADD_URL,
        title="Summer",
        slug="summer",
        body="It is *warm*.",
        target_status=S.SCHEDULED,
        publish_at_0="2099-07-01",
        publish_at_1="14:00:00",
    )
    assert response.status_code == 302
    post = Post.objects.get(slug="summer")
    # 14:00 in Berlin in July (CEST, UTC+2) is 12:00 UTC.
    assert post.publish_at == datetime(2099, 7, 1, 12, 0, tzinfo=UTC)
    assert post.status == S.SCHEDULED
    event = post.events.get()
    assert (event.kind, event.user) == (K.SCHEDULED, editor)

    listing = as_editor.get(LIST_URL).content.decode()
    assert "Scheduled for (Europe/<wbr>Berlin)" in listing
    assert "2099-07-01 14:00:00 CEST" in listing, "the lineup, to the second"
    assert '<td class="field-scheduled_for">2099-07-01 14:00 CEST</td>' in listing
    change_page = form_data(as_editor.get(change_url(post)))
    assert (change_page["publish_at_0"], change_page["publish_at_1"]) == ("2099-07-01", "14:00:00")


@override_settings(TIME_ZONE="America/New_York")
def test_reschedule_through_the_form(as_editor, editor):
    post = posts.schedule_post(
        post=make_post(), publish_at=datetime(2099, 1, 10, 15, 0, tzinfo=UTC), user=editor
    )
    response = submit(as_editor, change_url(post), publish_at_1="09:30:00")
    assert response.status_code == 302
    post.refresh_from_db()
    # 09:30 in New York in January (EST, UTC-5) is 14:30 UTC.
    assert post.publish_at == datetime(2099, 1, 10, 14, 30, tzinfo=UTC)
    assert post.status == S.SCHEDULED
    assert kinds(post) == [K.SCHEDULED, K.RESCHEDULED]


def test_cancel_through_the_form(as_editor):
    post = future_post()
    response = submit(as_editor, change_url(post), target_status=S.DRAFT)
    assert response.status_code == 302
    post.refresh_from_db()
    assert post.status == S.DRAFT
    assert kinds(post) == [K.CANCELLED]


def test_publish_now_and_unpublish_through_the_form(as_editor, editor):
    post = make_post()
    assert submit(as_editor, change_url(post), target_status=S.PUBLISHED).status_code == 302
    post.refresh_from_db()
    assert post.status == S.PUBLISHED and post.published_at is not None
    assert submit(as_editor, change_url(post), target_status=S.UNPUBLISHED).status_code == 302
    post.refresh_from_db()
    assert post.status == S.UNPUBLISHED
    assert list(post.events.order_by("at", "id").values_list("kind", "user")) == [
        (K.PUBLISHED, editor.pk),
        (K.UNPUBLISHED, editor.pk),
    ]


def test_editing_a_live_post_keeps_it_live(as_editor):
    post = make_post(status=S.PUBLISHED, title="Old title")
    assert submit(as_editor, change_url(post), title="New title").status_code == 302
    post.refresh_from_db()
    assert (post.title, post.status) == ("New title", S.PUBLISHED)


# --- actions ---------------------------------------------------------------------------


def test_actions_publish_cancel_and_unpublish(as_editor):
    draft, scheduled = make_post(), future_post()
    response = run_action(as_editor, "publish_now_action", draft)
    assert "1 post published." in response.content.decode()
    response = run_action(as_editor, "cancel_schedule_action", scheduled)
    assert "1 post taken back to draft." in response.content.decode()
    response = run_action(as_editor, "unpublish_action", draft)
    assert "1 post unpublished." in response.content.decode()
    draft.refresh_from_db()
    scheduled.refresh_from_db()
    assert (draft.status, scheduled.status) == (S.UNPUBLISHED, S.DRAFT)
    assert kinds(draft) == [K.PUBLISHED, K.UNPUBLISHED]
    assert kinds(scheduled) == [K.CANCELLED]


def test_an_action_that_does_not_apply_says_why(as_editor):
    post = make_post()
    response = run_action(as_editor, "unpublish_action", post)
    assert "not live" in response.content.decode()
    post.refresh_from_db()
    assert post.status == S.DRAFT


# --- validation -------------------------------------------------------------------------


def test_scheduling_needs_a_publish_time(as_editor):
    post = make_post()
    html = page_errors(submit(as_editor, change_url(post), target_status=S.SCHEDULED))
    assert "Choose a publish time to schedule this post." in html
    post.refresh_from_db()
    assert post.status == S.DRAFT


@override_settings(TIME_ZONE="Europe/Berlin")
def test_scheduling_in_the_past_is_refused_with_a_clear_message(as_editor):
    post = make_post()
    html = page_errors(
        submit(
            as_editor,
            change_url(post),
            target_status=S.SCHEDULED,
            publish_at_0="2001-01-01",
            publish_at_1="10:00:00",
        )
    )
    assert "The publish time must be in the future" in html
    assert "2001-01-01 10:00:00 Europe/Berlin has passed" in html
    post.refresh_from_db()
    assert (post.status, post.publish_at) == (S.DRAFT, None)


def test_unpublish_must_come_after_publish(as_editor):
    post = make_post()
    html = page_errors(
        submit(
            as_editor,
            change_url(post),
            target_status=S.SCHEDULED,
            publish_at_0="2099-01-02",
            publish_at_1="10:00:00",
            unpublish_at_0="2099-01-01",
            unpublish_at_1="10:00:00",
        )
    )
    assert "The unpublish time must be after the publish time." in html
    post.refresh_from_db()
    assert post.status == S.DRAFT


def test_a_body_that_cannot_be_rendered_is_refused(as_editor):
    post = make_post()
    with mock.patch(
        "publishing.forms.render_markdown", side_effect=RenderError("nesting too deep")
    ):
        html = page_errors(submit(as_editor, change_url(post), body="> > > deep"))
    assert "This body cannot be published: nesting too deep." in html


def test_an_overdue_failed_post_can_be_fixed_without_a_new_time(as_editor):
    post = due_post(seconds_ago=600, slug="fine-slug", title="")
    batches.publish_due()
    post.refresh_from_db()
    assert post.is_failed
    response = submit(as_editor, change_url(post), title="Now it has a title")
    assert response.status_code == 302
    post.refresh_from_db()
    assert (post.status, post.last_error) == (S.SCHEDULED, "")
    assert batches.publish_due().done == [post.pk]


# --- read-only system fields, history, failures -----------------------------------------


def test_system_fields_are_read_only_and_history_is_shown(as_editor, editor):
    post = posts.schedule_post(
        post=make_post(), publish_at=database_now() + timedelta(hours=1), user=editor
    )
    page = as_editor.get(change_url(post))
    data = form_data(page)
    for system_field in ("status", "published_at", "last_error", "author", "created_at"):
        assert system_field not in data
    html = page.content.decode()
    assert "Publish history" in html
    assert "Scheduled" in html and ">editor<" in html


def test_a_failed_publish_is_visible_in_the_admin(as_editor):
    post = due_post(title="")
    batches.publish_due(node="node-z")
    listing = as_editor.get(LIST_URL).content.decode()
    assert "publish failed" in listing
    assert "1 scheduled post failed to publish." in listing
    failed_list = as_editor.get(LIST_URL + "?failed=yes").content.decode()
    assert f'href="{change_url(post)}?' in failed_list
    change_page = as_editor.get(change_url(post)).content.decode()
    assert "the title is empty" in change_page
    assert "node-z" in change_page


def test_the_list_shows_when_a_post_went_live_and_how_late(as_editor):
    post = due_post(seconds_ago=2.5)
    batches.publish_due()
    lateness = post.events.get().lateness
    assert lateness >= 2.5
    listing = as_editor.get(LIST_URL).content.decode()
    assert f"{lateness:.1f} s late" in listing


# --- the permission ---------------------------------------------------------------------


def test_drafters_cannot_schedule_through_the_form(as_drafter, drafter):
    page = as_drafter.get(ADD_URL)
    data = form_data(page)
    assert "target_status" not in data
    assert "publish_at_0" not in data
    data.update(
        title="Sneaky",
        slug="sneaky",
        body="text",
        target_status=S.SCHEDULED,
        publish_at_0="2099-01-01",
        publish_at_1="10:00:00",
    )
    assert as_drafter.post(ADD_URL, data).status_code == 302
    post = Post.objects.get(slug="sneaky")
    assert (post.status, post.publish_at, post.author) == (S.DRAFT, None, drafter)
    assert kinds(post) == []


def test_drafters_get_no_publishing_actions(as_drafter):
    post = make_post()
    listing = as_drafter.get(LIST_URL).content.decode()
    assert 'value="delete_selected"' in listing, "the action menu is there"
    for action in ("publish_now_action", "cancel_schedule_action", "unpublish_action"):
        assert f'value="{action}"' not in listing
    run_action(as_drafter, "publish_now_action", post)
    post.refresh_from_db()
    assert post.status == S.DRAFT


def test_editors_get_the_publishing_actions(as_editor):
    make_post()
    listing = as_editor.get(LIST_URL).content.decode()
    for action in ("publish_now_action", "cancel_schedule_action", "unpublish_action"):
        assert f'value="{action}"' in listing


def test_drafters_see_scheduled_posts_read_only(as_drafter):
    post = future_post(title="Locked")
    page = as_drafter.get(change_url(post))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    response = as_drafter.post(change_url(post), {"title": "Changed", "slug": post.slug})
    assert response.status_code == 403
    post.refresh_from_db()
    assert post.title == "Locked"


# --- the scheduler banner and the lineup ------------------------------------------------


EDITOR_PAGES = {
    "index": lambda post: INDEX_URL,
    "list": lambda post: LIST_URL,
    "calendar": lambda post: reverse("admin:publishing_post_calendar"),
    "add": lambda post: ADD_URL,
    "change": change_url,
    "revisions": lambda post: reverse("admin:publishing_post_revisions", args=[post.pk]),
}


@pytest.mark.parametrize("page", EDITOR_PAGES)
def test_banner_shows_on_every_editor_page_while_no_scheduler_is_alive(as_editor, page):
    url = EDITOR_PAGES[page](make_post(status=S.PUBLISHED))
    html = as_editor.get(url).content.decode()
    assert html.count(BANNER) == 1
    assert OPERATOR_HINT not in html, "an editor is told whom to tell, not the command"
    live_node()
    assert BANNER not in as_editor.get(url).content.decode()


def test_a_superuser_is_also_told_the_operators_command(admin_client):
    html = admin_client.get(LIST_URL).content.decode()
    assert BANNER in html
    assert f"<code>{OPERATOR_HINT}</code>" in html


@pytest.mark.parametrize(
    "node_values",
    [
        {"last_heartbeat_ago": timedelta(minutes=5)},
        {"last_heartbeat_ago": timedelta(0), "stopped": True},
    ],
)
def test_banner_shows_for_stale_or_stopped_nodes(as_editor, node_values):
    now = database_now()
    Node.objects.create(
        name="old",
        instance="1" * 32,
        host="h",
        pid=2,
        started_at=now - timedelta(hours=1),
        last_heartbeat=now - node_values["last_heartbeat_ago"],
        stopped_at=now if node_values.get("stopped") else None,
    )
    assert BANNER in as_editor.get(INDEX_URL).content.decode()


def test_banner_is_not_shown_to_staff_without_post_permissions(client, db):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_user("ops", is_staff=True))
    assert BANNER not in client.get(INDEX_URL).content.decode()


@override_settings(TIME_ZONE="Europe/Berlin")
@pytest.mark.parametrize("url", [INDEX_URL, LIST_URL])
def test_lineup_lists_the_next_scheduled_posts(as_editor, editor, url):
    later = posts.schedule_post(
        post=make_post(title="Later"),
        publish_at=datetime(2099, 12, 24, 17, 0, tzinfo=UTC),
        user=editor,
    )
    sooner = posts.schedule_post(
        post=make_post(title="Sooner"),
        publish_at=datetime(2099, 6, 1, 6, 30, tzinfo=UTC),
        user=editor,
    )
    make_post(title="Just a draft")
    html = as_editor.get(url).content.decode()
    lineup = html[html.index('id="publishing-lineup"') :]
    lineup = lineup[: lineup.index("</table>")]
    assert "Next scheduled posts (times in Europe/Berlin)" in lineup
    assert lineup.index("Sooner") < lineup.index("Later")
    assert "2099-06-01 08:30:00 CEST" in lineup
    assert "2099-12-24 18:00:00 CET" in lineup
    assert "Just a draft" not in lineup
    assert change_url(sooner) in lineup and change_url(later) in lineup


def test_drafters_cannot_delete_scheduled_or_live_posts(as_drafter):
    for post in (future_post(), make_post(status=S.PUBLISHED)):
        url = reverse("admin:publishing_post_delete", args=[post.pk])
        assert as_drafter.post(url, {"post": "yes"}).status_code == 403
        assert Post.objects.filter(pk=post.pk).exists()
    draft = make_post()
    url = reverse("admin:publishing_post_delete", args=[draft.pk])
    assert as_drafter.post(url, {"post": "yes"}).status_code == 302
    assert not Post.objects.filter(pk=draft.pk).exists()
