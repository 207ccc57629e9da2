"""Reads of posts, for the public site, the admin and the publish job."""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Now

from publishing import paging
from publishing.conf import settings
from publishing.live_spans import live_spans
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


#: The key of the index's front page (``/``); any other page's key is its first post's slug.
FRONT = ""
#: Live posts read per query while cutting the index into pages (more are read if a page is
#: longer).
INDEX_WINDOW = 64


@dataclass(frozen=True)
class IndexPage:
    """One page of the public index (``publishing.paging`` decides which posts are on it).

    ``newer`` and ``older`` are the keys of the pages before and after it (None: there is
    none); ``link`` turns a key into an address (the view's ``?from=<slug>``, the static
    export's ``page/<slug>/``).
    """

    key: str
    object_list: list
    newer: str | None
    older: str | None
    link: Callable[[str], str]

    @property
    def newer_url(self) -> str | None:
        return None if self.newer is None else self.link(self.newer)

    @property
    def older_url(self) -> str | None:
        return None if self.older is None else self.link(self.older)


def _newer_than(published_at: datetime, pk: int) -> Q:
    """Live posts above (published_at, pk) in the index: a range of its index, then a filter."""
    return Q(published_at__gte=published_at) & (Q(published_at__gt=published_at) | Q(pk__gt=pk))


def _at_or_above(published_at: datetime, pk: int) -> Q:
    return Q(published_at__gte=published_at) & (Q(published_at__gt=published_at) | Q(pk__gte=pk))


def _at_or_below(published_at: datetime, pk: int) -> Q:
    return Q(published_at__lte=published_at) & (Q(published_at__lt=published_at) | Q(pk__lte=pk))


def _scan(queryset: QuerySet) -> Iterator:
    """Yield ``queryset``'s rows a slice at a time, each slice twice as long as the last.

    Slices, not a server-side cursor: a page is a few dozen rows, and without server-side
    cursors (PgBouncer) ``iterator()`` would fetch every live post.
    """
    start, size = 0, INDEX_WINDOW
    while True:
        rows = list(queryset[start : start + size])
        yield from rows
        if len(rows) < size:
            return
        start, size = start + size, size * 2


def index_entry(slug: str) -> tuple[int, str, datetime] | None:
    """Return (id, slug, published_at) of the live post ``slug``, or None."""
    return live_posts().filter(slug=slug).values_list("id", "slug", "published_at").first()


def index_entry_at(position: int) -> tuple[int, str, datetime] | None:
    """Return (id, slug, published_at) of the live post ``position`` from the top (0 first)."""
    rows = live_posts().values_list("id", "slug", "published_at")
    return rows[position : position + 1].first()


def index_key_of(entry: tuple[int, str, datetime], *, per_page: int) -> str:
    """Return the key of the index page that lists the live post ``entry`` (an index_entry).

    Its page starts at the nearest break post at or above it (``paging.is_break``), unless
    that one is within the front page: a scan upwards (usually a page of rows) and one read
    of at most ``per_page`` ids above the break.
    """
    pk, _slug, published_at = entry
    upwards = (
        live_posts()
        .filter(_at_or_above(published_at, pk))
        .order_by("published_at", "id")
        .values_list("id", "slug", "published_at")
    )
    for break_pk, break_slug, break_at in _scan(upwards):
        if paging.is_break(break_pk, per_page):
            higher = live_posts().filter(_newer_than(break_at, break_pk)).values_list("id")
            above = len(higher[:per_page])  # at most a page of ids read; nothing counted
            starts = paging.starts_page(break_pk, newer=above, per_page=per_page)
            return break_slug if starts else FRONT
    return FRONT


def index_page(*, key: str, per_page: int, link: Callable[[str], str]) -> IndexPage | None:
    """Return the index page ``key`` (FRONT, or the slug of a page's first post), else None.

    None when ``key`` names no page (not live, or not the first post of its page: see
    :func:`index_key_of`). Reads the page's rows and the next one, a slice at a time, and
    the keys of the pages around it; nothing counts or skips the live posts.
    """
    rows = live_posts().defer("body", "body_html")
    newer = None
    above = 0
    if key != FRONT:
        entry = index_entry(key)
        if entry is None or index_key_of(entry, per_page=per_page) != key:
            return None
        pk, _slug, published_at = entry
        above_row = (
            live_posts()
            .filter(_newer_than(published_at, pk))
            .order_by("published_at", "id")
            .values_list("id", "slug", "published_at")
            .first()
        )
        newer = index_key_of(above_row, per_page=per_page)
        rows = rows.filter(_at_or_below(published_at, pk))
        above = per_page  # the page's first post starts it (paging.starts_page)
    seen: list[Post] = []
    read = (seen.append(post) or post for post in _scan(rows))
    page = next(paging.pages(read, per_page=per_page, post_id=lambda p: p.pk, newer=above))
    older = seen[len(page)].slug if len(seen) > len(page) else None
    return IndexPage(key=key, object_list=page, newer=newer, older=older, link=link)


def live_post_version(slug: str) -> datetime | None:
    """Return when the live post ``slug`` last changed, or None if there is no such post."""
    return live_posts().filter(slug=slug).values_list("updated_at", flat=True).first()


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
    #: The public address when what is shown is what the site shows now, else None.
    live_url: str | None = None
    #: Whether what is live now is a revision that went live (not the post as first published).
    live_is_revision: bool = False


def preview_page(*, post_id: int, generation: int) -> PreviewPage | None:
    """Return what a preview of ``post_id`` shows, or None if there is nothing to show.

    None when the post is gone or its links were revoked (``generation`` is older). The
    newest pending revision wins; without one, the post as it is (a draft, a scheduled post,
    the live version).
    """
    post = (
        Post.objects.filter(pk=post_id, preview_generation=generation)
        .only("pk", "slug", "title", "body", "body_html", "status", "publish_at", "published_at")
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
    label = post.get_status_display().lower()
    if post.status != Post.Status.PUBLISHED:
        return PreviewPage(post.title, post.body_html, post.publish_at, label)
    return PreviewPage(
        post.title,
        post.body_html,
        post.published_at,
        label,
        live_url=post.get_absolute_url(),
        live_is_revision=live_revision_number(post) not in (None, 1),
    )


def live_revision_number(post: Post) -> int | None:
    """Return the number of the revision live now on ``post``, or None (see live_spans)."""
    last = (
        PostRevision.objects.filter(post=post, status=PostRevision.Status.PUBLISHED)
        .order_by("-published_at", "-number")
        .only("number", "status", "published_at", "title", "body")
        .first()
    )
    spans = live_spans(
        [last] if last else [],
        post_is_live=post.status == Post.Status.PUBLISHED,
        live_title=post.title,
        live_body=post.body,
    )
    return next((number for number, span in spans.items() if span.live_now), None)
