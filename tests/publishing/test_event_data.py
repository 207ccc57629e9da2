"""Publish events store typed data and are shown in the viewer's time zone, to the second.

Events store times as ISO UTC in ``PublishEvent.data`` and every place that shows events
words them in the zone the editors app activated, never as a raw instant with microseconds
("2026-12-01T00:08:23.586000+00:00"). Older events' details are read into data by migration 0005.
"""

import importlib
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from django.utils import timezone

from coordination.clock import database_now
from editors.models import EditorProfile
from publishing import posts, revisions
from publishing.history import describe
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import make_post

pytestmark = pytest.mark.django_db

S = Post.Status
K = PublishEvent.Kind
migration = importlib.import_module("publishing.migrations.0005_event_data_and_big_table_indexes")

#: Far enough ahead to schedule, with a fraction of a second the history must not show.
PUBLISH_AT = datetime(2031, 6, 1, 12, 0, 5, 586000, tzinfo=UTC)
UNPUBLISH_AT = datetime(2031, 12, 1, 12, 0, 7, tzinfo=UTC)


def scheduled_post(editor) -> Post:
    post = make_post(title="Summer opening")
    return posts.schedule_post(
        post=post, publish_at=PUBLISH_AT, unpublish_at=UNPUBLISH_AT, user=editor
    )


def test_scheduling_stores_times_as_iso_utc_data(editor):
    post = scheduled_post(editor)
    event = post.events.get()
    assert event.data == {
        "publish_at": "2031-06-01T12:00:05.586000+00:00",
        "unpublish_at": "2031-12-01T12:00:07+00:00",
    }
    assert event.detail == ""


@pytest.mark.parametrize(
    ("zone", "words"),
    [
        (
            "Europe/Berlin",
            "publish at 2031-06-01 14:00:05 CEST, unpublish at 2031-12-01 13:00:07 CET",
        ),
        (
            "America/New_York",
            "publish at 2031-06-01 08:00:05 EDT, unpublish at 2031-12-01 07:00:07 EST",
        ),
        ("UTC", "publish at 2031-06-01 12:00:05 UTC, unpublish at 2031-12-01 12:00:07 UTC"),
    ],
)
def test_details_are_worded_in_the_viewers_zone_to_the_second(editor, zone, words):
    event = scheduled_post(editor).events.get()
    with timezone.override(zone):
        assert describe(event) == words


def test_every_kind_of_editor_event_is_worded_in_the_viewers_zone(editor):
    post = scheduled_post(editor)
    later = PUBLISH_AT + timedelta(days=1)
    posts.reschedule_post(post=post, publish_at=later, unpublish_at=UNPUBLISH_AT, user=editor)
    posts.cancel_schedule(post=post, user=editor)
    posts.publish_now(post=post, user=editor)
    posts.set_unpublish_at(post=post, unpublish_at=None, user=editor)
    posts.unpublish_now(post=post, user=editor)
    with timezone.override("Asia/Tokyo"):
        worded = [(e.kind, describe(e)) for e in post.events.order_by("id")]
    assert worded == [
        (K.SCHEDULED, "publish at 2031-06-01 21:00:05 JST, unpublish at 2031-12-01 21:00:07 JST"),
        (K.RESCHEDULED, "publish at 2031-06-01 21:00:05 JST → 2031-06-02 21:00:05 JST"),
        (K.CANCELLED, "was due at 2031-06-02 21:00:05 JST"),
        (K.PUBLISHED, "published now"),
        (K.RESCHEDULED, "unpublish at 2031-12-01 21:00:07 JST → none"),
        (K.UNPUBLISHED, "unpublished now"),
    ]


def test_revision_events_are_worded_in_the_viewers_zone(editor):
    post = make_post(status=S.PUBLISHED, title="Menu")
    at = database_now().replace(microsecond=250000) + timedelta(days=3)
    revision = revisions.schedule_revision(
        post=post, title="New menu", body="Soup.", publish_at=at, user=editor
    )
    revisions.cancel_revision(revision=revision, user=editor)
    local = timezone.localtime(at, timezone=timezone.get_fixed_timezone(330))
    with timezone.override(timezone.get_fixed_timezone(330)):
        worded = [describe(e) for e in post.events.order_by("id")]
    stamp = local.strftime("%Y-%m-%d %H:%M:%S")
    assert worded == [
        f"revision 2 at {stamp} +0530",
        f"revision 2 (scheduled, was due at {stamp} +0530)",
    ]


def test_the_post_page_history_and_the_publish_history_show_the_editors_zone(
    admin_client, admin_user
):
    EditorProfile.objects.create(user=admin_user, time_zone="Europe/Berlin")
    post = scheduled_post(admin_user)
    pages = [
        admin_client.get(reverse("admin:publishing_post_change", args=[post.pk])),
        admin_client.get(reverse("admin:publishing_publishevent_changelist")),
    ]
    for response in pages:
        text = response.content.decode()
        assert response.status_code == 200
        assert "publish at 2031-06-01 14:00:05 CEST" in text
        assert "Details (Europe/Berlin)" in text
        assert "2031-06-01T12:00:05" not in text and ".586" not in text


