"""Reading the site at a moment: the changes scheduled by then, and the pages they touch.

A few indexed queries whatever the site's size: the scheduled publishes, takedowns and
revisions due by the moment (the due indexes the publish job reads), other apps' changes
(:func:`publishing.site_at.other_changes`), then the posts those changes touch. The index at
the moment is the live posts now, less those the changes touch, merged with the touched ones
that are live then: a page of it reads a page of live posts, not the site.

What will not happen is read now, with the publish job's own rules: a post whose publish
failed waits for an editor, content the go-live checks hold (reviews) stays out, a post that
cannot go live as it is (:func:`publishing.validation.publish_problems`) would fail.
"""

from datetime import datetime

from django.db.models import Q
from django.db.models.functions import Length, Trim

from publishing import go_live, selectors
from publishing.conf import settings
from publishing.models import Post, PostRevision
from publishing.site_at import NEW_TEXT, ORDER, PUBLISH, UNPUBLISH, Change, Page, other_changes
from publishing.validation import publish_problems

S = Post.Status


def changes_by(moment: datetime) -> list[Change]:
    """Return every change scheduled to happen by ``moment``, each with why not if it won't."""
    changes = _publishes(moment) + _takedowns(moment) + _revisions(moment)
    return changes + other_changes(moment)


def _publishes(moment: datetime) -> list[Change]:
    rows = list(
        Post.objects.filter(status=S.SCHEDULED, publish_at__lte=moment)
        .order_by()
        .annotate(body_length=Length(Trim("body")))
        .values_list("pk", "publish_at", "last_error", "title", "slug", "body_length")
    )
    held = go_live.why_not(go_live.POST, [pk for pk, *_ in rows])
    max_chars = int(settings.POST_BODY_MAX_CHARS)
    changes = []
    for pk, at, error, title, slug, length in rows:
        problems = publish_problems(title=title, slug=slug, body_length=length, max_chars=max_chars)
        why = error or held.get(pk) or " ".join(problems)
        changes.append(
            Change(at, ORDER["publish"], pk, PUBLISH, "its scheduled publish", why_not=why)
        )
    return changes


def _takedowns(moment: datetime) -> list[Change]:
    rows = (
        Post.objects.filter(status__in=(S.SCHEDULED, S.PUBLISHED), unpublish_at__lte=moment)
        .order_by()
        .values_list("pk", "unpublish_at")
    )
    return [Change(at, ORDER["unpublish"], pk, UNPUBLISH, "its unpublish time") for pk, at in rows]


def _revisions(moment: datetime) -> list[Change]:
    rows = list(
        PostRevision.objects.filter(status=PostRevision.Status.SCHEDULED, publish_at__lte=moment)
        .order_by()
        .values_list("pk", "post_id", "number", "publish_at", "title", "excerpt")
    )
    held = go_live.why_not(go_live.REVISION, [pk for pk, *_ in rows])
    return [
        Change(
            at,
            ORDER["revision"],
            post_id,
            NEW_TEXT,
            f"revision {number}",
            title=title,
            excerpt=excerpt,
            revision=pk,
            why_not=held.get(pk, ""),
        )
        for pk, post_id, number, at, title, excerpt in rows
    ]


def pages_of(post_ids) -> dict[int, Page]:
    """Return the posts ``post_ids`` as they are now, without their bodies (:func:`body_of`)."""
    rows = (
        Post.objects.filter(pk__in=list(post_ids))
        .order_by()
        .values_list("pk", "title", "slug", "status", "published_at", "excerpt")
    )
    return {
        pk: Page(pk, title, slug, status == S.PUBLISHED, published_at, excerpt=excerpt)
        for pk, title, slug, status, published_at, excerpt in rows
    }


def body_of(page: Page) -> str:
    """Return the HTML body ``page`` shows: its revision's, or the post's own."""
    if page.text_revision is not None:
        source = PostRevision.objects.filter(pk=page.text_revision)
    else:
        source = Post.objects.filter(pk=page.post_id)
    return source.values_list("body_html", flat=True).first() or ""


def live_now(*, excluding: set[int], limit: int, offset: int = 0) -> list[Page]:
    """Return the live posts now, newest first, less ``excluding``: ``limit`` from ``offset``."""
    rows = (
        selectors.live_posts()
        .exclude(pk__in=excluding)
        .values_list("pk", "title", "slug", "published_at", "excerpt")[offset : offset + limit]
    )
    return [
        Page(pk, title, slug, True, published_at, excerpt=excerpt)
        for pk, title, slug, published_at, excerpt in rows
    ]


def post_by_slug(slug: str) -> int | None:
    """Return the id of the post whose address is ``slug`` now (None: none)."""
    return Post.objects.filter(Q(slug=slug)).values_list("pk", flat=True).first()


def bodies_of(pages: list[Page]) -> dict[int, str]:
    """Return the HTML body each of ``pages`` shows, by post id, in two queries at most."""
    from_revisions = {page.text_revision: page.post_id for page in pages if page.text_revision}
    own = [page.post_id for page in pages if not page.text_revision]
    bodies = dict(Post.objects.filter(pk__in=own).order_by().values_list("pk", "body_html"))
    for pk, body in PostRevision.objects.filter(pk__in=list(from_revisions)).values_list(
        "pk", "body_html"
    ):
        bodies[from_revisions[pk]] = body
    return bodies
