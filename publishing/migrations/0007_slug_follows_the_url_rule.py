"""Posts' slugs follow the public URL's rule, checked by the database.

A post whose slug the URL rejects (written by a script or the ORM, past the admin form) has
no address: no visitor could ever reach its page, and the static export, the feed and the
sitemap failed on it. Such a slug is rewritten before the constraint is added, so the
migration always completes: to its ASCII slug (``slugify``), or ``post-<id>`` when nothing
is left, with ``-<id>`` appended when another post has it already. Each rewrite is logged
(``publishing.migrations``, a warning naming the post, its old and its new slug) so an
operator can tell the editors. Nothing public changes: those pages never had an address.
"""

import logging

from django.db import migrations, models
from django.utils.text import slugify

import publishing.slugs

logger = logging.getLogger("publishing.migrations")
MAX_LENGTH = 200


def _free(Post, wanted: str, pk: int, taken: set[str]) -> str:
    slug = wanted[:MAX_LENGTH] or f"post-{pk}"
    if slug in taken or Post.objects.filter(slug=slug).exclude(pk=pk).exists():
        suffix = f"-{pk}"
        slug = f"{slug[: MAX_LENGTH - len(suffix)]}{suffix}"
    return slug


def rewrite_slugs_the_url_rejects(apps, schema_editor):
    Post = apps.get_model("publishing", "Post")
    bad = [
        (pk, slug)
        for pk, slug in Post.objects.order_by("pk").values_list("pk", "slug").iterator(chunk_size=2000)
        if not publishing.slugs.is_url_slug(slug)
    ]
    taken: set[str] = set()
    for pk, slug in bad:
        new = _free(Post, slugify(slug), pk, taken)
        taken.add(new)
        Post.objects.filter(pk=pk).update(slug=new)
        logger.warning(
            "post %s: slug %r is not a valid address (letters a-z and A-Z, digits, - and _); "
            "now %r",
            pk,
            slug,
            new,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("publishing", "0006_event_post_without_constraint"),
    ]

    operations = [
        migrations.RunPython(rewrite_slugs_the_url_rejects, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="post",
            constraint=models.CheckConstraint(
                condition=publishing.slugs.IsURLSlug("slug"),
                name="publishing_post_slug_is_url_slug",
                violation_error_message="The slug may only hold letters a-z and A-Z, digits, - and _.",
            ),
        ),
    ]
