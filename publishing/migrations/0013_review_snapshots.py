"""Reviews keep the content submitted (``snapshot``) and a system reason apart from a note.

Existing reviews get what can still be known exactly: a revision's snapshot (revisions never
change), and a post's where the post still has the content its fingerprint names. A release's
earlier reviews named its items by id and version, not by text: they keep no snapshot, and
their fingerprints no longer match any release, so a release approved before this needs a
review of its texts again. A note that was a system sentence becomes the reason.
"""

import hashlib
import json

from django.db import migrations, models

SYSTEM_NOTES = (
    "changed after it was approved; back to draft until it is approved again",
    "its posts changed after it was approved; back to draft until approved",
)


def _post_fingerprint(title, slug, body):
    text = json.dumps(
        ["post", title, slug, body], ensure_ascii=False, separators=(",", ":"), sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()


def keep_what_is_known(apps, schema_editor):
    Review = apps.get_model("publishing", "Review")
    for review in Review.objects.filter(target="revision").select_related("revision"):
        if review.revision is not None:
            review.snapshot = {"title": review.revision.title, "body": review.revision.body}
            review.save(update_fields=["snapshot"])
    for review in Review.objects.filter(target="post").select_related("post"):
        post = review.post
        if post is not None and _post_fingerprint(post.title, post.slug, post.body) == (
            review.fingerprint
        ):
            review.snapshot = {"title": post.title, "slug": post.slug, "body": post.body}
            review.save(update_fields=["snapshot"])
    for note in SYSTEM_NOTES:
        Review.objects.filter(note=note).update(note="", reason=note)


class Migration(migrations.Migration):
    dependencies = [
        ("publishing", "0012_reviews"),
    ]

    operations = [
        migrations.AddField(
            model_name="review",
            name="reason",
            field=models.CharField(
                blank=True, max_length=300, verbose_name="submitted again because"
            ),
        ),
        migrations.AddField(
            model_name="review",
            name="snapshot",
            field=models.JSONField(
                default=dict, editable=False, verbose_name="content submitted"
            ),
        ),
        migrations.RunPython(keep_what_is_known, migrations.RunPython.noop),
    ]
