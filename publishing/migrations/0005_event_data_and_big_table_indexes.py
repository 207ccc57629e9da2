"""Publish events get typed ``data``; the post list and the history get indexes that match
their orders.

Existing events' ``detail`` sentences ("publish at 2026-12-01T00:08:23.586000+00:00") are read
into ``data`` where they have one of the forms the services wrote; a sentence that does not
(edited by hand, say) stays in ``detail`` and is shown as it is. The patterns are frozen here:
they describe what older code wrote, not what the services write now.
"""

import re
from datetime import UTC, datetime

from django.conf import settings
from django.db import migrations, models

TIME = r"(\S+)"
PATTERNS = {
    "scheduled": [re.compile(rf"publish at {TIME}(?:, unpublish at {TIME})?")],
    "rescheduled": [
        re.compile(rf"publish at {TIME} -> {TIME}(?:; unpublish at {TIME} -> {TIME})?"),
        re.compile(rf"unpublish at {TIME} -> {TIME}"),
    ],
    "cancelled": [re.compile(rf"was due at {TIME}")],
    "deleted": [re.compile(r"slug (\S+), was (draft|scheduled|published|unpublished)")],
    "revision_scheduled": [re.compile(rf"revision (\d+) at {TIME}")],
    "revision_cancelled": [re.compile(rf"revision (\d+) \((\w+)(?:, was due at {TIME})?\)")],
    "revision_superseded": [
        re.compile(r"revision (\d+) \((\w+)\) superseded: (.*)", re.S),
        re.compile(r"revision (\d+)(?:: (.*))?", re.S),
    ],
    "revision_published": [re.compile(r"revision (\d+)")],
}


class Unreadable(ValueError):
    """A detail sentence none of the old forms matches."""


def _time(text):
    """Return an old detail's time as stored data now (ISO 8601 in UTC); "none" is None."""
    if text is None or text == "none":
        return None
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise Unreadable(text)
    return value.astimezone(UTC).isoformat()


def read_detail(kind, detail):
    """Return the ``data`` of an old event with ``kind`` and ``detail``; raise Unreadable."""
    if kind in ("published", "unpublished") and detail in ("published now", "unpublished now"):
        return {"by_hand": True}
    if kind == "failed":
        return {"error": detail}
    if kind == "previews_revoked" and detail == "every earlier preview link":
        return {}
    for number, pattern in enumerate(PATTERNS.get(kind, [])):
        match = pattern.fullmatch(detail)
        if match is not None:
            return _data(kind, number, match.groups())
    raise Unreadable(detail)


def _data(kind, number, groups):
    if kind == "scheduled":
        return {"publish_at": _time(groups[0]), "unpublish_at": _time(groups[1])}
    if kind == "rescheduled" and number == 0:
        data = {"previous_publish_at": _time(groups[0]), "publish_at": _time(groups[1])}
        if groups[2] is not None:
            data["previous_unpublish_at"] = _time(groups[2])
            data["unpublish_at"] = _time(groups[3])
        return data
    if kind == "rescheduled":
        return {"previous_unpublish_at": _time(groups[0]), "unpublish_at": _time(groups[1])}
    if kind == "cancelled":
        return {"was_due_at": _time(groups[0])}
    if kind == "deleted":
        return {"slug": groups[0], "was": groups[1]}
    if kind == "revision_scheduled":
        return {"revision": int(groups[0]), "publish_at": _time(groups[1])}
    if kind == "revision_cancelled":
        data = {"revision": int(groups[0]), "revision_status": groups[1]}
        if groups[2] is not None:
            data["was_due_at"] = _time(groups[2])
        return data
    if kind == "revision_superseded" and number == 0:
        return {"revision": int(groups[0]), "revision_status": groups[1], "note": groups[2]}
    data = {"revision": int(groups[0])}
    if len(groups) > 1 and groups[1]:
        data["note"] = groups[1]
    return data


def details_to_data(apps, schema_editor):
    """Move every readable ``detail`` into ``data``, a thousand events at a time."""
    PublishEvent = apps.get_model("publishing", "PublishEvent")
    rows = PublishEvent.objects.exclude(detail="").only("pk", "kind", "detail", "data")
    changed = []
    for event in rows.iterator(chunk_size=1000):
        try:
            event.data = read_detail(event.kind, event.detail)
        except (Unreadable, ValueError):
            continue
        event.detail = ""
        changed.append(event)
        if len(changed) == 1000:
            PublishEvent.objects.bulk_update(changed, ["data", "detail"])
            changed = []
    PublishEvent.objects.bulk_update(changed, ["data", "detail"])


class Migration(migrations.Migration):
    dependencies = [
        ("publishing", "0004_post_revisions"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="publishevent",
            name="data",
            field=models.JSONField(blank=True, default=dict, verbose_name="data"),
        ),
        migrations.AlterField(
            model_name="publishevent",
            name="detail",
            field=models.TextField(blank=True, verbose_name="detail (older events)"),
        ),
        # Going back leaves the data where it is (the column goes with it); details stay empty.
        migrations.RunPython(details_to_data, migrations.RunPython.noop, elidable=True),
        # The job's due scans carry the id, so their order is the index's own.
        migrations.RemoveIndex(model_name="post", name="publishing_post_live"),
        migrations.AddIndex(
            model_name="post",
            index=models.Index(
                fields=["status", "-published_at", "-id"], name="publishing_post_live"
            ),
        ),
        migrations.RemoveIndex(model_name="post", name="publishing_post_due"),
        migrations.RemoveIndex(model_name="post", name="publishing_post_expiry"),
        migrations.AddIndex(
            model_name="post",
            index=models.Index(fields=["status", "publish_at", "id"], name="publishing_post_due"),
        ),
        migrations.AddIndex(
            model_name="post",
            index=models.Index(
                fields=["status", "unpublish_at", "id"], name="publishing_post_expiry"
            ),
        ),
        migrations.AddIndex(
            model_name="post",
            index=models.Index(fields=["-created_at", "-id"], name="publishing_post_recent"),
        ),
        migrations.AddIndex(
            model_name="post",
            index=models.Index(fields=["status", "-updated_at"], name="publishing_post_changed"),
        ),
        migrations.AddIndex(
            model_name="publishevent",
            index=models.Index(fields=["-at", "-id"], name="publishing_event_recent"),
        ),
        migrations.AddIndex(
            model_name="publishevent",
            index=models.Index(fields=["kind", "-at", "-id"], name="publishing_event_kind"),
        ),
    ]
