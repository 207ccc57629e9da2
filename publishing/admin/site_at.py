"""See the site at a moment: the public index and posts as they will be at a time an editor picks.

Only editors who may preview posts see it (:func:`publishing.previews.can_preview`); it lives
under the admin, never on the public site, and every answer says so to caches and search
engines (the preview headers). The moment is typed in the editor's zone (a day and a time,
read with the post form's wall-time rules: a time in a daylight-saving gap is refused with
what to pick, one in a fold is its first reading and the banner says so) or given as an
instant (``?at=``, ISO 8601 with its offset: the calendar's and a release's links). What is
shown is computed by :mod:`publishing.site_at` from :mod:`publishing.site_at_facts`.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from coordination.clock import database_now
from coordination.wording import local_time
from publishing import previews
from publishing.conf import settings
from publishing.page_bodies import page_body
from publishing.site_at import Outcome, Page, apply
from publishing.site_at_facts import body_of, changes_by, live_now, pages_of, post_by_slug
from publishing.validation import wall_time_problem
from publishing.views import PREVIEW_HEADERS

#: How many index pages the moment's index goes back (each reads the live posts up to it).
MOST_PAGES = 200
#: How many of the changes from now the banner names (the rest are counted).
BANNER_MOST = 30
#: How long the links of a shown page's embargoed images work.
PAGE_LIFE = timedelta(hours=1)


@dataclass(frozen=True)
class Moment:
    """The instant asked for (None: none, or one that cannot be shown, ``problem`` says why)
    and a note on how it was read (a wall time that happens twice)."""

    at: datetime | None = None
    problem: str = ""
    note: str = ""


def read_moment(query, *, zone, now: datetime) -> Moment:
    """Read the moment from ``?at=`` (an instant) or ``?day=`` and ``?time=`` (a wall time in
    ``zone``); a moment before ``now`` has passed and is refused."""
    try:
        if query.get("at"):
            at = datetime.fromisoformat(query["at"])
            if at.tzinfo is None:
                return Moment(problem=_("The moment needs its offset from UTC."))
            moment, note = at.astimezone(UTC), ""
        elif query.get("day") or query.get("time"):
            wall = datetime.fromisoformat(f"{query.get('day', '')}T{query.get('time', '')}")
            problem = wall_time_problem(wall, zone)
            if (
                problem
                and wall.replace(tzinfo=zone, fold=0)
                .astimezone(UTC)
                .astimezone(zone)
                .replace(tzinfo=None)
                != wall
            ):
                return Moment(problem=problem)
            moment = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
            note = (
                _("That time happens twice in %(zone)s: shown is its first.")
                % {"zone": getattr(zone, "key", str(zone))}
                if problem
                else ""
            )
        else:
            return Moment()
    except (ValueError, OverflowError):
        return Moment(
            problem=_(
                "That is not a date and time Instatic can show: pick a day (2027-03-01) and a "
                "time (09:30)."
            )
        )
    if moment < now:
        return Moment(problem=_("That moment has passed: pick one from now on."))
    return Moment(at=moment, note=note)


def _may_see(request) -> None:
    if not previews.can_preview(request.user):
        raise PermissionDenied(_("Only editors who may preview posts may see the site ahead."))


def moment_url(name: str, at: datetime, **kwargs) -> str:
    """Return the address of the site-at page ``name`` at the instant ``at``."""
    return f"{reverse(name, kwargs=kwargs)}?{urlencode({'at': at.isoformat()})}"


def site_at_link(at: datetime) -> str:
    """Return the address of the index of the site at ``at`` (for the calendar, a release)."""
    return moment_url("admin:publishing_post_site_at", at)


def _differences(outcomes: list[Outcome], pages: dict[int, Page], at: datetime) -> list[dict]:
    """Return what differs from now (the first :data:`BANNER_MOST`), each change in words
    with its post's link at ``at``."""
    shown = []
    for outcome in outcomes[:BANNER_MOST]:
        page = pages.get(outcome.change.post_id)
        if page is None:
            continue
        what = {
            "publish": _("goes live"),
            "unpublish": _("is taken down"),
            "new_text": _("gets a new text"),
        }[outcome.change.kind]
        shown.append(
            {
                "title": page.title,
                "url": moment_url("admin:publishing_post_site_at_post", at, slug=page.slug),
                "what": what,
                "source": outcome.change.source,
                "when": local_time(outcome.change.at, seconds=False),
                "done": outcome.done,
                "why": outcome.why,
            }
        )
    return shown


