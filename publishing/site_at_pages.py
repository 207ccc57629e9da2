"""The pages of the site at a moment, whoever asks: an editor in the admin, or a shared link.

Both show the same pages (:func:`index_context`, :func:`post_context`); only their addresses
differ, which the caller gives as :class:`Links`. Every answer carries the preview headers:
no search engine indexes it, no shared cache keeps it, no link in it tells another site its
address.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext as _

from coordination.clock import database_now
from coordination.wording import local_time
from publishing.conf import settings
from publishing.page_bodies import page_body
from publishing.previews import PREVIEW_HEADERS
from publishing.site_at import (
    PUBLISH,
    Change,
    Outcome,
    Page,
    apply,
    earliest,
    newest_live,
    other_changes,
    page_key,
)
from publishing.site_at_facts import (
    body_of,
    changes_by,
    due_count,
    live_now,
    pages_of,
    post_by_slug,
    read_changes,
)

#: How many index pages the moment's index goes back (each reads the live posts up to it).
MOST_PAGES = 200
#: How many of the changes from now the banner names (the rest are counted).
BANNER_MOST = 30
#: How many posts the index reads at least from each end it merges (the newest live now, the
#: latest publishes by the moment).
WINDOW = 32
#: How long the links of a shown page's embargoed images work.
PAGE_LIFE = timedelta(hours=1)
#: What each kind of change does, in the banner's words.
WHAT = {"publish": "goes live", "unpublish": "is taken down", "new_text": "gets a new text"}


def slug_addresses(name: str, query: str = "", **kwargs) -> Callable[[str], str]:
    """Return the address of the URL ``name`` for a post's slug (with ``?query`` when given),
    reversed once: a page names up to :data:`BANNER_MOST` posts, and their addresses differ
    only by the slug, a path segment the ``slug`` converter takes as it is (the database
    refuses any other, :mod:`publishing.slugs`), so nothing in it is quoted."""
    marker = "slug-marker"
    head, _, tail = reverse(name, kwargs={**kwargs, "slug": marker}).rpartition(marker)
    end = f"{tail}?{query}" if query else tail
    return lambda slug: f"{head}{slug}{end}"


@dataclass(frozen=True)
class Links:
    """The addresses of the pages of one moment: its index (page ``n``), a post by its
    address, its feed, its sitemap's index and a page of one of its sections, and the way
    out (empty: none, for a shared link)."""

    index: Callable[[int], str]
    post: Callable[[str], str]
    feed: str
    sitemap: str
    sitemap_section: Callable[[str, int], str]
    leave: str = ""


@dataclass(frozen=True)
class Plan:
    """Some posts at a moment (``pages``, by id) and what their changes did (``outcomes``,
    in order), with the first changes from now (``first``, the banner's) and how many
    changes there are by then (``count``)."""

    pages: dict[int, Page]
    outcomes: list[Outcome]
    first: frozenset[Change]
    count: int


def read_plan(
    at: datetime,
    posts: set[int],
    *,
    known: dict[int, Page] | None = None,
    others: list[Change] | None = None,
    count: int | None = None,
) -> Plan:
    """Return the posts ``posts`` at ``at`` and the banner's changes: every change of those
    posts, and the first changes from now, applied to the posts as they are now (``known``:
    some of them, read already). Only these are read, however many changes there are; a
    post the banner names that ``posts`` does not hold is as the changes read leave it
    (every change before the banner's last is among them, so what each did is exact).
    Other apps' changes are ``others``, and how many changes there are by then ``count``,
    when the page has read them already."""
    others = other_changes(at) if others is None else others
    changes, touched = read_changes(at, posts=posts, with_first=BANNER_MOST, others=others)
    first = earliest(changes, BANNER_MOST)
    read = posts | {change.post_id for change in first}
    known = {pk: page for pk, page in (touched | (known or {})).items() if pk in read}
    unknown = read - set(known)
    pages, outcomes = apply(known | (pages_of(unknown) if unknown else {}), changes, at)
    count = due_count(at, others) if count is None else count
    return Plan(pages, outcomes, frozenset(first), count)


def differences(plan: Plan, links: Links) -> list[dict]:
    """Return what differs from now (the first :data:`BANNER_MOST`), each change in words
    with its post's link at the moment."""
    shown = []
    for outcome in [outcome for outcome in plan.outcomes if outcome.change in plan.first]:
        page = plan.pages.get(outcome.change.post_id)
        if page is None:
            continue
        shown.append(
            {
                "title": page.title,
                "url": links.post(page.slug),
                "what": _(WHAT[outcome.change.kind]),
                "source": outcome.change.source,
                "when": local_time(outcome.change.at, seconds=False),
                "done": outcome.done,
                "why": outcome.why,
            }
        )
    return shown


def _banner(at: datetime, note: str, plan: Plan, links: Links) -> dict:
    return {
        "note": note,
        "when": local_time(at, seconds=False),
        "differences": differences(plan, links),
        "changes": plan.count,
        "more_changes": max(0, plan.count - BANNER_MOST),
        "index_url": links.index(1),
        "feed_url": links.feed,
        "sitemap_url": links.sitemap,
        "leave_url": links.leave,
    }


def newest_at(
    at: datetime,
    count: int,
    *,
    others: list[Change] | None = None,
    changes: int | None = None,
) -> tuple[list[Page], Plan]:
    """Return the ``count`` newest posts live at ``at`` (fewer: there are no more) and the
    plan they were read with.

    Reads windows: the newest live posts now and the latest publishes by then, with every
    change of those posts; a post outside both comes below the windows' ends (a post goes
    live at its latest publish, or stays at its time now), so the posts above them are in
    place. Too few: the windows grow fourfold. ``others`` and ``changes`` (how many changes
    there are by then) when read already.
    """
    window = max(count, WINDOW)
    others = other_changes(at) if others is None else others
    while True:
        publishes = changes_by(at, only=PUBLISH, last=window, others=others)
        newest = live_now(limit=window)
        posts = {change.post_id for change in publishes} | {page.post_id for page in newest}
        known = {page.post_id: page for page in newest}
        plan = read_plan(at, posts, known=known, others=others, count=changes)
        ends = [(change.at, change.post_id) for change in publishes[window - 1 :]]
        ends += [page_key(page, at) for page in newest[window - 1 :]]
        placed = newest_live(
            [plan.pages[pk] for pk in posts if pk in plan.pages],
            at,
            unseen_below=max(ends, default=None),
        )
        if len(placed) >= count or not ends:
            return placed[:count], plan
        window *= 4


def index_context(
    at: datetime,
    links: Links,
    *,
    page: str | None,
    note: str = "",
    others: list[Change] | None = None,
    count: int | None = None,
) -> dict:
    """Return the index at ``at``, page ``page`` (a number; anything else is the first);
    ``others`` (other apps' changes by then) and ``count`` (how many changes there are by
    then) when read already."""
    per_page = int(settings.POSTS_PER_PAGE)
    try:
        number = max(1, min(int(page or "1"), MOST_PAGES))
    except ValueError:
        number = 1
    offset = (number - 1) * per_page
    merged, plan = newest_at(at, offset + per_page + 1, others=others, changes=count)
    more = len(merged) > offset + per_page and number < MOST_PAGES
    return {
        **_banner(at, note, plan, links),
        "entries": [
            {"page": shown, "url": links.post(shown.slug)}
            for shown in merged[offset : offset + per_page]
        ],
        "newer_url": links.index(number - 1) if number > 1 else "",
        "older_url": links.index(number + 1) if more else "",
    }


def post_context(
    at: datetime,
    links: Links,
    slug: str,
    *,
    note: str = "",
    now: datetime | None = None,
    others: list[Change] | None = None,
    count: int | None = None,
) -> dict:
    """Return the post whose address is ``slug`` at ``at``; none has it: a 404. ``now`` (the
    database's time), ``others`` (other apps' changes by then) and ``count`` (how many changes
    there are by then) when read already."""
    found = post_by_slug(slug)
    if found is None:
        raise Http404(_("No post has this address."))
    page, own_body = found
    post_id = page.post_id
    plan = read_plan(at, {post_id}, known={post_id: page}, others=others, count=count)
    shown = plan.pages[post_id]
    return {
        **_banner(at, note, plan, links),
        "post": shown,
        # Embargoed images are shown through links that live as long as this page's view.
        "body": page_body(
            post_id,
            body_of(shown, own=own_body),
            preview_until=(now or database_now()) + PAGE_LIFE,
        ),
        "not_live": not shown.live,
    }


def respond(request, template: str, context: dict) -> TemplateResponse:
    """Render ``template`` with the preview headers."""
    response = TemplateResponse(request, template, context)
    for header, value in PREVIEW_HEADERS.items():
        response[header] = value
    return response
