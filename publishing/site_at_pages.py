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
from django.utils.translation import gettext as _

from coordination.clock import database_now
from coordination.wording import local_time
from publishing.conf import settings
from publishing.page_bodies import page_body
from publishing.previews import PREVIEW_HEADERS
from publishing.site_at import Outcome, Page, apply
from publishing.site_at_facts import body_of, changes_by, live_now, pages_of, post_by_slug

#: How many index pages the moment's index goes back (each reads the live posts up to it).
MOST_PAGES = 200
#: How many of the changes from now the banner names (the rest are counted).
BANNER_MOST = 30
#: How long the links of a shown page's embargoed images work.
PAGE_LIFE = timedelta(hours=1)
#: What each kind of change does, in the banner's words.
WHAT = {"publish": "goes live", "unpublish": "is taken down", "new_text": "gets a new text"}


@dataclass(frozen=True)
class Links:
    """The addresses of the pages of one moment: its index (page ``n``), a post by its
    address, its feed, and the way out (empty: none, for a shared link)."""

    index: Callable[[int], str]
    post: Callable[[str], str]
    feed: str
    leave: str = ""


def differences(outcomes: list[Outcome], pages: dict[int, Page], links: Links) -> list[dict]:
    """Return what differs from now (the first :data:`BANNER_MOST`), each change in words
    with its post's link at the moment."""
    shown = []
    for outcome in outcomes[:BANNER_MOST]:
        page = pages.get(outcome.change.post_id)
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


def _banner(at: datetime, note: str, outcomes, pages, links: Links) -> dict:
    return {
        "note": note,
        "when": local_time(at, seconds=False),
        "differences": differences(outcomes, pages, links),
        "changes": len(outcomes),
        "more_changes": max(0, len(outcomes) - BANNER_MOST),
        "index_url": links.index(1),
        "feed_url": links.feed,
        "leave_url": links.leave,
    }


def index_context(
    at: datetime, links: Links, *, page: str | None, note: str = "", changes=None
) -> dict:
    """Return the index at ``at``, page ``page`` (a number; anything else is the first);
    ``changes`` are the changes by ``at`` when the caller has read them already."""
    changes = changes_by(at) if changes is None else changes
    touched = {change.post_id for change in changes}
    pages, outcomes = apply(pages_of(touched), changes, at)
    per_page = int(settings.POSTS_PER_PAGE)
    try:
        number = max(1, min(int(page or "1"), MOST_PAGES))
    except ValueError:
        number = 1
    offset = (number - 1) * per_page
    live = [shown for shown in pages.values() if shown.live]
    merged = sorted(
        live + live_now(excluding=touched, limit=offset + per_page + 1),
        key=lambda shown: (shown.published_at or at, shown.post_id),
        reverse=True,
    )
    more = len(merged) > offset + per_page and number < MOST_PAGES
    return {
        **_banner(at, note, outcomes, pages, links),
        "entries": [
            {"page": shown, "url": links.post(shown.slug)}
            for shown in merged[offset : offset + per_page]
        ],
        "newer_url": links.index(number - 1) if number > 1 else "",
        "older_url": links.index(number + 1) if more else "",
    }


def post_context(at: datetime, links: Links, slug: str, *, note: str = "", changes=None) -> dict:
    """Return the post whose address is ``slug`` at ``at``; none has it: a 404. ``changes``
    as for :func:`index_context`."""
    post_id = post_by_slug(slug)
    if post_id is None:
        raise Http404(_("No post has this address."))
    changes = changes_by(at) if changes is None else changes
    touched = {change.post_id for change in changes} | {post_id}
    pages, outcomes = apply(pages_of(touched), changes, at)
    shown = pages[post_id]
    return {
        **_banner(at, note, outcomes, pages, links),
        "post": shown,
        # Embargoed images are shown through links that live as long as this page's view.
        "body": page_body(post_id, body_of(shown), preview_until=database_now() + PAGE_LIFE),
        "not_live": not shown.live,
    }


def respond(request, template: str, context: dict) -> TemplateResponse:
    """Render ``template`` with the preview headers."""
    response = TemplateResponse(request, template, context)
    for header, value in PREVIEW_HEADERS.items():
        response[header] = value
    return response