def _respond(request, template: str, context: dict):
    response = TemplateResponse(request, template, context)
    for header, value in PREVIEW_HEADERS.items():
        response[header] = value
    return response


def _moment_or_form(request):
    """Return the moment asked for, or the page that asks for one (with why)."""
    zone = timezone.get_current_timezone()
    moment = read_moment(request.GET, zone=zone, now=database_now())
    if moment.at is None:
        context = {
            "problem": moment.problem,
            "zone": getattr(zone, "key", str(zone)),
            "day": request.GET.get("day", ""),
            "time": request.GET.get("time", ""),
            "title": _("See the site at a moment"),
        }
        return None, _respond(request, "publishing/site_at/choose.html", context)
    return moment, None


def _banner(request, moment: Moment, outcomes, pages) -> dict:
    return {
        "moment": moment,
        "when": local_time(moment.at, seconds=False),
        "differences": _differences(outcomes, pages, moment.at),
        "changes": len(outcomes),
        "more_changes": max(0, len(outcomes) - BANNER_MOST),
        "index_url": moment_url("admin:publishing_post_site_at", moment.at),
        "leave_url": reverse("admin:publishing_post_calendar"),
    }


def site_at_view(model_admin, request):
    """The public index as it will be at the moment asked for (or the page that asks)."""
    _may_see(request)
    moment, asking = _moment_or_form(request)
    if asking is not None:
        return asking
    changes = changes_by(moment.at)
    touched = {change.post_id for change in changes}
    pages, outcomes = apply(pages_of(touched), changes, moment.at)
    per_page = int(settings.POSTS_PER_PAGE)
    try:
        number = max(1, min(int(request.GET.get("page", "1")), MOST_PAGES))
    except ValueError:
        number = 1
    offset = (number - 1) * per_page
    live = [page for page in pages.values() if page.live]
    merged = sorted(
        live + live_now(excluding=touched, limit=offset + per_page + 1),
        key=lambda page: (page.published_at or moment.at, page.post_id),
        reverse=True,
    )
    entries = [
        {
            "page": page,
            "url": moment_url("admin:publishing_post_site_at_post", moment.at, slug=page.slug),
        }
        for page in merged[offset : offset + per_page]
    ]
    base = moment_url("admin:publishing_post_site_at", moment.at)
    context = {
        **_banner(request, moment, outcomes, pages),
        "entries": entries,
        "newer_url": f"{base}&page={number - 1}" if number > 1 else "",
        "older_url": (
            f"{base}&page={number + 1}"
            if len(merged) > offset + per_page and number < MOST_PAGES
            else ""
        ),
    }
    return _respond(request, "publishing/site_at/index.html", context)


def site_at_post_view(model_admin, request, slug: str):
    """One post as it will be at the moment asked for; not live then: a 404 saying so."""
    _may_see(request)
    moment, asking = _moment_or_form(request)
    if asking is not None:
        return asking
    post_id = post_by_slug(slug)
    if post_id is None:
        raise Http404(_("No post has this address."))
    changes = changes_by(moment.at)
    touched = {change.post_id for change in changes} | {post_id}
    pages, outcomes = apply(pages_of(touched), changes, moment.at)
    page = pages[post_id]
    context = {
        **_banner(request, moment, outcomes, pages),
        "post": page,
        # Embargoed images are shown through links that live as long as this page's view.
        "body": page_body(post_id, body_of(page), preview_until=database_now() + PAGE_LIFE),
        "not_live": not page.live,
    }
    return _respond(request, "publishing/site_at/post.html", context)
