"""Reads of posts, for the public site, the admin and the publish job."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Now

from publishing.conf import settings
from publishing.models import Post, PostRevision, PublishEvent
from publishing.slugs import IsURLSlug


def live_posts() -> QuerySet[Post]:
    """Return the posts the public sees, newest first.

    Only published posts, and none past their unpublish time even if the publish job has not
    taken them down yet (the database clock decides). A post needs an address too: one whose
    slug the public URL rejects (only possible where the slug constraint is missing) is in
    no list, the feed or the sitemap (:func:`unreachable_live_posts` names them).
    """
    return (
        Post.objects.filter(status=Post.Status.PUBLISHED)
        .filter(Q(unpublish_at__isnull=True) | Q(unpublish_at__gt=Now()))
        .filter(IsURLSlug("slug"))
        .order_by("-published_at", "-id")
    )


def unreachable_live_posts(limit: int = 10) -> list[tuple[int, str]]:
    """Return (id, slug) of up to ``limit`` published posts whose slug has no public address.

    The database's slug constraint keeps them out; a database without it (a migration not
    run yet) may hold some, which the public site and the static export leave out.
    """
    published = Post.objects.filter(status=Post.Status.PUBLISHED).filter(~Q(IsURLSlug("slug")))
    return list(published.order_by("id").values_list("id", "slug")[:limit])


@dataclass(frozen=True)
class LiveVersion:
    """What the public lists depend on: the latest change of what the public sees."""

    last_change: datetime | None

    def etag(self, *parts: object) -> str:
        stamp = self.last_change.timestamp() if self.last_change else 0
        return "-".join(str(p) for p in (f"{stamp:.6f}", *parts))


def _latest(queryset: QuerySet, field: str) -> datetime | None:
    return queryset.order_by(f"-{field}").values_list(field, flat=True).first()


def live_version() -> LiveVersion:
    """Return the version of the public lists (for ``ETag`` and ``Last-Modified``).

    Only what the public sees moves it: a post going live or a live post changing (its
    ``updated_at``), and a post leaving the public lists (an unpublish event, an unpublish
    time that passed before the job took the post down, a live post deleted), so
    ``Last-Modified`` never goes back when a post goes. Edits of drafts, scheduled or
    unpublished posts leave it alone: they would tell anyone watching the headers that
    something unpublished is being worked on. Four probes of indexes, each reading one row,
    whatever the number of posts (nothing counts the live posts).
    """
    live = Q(unpublish_at__isnull=True) | Q(unpublish_at__gt=Now())
    published = Post.objects.filter(status=Post.Status.PUBLISHED)
    events = PublishEvent.objects
    stamps = [
        _latest(published.filter(live), "updated_at"),
        _latest(published.filter(unpublish_at__lte=Now()), "unpublish_at"),
        _latest(events.filter(kind=PublishEvent.Kind.UNPUBLISHED), "at"),
        _latest(
            events.filter(kind=PublishEvent.Kind.DELETED, data__was=Post.Status.PUBLISHED), "at"
        ),
    ]
    return LiveVersion(last_change=max((s for s in stamps if s is not None), default=None))


@dataclass(frozen=True)
class IndexPage:
    """One page of the public index, found without counting the live posts.

    Offers what the index template uses of Django's ``Page`` (the static export renders the
    same template with one).
    """

    number: int
    object_list: list
    more: bool

    def has_next(self) -> bool:
        return self.more

    def has_previous(self) -> bool:
        return self.number > 1

    def has_other_pages(self) -> bool:
        return self.more or self.number > 1

    def next_page_number(self) -> int:
        return self.number + 1

    def previous_page_number(self) -> int:
        return self.number - 1


def live_page(*, number: int, per_page: int) -> IndexPage | None:
    """Return page ``number`` of the live posts (no bodies), or None past the last page.

    Reads one row more than a page to know whether there is a next one: an index range scan
    of ``(status, -published_at)``, never a count of every live post.
    """
    start = (number - 1) * per_page
    rows = list(live_posts().defer("body", "body_html")[start : start + per_page + 1])
    if not rows and number > 1:
        return None
    return IndexPage(number=number, object_list=rows[:per_page], more=len(rows) > per_page)


def live_post_version(slug: str) -> datetime | None:
    """Return when the live post ``slug`` last changed, or None if there is no such post."""
    return live_posts().filter(slug=slug).values_list("updated_at", flat=True).first()


def next_due_at(*, publishes_after: datetime | None = None) -> datetime | None:
    """Return the next instant the publish job has work: a publish, unpublish or revision time.

    Posts whose publish failed are skipped until an editor changes them, and so are posts due
    at or before ``publishes_after`` (the backlog job's share) when it is given.
    """
    scheduled = Post.objects.filter(status=Post.Status.SCHEDULED, last_error="")
    if publishes_after is not None:
        scheduled = scheduled.filter(publish_at__gt=publishes_after)
    next_publish = scheduled.order_by("publish_at").values_list("publish_at", flat=True).first()
    next_unpublish = (
        Post.objects.filter(status=Post.Status.PUBLISHED, unpublish_at__isnull=False)
        .order_by("unpublish_at")
        .values_list("unpublish_at", flat=True)
        .first()
    )
    next_revision = (
        PostRevision.objects.filter(status=PostRevision.Status.SCHEDULED)
        .order_by("publish_at")
        .values_list("publish_at", flat=True)
        .first()
    )
    candidates = [t for t in (next_publish, next_unpublish, next_revision) if t is not None]
    return min(candidates) if candidates else None


def last_publish_lateness(post_ids: list[int]) -> dict[int, float | None]:
    """Return the lateness of each post's latest "published" event (the admin list's page).

    One probe of the ``(post, -at)`` index per post of the page (a subquery per post; a
    filter on the kind over all the posts' events could be planned as a scan of every
    "published" event). A post published by hand has no lateness.
    """
    latest = PublishEvent.objects.filter(
        post=OuterRef("pk"), kind=PublishEvent.Kind.PUBLISHED
    ).order_by("-at", "-id")
    rows = Post.objects.filter(pk__in=post_ids).annotate(
        lateness=Subquery(latest.values("lateness")[:1])
    )
    return dict(rows.values_list("pk", "lateness"))


def has_backlog(*, due_by: datetime) -> bool:
    """Return True if a scheduled post (not failed) was due at or before ``due_by``.

    One probe of the ``(status, publish_at, id)`` index.
    """
    return Post.objects.filter(
        status=Post.Status.SCHEDULED, last_error="", publish_at__lte=due_by
    ).exists()


def lineup(limit: int | None = None) -> list[Post]:
    """Return the next scheduled posts, soonest first (failed ones are listed separately)."""
    limit = int(settings.PUBLISH_LINEUP_SIZE) if limit is None else limit
    return list(
        Post.objects.filter(status=Post.Status.SCHEDULED, last_error="")
        .order_by("publish_at", "id")
        .only("id", "title", "slug", "status", "publish_at", "unpublish_at", "last_error")[:limit]
    )


def failed_posts() -> QuerySet[Post]:
    """Return scheduled posts whose publish failed, oldest planned time first."""
    return Post.objects.filter(status=Post.Status.SCHEDULED).exclude(last_error="")


def calendar_publishes(start: datetime, end: datetime) -> list[tuple]:
    """Return (id, title, publish_at, last_error) of scheduled publishes before ``end``.

    No lower bound: scheduled posts due before ``start`` are late, and the calendar lists them.
    One range scan of the ``(status, publish_at)`` index.
    """
    return list(
        Post.objects.filter(status=Post.Status.SCHEDULED, publish_at__lt=end)
        .order_by("publish_at", "id")
        .values_list("id", "title", "publish_at", "last_error")
    )


def calendar_unpublishes(start: datetime, end: datetime) -> list[tuple]:
    """Return (id, title, unpublish_at, is live) of unpublishes in the calendar's window.

    Scheduled posts' unpublishes in ``[start, end)``, and live posts' before ``end`` (one past
    its time is late). Range scans of the ``(status, unpublish_at)`` index.
    """
    scheduled = Q(status=Post.Status.SCHEDULED, unpublish_at__gte=start, unpublish_at__lt=end)
    live = Q(status=Post.Status.PUBLISHED, unpublish_at__lt=end)
    return [
        (pk, title, at, status == Post.Status.PUBLISHED)
        for pk, title, at, status in Post.objects.filter(scheduled | live)
        .order_by("unpublish_at", "id")
        .values_list("id", "title", "unpublish_at", "status")
    ]


def calendar_revisions(start: datetime, end: datetime) -> list[tuple]:
    """Return (post id, revision title, publish_at) of scheduled revisions before ``end``.

    No lower bound, like the publishes: one due before ``start`` is late. One range scan of
    the revisions' ``(status, publish_at)`` index.
    """
    return list(
        PostRevision.objects.filter(status=PostRevision.Status.SCHEDULED, publish_at__lt=end)
        .order_by("publish_at", "id")
        .values_list("post_id", "title", "publish_at")
    )


def revisions_of(post: Post) -> QuerySet[PostRevision]:
    """Return ``post``'s revisions, newest first, with who created them."""
    return PostRevision.objects.filter(post=post).select_related("created_by").order_by("-number")