def test_an_event_with_unreadable_older_detail_shows_it_as_it_is(editor):
    post = make_post()
    event = PublishEvent.objects.create(post=post, kind=K.SCHEDULED, detail="typed by hand")
    assert describe(event) == "typed by hand"


# --- migration 0005: older details become data --------------------------------------------


@pytest.mark.parametrize(
    ("kind", "detail", "data"),
    [
        (
            "scheduled",
            "publish at 2026-12-01T00:08:23.586000+00:00",
            {"publish_at": "2026-12-01T00:08:23.586000+00:00", "unpublish_at": None},
        ),
        (
            "scheduled",
            "publish at 2026-12-01T01:08:23+01:00, unpublish at 2027-01-01T00:00:00+00:00",
            {
                "publish_at": "2026-12-01T00:08:23+00:00",
                "unpublish_at": "2027-01-01T00:00:00+00:00",
            },
        ),
        (
            "rescheduled",
            "publish at 2026-12-01T00:00:00+00:00 -> 2026-12-02T00:00:00+00:00; "
            "unpublish at none -> 2027-01-01T00:00:00+00:00",
            {
                "previous_publish_at": "2026-12-01T00:00:00+00:00",
                "publish_at": "2026-12-02T00:00:00+00:00",
                "previous_unpublish_at": None,
                "unpublish_at": "2027-01-01T00:00:00+00:00",
            },
        ),
        (
            "rescheduled",
            "unpublish at 2027-01-01T00:00:00+00:00 -> none",
            {"previous_unpublish_at": "2027-01-01T00:00:00+00:00", "unpublish_at": None},
        ),
        (
            "cancelled",
            "was due at 2026-12-01T00:00:00+00:00",
            {"was_due_at": "2026-12-01T00:00:00+00:00"},
        ),
        ("published", "published now", {"by_hand": True}),
        ("unpublished", "unpublished now", {"by_hand": True}),
        ("failed", "the title is empty", {"error": "the title is empty"}),
        (
            "deleted",
            "slug opening-hours, was published",
            {"slug": "opening-hours", "was": "published"},
        ),
        ("previews_revoked", "every earlier preview link", {}),
        (
            "revision_scheduled",
            "revision 2 at 2026-12-01T00:00:00+00:00",
            {"revision": 2, "publish_at": "2026-12-01T00:00:00+00:00"},
        ),
        (
            "revision_cancelled",
            "revision 2 (scheduled, was due at 2026-12-01T00:00:00+00:00)",
            {
                "revision": 2,
                "revision_status": "scheduled",
                "was_due_at": "2026-12-01T00:00:00+00:00",
            },
        ),
        ("revision_cancelled", "revision 3 (draft)", {"revision": 3, "revision_status": "draft"}),
        (
            "revision_superseded",
            "revision 2 (scheduled) superseded: revision 3 was scheduled",
            {"revision": 2, "revision_status": "scheduled", "note": "revision 3 was scheduled"},
        ),
        (
            "revision_superseded",
            "revision 4: the post was not live at the revision's time",
            {"revision": 4, "note": "the post was not live at the revision's time"},
        ),
        ("revision_published", "revision 5", {"revision": 5}),
    ],
)
def test_the_migration_reads_every_form_the_services_wrote(kind, detail, data):
    assert migration.read_detail(kind, detail) == data


@pytest.mark.parametrize(
    ("kind", "detail"),
    [
        ("scheduled", "publish at tomorrow"),
        ("scheduled", "publish at 2026-12-01T00:00:00"),  # naive: no zone to convert from
        ("cancelled", "an editor's note"),
        ("revision_published", "revision two"),
    ],
)
def test_the_migration_leaves_what_it_cannot_read(kind, detail):
    with pytest.raises(ValueError):
        migration.read_detail(kind, detail)


@pytest.mark.django_db(transaction=True)
def test_migrating_moves_older_details_into_data():
    """Migrate back to 0004, write events as the old code did, migrate forward again."""
    executor = MigrationExecutor(connection)
    before = [("publishing", "0004_post_revisions")]
    after = [("publishing", "0005_event_data_and_big_table_indexes")]
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    OldPost = old_apps.get_model("publishing", "Post")
    OldEvent = old_apps.get_model("publishing", "PublishEvent")
    post = OldPost.objects.create(title="Old", slug="old", body="Body.")
    readable = OldEvent.objects.create(
        post_id=post.pk, kind="scheduled", detail="publish at 2026-12-01T00:08:23.586000+00:00"
    )
    by_hand = OldEvent.objects.create(post_id=post.pk, kind="cancelled", detail="typed by hand")
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    new_apps = executor.loader.project_state(after).apps
    Event = new_apps.get_model("publishing", "PublishEvent")
    converted = Event.objects.get(pk=readable.pk)
    assert converted.data == {
        "publish_at": "2026-12-01T00:08:23.586000+00:00",
        "unpublish_at": None,
    }
    assert converted.detail == ""
    kept = Event.objects.get(pk=by_hand.pk)
    assert (kept.data, kept.detail) == ({}, "typed by hand")
    # Back to the latest schema: the current model (and every later test) needs it.
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    with timezone.override("Europe/Berlin"):
        assert describe(PublishEvent.objects.get(pk=readable.pk)) == (
            "publish at 2026-12-01 01:08:23 CET"
        )
