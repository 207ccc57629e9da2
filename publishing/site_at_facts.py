"""Reading the site at a moment: the changes scheduled by then, and the pages they touch.

A few indexed queries whatever the site's size: the scheduled publishes, takedowns and
revisions due by the moment (the due indexes the publish job reads), narrowed to the posts a
page shows and the first changes from now, other apps' changes
(:func:`publishing.site_at.other_changes`), then the posts those changes touch. How many
changes there are is counted by the database (:func:`due_count`); which posts they touch is
read as ids with their preview generations (:func:`touched`, a shared link's check, which
counts them too); every change by the moment is read only for the sitemap (:func:`live_then`).

What will not happen is read now, with the publish job's own rules: a post whose publish
failed waits for an editor, content the go-live checks hold (reviews) stays out, a post that
cannot go live as it is (:func:`publishing.validation.publish_problems`) would fail.
"""

from collections.abc import Collection
from datetime import datetime
from typing import NamedTuple

from django.db.models import Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Length, Trim

from publishing import go_live, selectors
from publishing.conf import settings
from publishing.models import Post, PostRevision
from publishing.prepared_reads import PreparedRead
from publishing.site_at import (
    NEW_TEXT,
    ORDER,
    PUBLISH,
    UNPUBLISH,
    Change,
    Page,
    earliest,
    other_changes,
    wanted,
)
from publishing.validation import publish_problems

S = Post.Status


class ChangesRead(NamedTuple):
    """Changes due by a moment, and the posts the publish job's own touch as they are now (read
    with them: a page needs no second read of the posts whose changes it applies)."""

    changes: list[Change]
    pages: dict[int, Page]


def changes_by(moment: datetime, **narrow) -> list[Change]:
    """Return the changes :func:`read_changes` reads (the same arguments), without their posts."""
    return read_changes(moment, **narrow).changes


def read_changes(
    moment: datetime,
    *,
    posts: Collection[int] | None = None,
    with_first: int | None = None,
    only: str | None = None,
    first: int | None = None,
    last: int | None = None,
    others: list[Change] | None = None,
) -> ChangesRead:
    """Return the changes scheduled to happen by ``moment``, each with why not if it won't,
    and the posts the publish job's own touch as they are now; ``posts``, ``only``,
    ``first`` and ``last`` as for :func:`publishing.site_at.wanted`, and with the posts'
    changes, at least the ``with_first`` earliest changes of any post (the banner's, in the
    same reads).

    A page reads the changes it shows, not every change by then: the publish job's own (of
    which there can be thousands) narrowed by the database, a small query a kind; other
    apps' are ``others`` (:func:`publishing.site_at.other_changes`, read once a page:
    releases are few) or read here.
    """
    others = other_changes(moment) if others is None else others
    narrow = {"posts": posts, "only": only, "first": first, "last": last}
    own, pages = _own_changes(moment, with_first=with_first, **narrow)
    if with_first and posts is not None:
        theirs = wanted(others, only=only)
        banner = set(earliest(theirs, with_first))
        kept = [change for change in theirs if change.post_id in posts or change in banner]
        return ChangesRead(own + kept, pages)
    return ChangesRead(wanted([*own, *others], **narrow), pages)


def due_count(moment: datetime, others: list[Change] | None = None) -> int:
    """Return how many changes are due by ``moment``, counted by the database without reading
    them; ``others`` as for :func:`read_changes`."""
    others = other_changes(moment) if others is None else others
    return _due_posts(moment, each_change=True).count() + len(others)


class Touched(NamedTuple):
    """The posts the changes due by a moment touch, each with its preview generation, and how
    many changes those are."""

    generations: frozenset[tuple[int, int]]
    count: int


def touched(moment: datetime, others: list[Change] | None = None) -> Touched:
    """Return the posts the changes due by ``moment`` touch, with their preview generations,
    and how many changes there are: the publish job's own changes in one read (a row each,
    however many), other apps' posts in a second read only when they touch posts the first
    did not; ``others`` as for :func:`read_changes`."""
    others = other_changes(moment) if others is None else others
    rows = TOUCHED_ROWS.rows(moment=moment)
    generations = set(rows)
    seen = {pk for pk, _ in generations}
    unseen = {change.post_id for change in others} - seen
    if unseen:
        generations |= set(
            Post.objects.filter(pk__in=unseen).values_list("pk", "preview_generation")
        )
    return Touched(frozenset(generations), len(rows) + len(others))