def pending_revision(post: Post, status: str | None = None) -> PostRevision | None:
    """Return ``post``'s newest pending revision (draft or scheduled, or only ``status``)."""
    statuses = [status] if status else [PostRevision.Status.DRAFT, PostRevision.Status.SCHEDULED]
    return revisions_of(post).filter(status__in=statuses).first()


@dataclass(frozen=True)
class PreviewPage:
    """What a preview link shows: a post's next version, and which one it is."""

    title: str
    body_html: str
    published_at: datetime | None  # when it goes (or went) live, for the page's date line
    label: str


def preview_page(*, post_id: int, generation: int) -> PreviewPage | None:
    """Return what a preview of ``post_id`` shows, or None if there is nothing to show.

    None when the post is gone or its links were revoked (``generation`` is older). The
    newest pending revision wins; without one, the post as it is (a draft, a scheduled post,
    the live version).
    """
    post = (
        Post.objects.filter(pk=post_id, preview_generation=generation)
        .only("pk", "title", "body_html", "status", "publish_at", "published_at")
        .first()
    )
    if post is None:
        return None
    revision = pending_revision(post)
    if revision is not None:
        if revision.status == PostRevision.Status.SCHEDULED:
            label = f"revision {revision.number}, scheduled"
        else:
            label = f"revision {revision.number}, a draft"
        return PreviewPage(revision.title, revision.body_html, revision.publish_at, label)
    when = post.published_at if post.status == Post.Status.PUBLISHED else post.publish_at
    label = post.get_status_display().lower()
    return PreviewPage(post.title, post.body_html, when, label)