def _due_posts(moment: datetime, *fields: str, each_change: bool) -> QuerySet:
    """Return the post of each of the publish job's changes due by ``moment`` with its
    ``fields``, as one union of the three kinds (``each_change``: a post as often as it
    changes, else once)."""
    return (
        _due_publishes(moment)
        .order_by()
        .values_list("pk", *fields)
        .union(
            _due_takedowns(moment).order_by().values_list("pk", *fields),
            _due_revisions(moment)
            .order_by()
            .values_list("post_id", *(f"post__{field}" for field in fields)),
            all=each_change,
        )
    )


#: Each change's post with its preview generation, compiled once (a shared link's every page).
TOUCHED_ROWS = PreparedRead(
    lambda moment: _due_posts(moment, "preview_generation", each_change=True)
)


def _due_publishes(moment: datetime) -> QuerySet:
    return Post.objects.filter(status=S.SCHEDULED, publish_at__lte=moment)


def _due_takedowns(moment: datetime) -> QuerySet:
    return Post.objects.filter(status__in=(S.SCHEDULED, S.PUBLISHED), unpublish_at__lte=moment)


def _due_revisions(moment: datetime) -> QuerySet:
    return PostRevision.objects.filter(status=PostRevision.Status.SCHEDULED, publish_at__lte=moment)


def narrowed(
    rows: QuerySet, *, at: str, post: str, posts, with_first, first, last, moment
) -> QuerySet:
    """Return ``rows`` (changes due by ``moment`` at their field ``at``, of the post in their
    field ``post``) of the posts ``posts`` only (with at least their ``with_first`` earliest,
    of any post), and the ``first`` or ``last`` so many of them (as for :func:`read_changes`):
    the database orders and cuts each kind's changes."""
    if posts is not None:
        keep = Q(**{f"{post}__in": list(posts)})
        if with_first:
            # Up to the time of the kind's nth change: a scalar subquery, which every
            # database takes with its LIMIT (MariaDB refuses one inside IN).
            nth = rows.order_by(at).values(at)[with_first - 1 : with_first]
            keep |= Q(**{f"{at}__lte": Coalesce(Subquery(nth), Value(moment))})
        rows = rows.filter(keep)
    if first is not None:
        return rows.order_by(at, post)[:first]
    if last is not None:
        return rows.order_by(f"-{at}", f"-{post}")[:last]
    return rows.order_by()


def _own_changes(moment: datetime, *, only, **narrow) -> tuple[list[Change], dict[int, Page]]:
    """Return the publish job's own changes due by ``moment``, narrowed as :func:`read_changes`
    says, and the posts they touch as they are now: a small query a kind (one union would
    read fewer times, but Django takes longer to build it than the database to answer
    three), each reading its changes' posts with them."""
    changes: list[Change] = []
    pages: dict[int, Page] = {}
    for kind, read in ((PUBLISH, _publishes), (UNPUBLISH, _takedowns), (NEW_TEXT, _revisions)):
        if only in (None, kind):
            for change, page in read(moment, **narrow):
                changes.append(change)
                pages[change.post_id] = page
    return changes, pages


def _page_columns(prefix: str = "") -> tuple[str, ...]:
    """Return the columns of a post's :class:`Page` (``prefix``: read through a relation)."""
    return tuple(
        f"{prefix}{name}" for name in ("title", "slug", "status", "published_at", "excerpt")
    )


def _page(pk: int, title: str, slug: str, status: str, published_at, excerpt: str) -> Page:
    return Page(pk, title, slug, status == S.PUBLISHED, published_at, excerpt=excerpt)


def _publish_rows(moment: datetime, posts=None, **cut) -> QuerySet:
    rows = (
        _due_publishes(moment)
        .annotate(body_length=Length(Trim("body")))
        .values_list("pk", "publish_at", "last_error", "body_length", *_page_columns())
    )
    return narrowed(rows, at="publish_at", post="pk", posts=posts, moment=moment, **cut)


def _takedown_rows(moment: datetime, posts=None, **cut) -> QuerySet:
    rows = _due_takedowns(moment).values_list("pk", "unpublish_at", *_page_columns())
    return narrowed(rows, at="unpublish_at", post="pk", posts=posts, moment=moment, **cut)


def _revision_rows(moment: datetime, posts=None, **cut) -> QuerySet:
    rows = _due_revisions(moment).values_list(
        "pk", "post_id", "number", "publish_at", "title", "excerpt", *_page_columns("post__")
    )
    return narrowed(rows, at="publish_at", post="post_id", posts=posts, moment=moment, **cut)


#: Each kind's read, compiled once (a page makes three of them).
PUBLISH_ROWS = PreparedRead(_publish_rows)
TAKEDOWN_ROWS = PreparedRead(_takedown_rows)
REVISION_ROWS = PreparedRead(_revision_rows)


def _rows(read: PreparedRead, moment: datetime, *, posts, **cut) -> list[tuple]:
    """Return the rows of one kind's ``read`` of the changes due by ``moment``, narrowed."""
    if posts is None:
        return read.rows(options=cut, moment=moment)
    return read.rows(options=cut, moment=moment, posts=sorted(posts))


def _publishes(moment: datetime, **narrow) -> list[tuple[Change, Page]]:
    rows = _rows(PUBLISH_ROWS, moment, **narrow)
    held = go_live.why_not(go_live.POST, [pk for pk, *_ in rows])
    max_chars = int(settings.POST_BODY_MAX_CHARS)
    read = []
    for pk, at, error, length, *page in rows:
        shown = _page(pk, *page)
        problems = publish_problems(
            title=shown.title, slug=shown.slug, body_length=length, max_chars=max_chars
        )
        why = error or held.get(pk) or " ".join(problems)
        change = Change(at, ORDER["publish"], pk, PUBLISH, "its scheduled publish", why_not=why)
        read.append((change, shown))
    return read


def _takedowns(moment: datetime, **narrow) -> list[tuple[Change, Page]]:
    rows = _rows(TAKEDOWN_ROWS, moment, **narrow)
    return [
        (Change(at, ORDER["unpublish"], pk, UNPUBLISH, "its unpublish time"), _page(pk, *page))
        for pk, at, *page in rows
    ]


def _revisions(moment: datetime, **narrow) -> list[tuple[Change, Page]]:
    rows = _rows(REVISION_ROWS, moment, **narrow)
    held = go_live.why_not(go_live.REVISION, [pk for pk, *_ in rows])
    return [
        (
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
            ),
            _page(post_id, *page),
        )
        for pk, post_id, number, at, title, excerpt, *page in rows
    ]


def pages_of(post_ids) -> dict[int, Page]:
    """Return the posts ``post_ids`` as they are now, without their bodies (:func:`body_of`)."""
    rows = Post.objects.filter(pk__in=list(post_ids)).order_by().values_list("pk", *_page_columns())
    return {pk: _page(pk, *page) for pk, *page in rows}


def body_of(page: Page, *, own: str | None = None) -> str:
    """Return the HTML body ``page`` shows: its revision's, or the post's own (``own`` when
    read already)."""
    if page.text_revision is not None:
        source = PostRevision.objects.filter(pk=page.text_revision)
    elif own is not None:
        return own
    else:
        source = Post.objects.filter(pk=page.post_id)
    return source.values_list("body_html", flat=True).first() or ""


def live_now(*, limit: int) -> list[Page]:
    """Return the ``limit`` newest live posts now."""
    rows = selectors.live_posts().values_list("pk", "title", "slug", "published_at", "excerpt")
    return [
        Page(pk, title, slug, True, published_at, excerpt=excerpt)
        for pk, title, slug, published_at, excerpt in rows[:limit]
    ]


def live_then(pages: dict[int, Page]) -> QuerySet[Post]:
    """Return the posts live at a moment whose changes touch ``pages`` (as they are then):
    those live now that no change touches, and the touched ones live then."""
    touched_live = [pk for pk, page in pages.items() if page.live]
    return selectors.live_posts().exclude(pk__in=list(pages)) | Post.objects.filter(
        pk__in=touched_live
    )


def post_by_slug(slug: str) -> tuple[Page, str] | None:
    """Return the post whose address is ``slug`` now, as it is now, with its own HTML body
    (None: none has it), in one read: the page shows the body unless a revision's replaces
    it by then."""
    row = Post.objects.filter(slug=slug).values_list("pk", *_page_columns(), "body_html").first()
    if row is None:
        return None
    pk, *page, body = row
    return _page(pk, *page), body


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
