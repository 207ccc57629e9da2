"""See the site at a moment: the public index and posts as they will be at a time an editor picks.

Only editors who may preview posts see it (:func:`publishing.previews.can_preview`); it lives
under the admin, never on the public site, and every answer says so to caches and search
engines (the preview headers). The moment is typed in the editor's zone (a day and a time,
read with the post form's wall-time rules: a time in a daylight-saving gap is refused with
what to pick, one in a fold is its first reading and the banner says so) or given as an
instant (``?at=``, ISO 8601 with its offset: the calendar's and a release's links). What is
shown is computed by :mod:`publishing.site_at` from :mod:`publishing.site_at_facts`.
"""

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from coordination.clock import database_now
from publishing import previews
from publishing.site_at_feed import SiteAtFeed
from publishing.site_at_links import shared_link
from publishing.site_at_pages import (
    Links,
    index_context,
    post_context,
    respond,
    slug_addresses,
)
from publishing.site_at_sitemap import sitemap_at
from publishing.validation import wall_time_problem


@dataclass(frozen=True)
class Moment:
    """The instant asked for (None: none, or one that cannot be shown, ``problem`` says why)
    and a note on how it was read (a wall time that happens twice)."""

    at: datetime | None = None
    problem: str = ""
    note: str = ""
    #: The database's time when the moment was read (the page's "now").
    now: datetime | None = None


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


def admin_links(at: datetime) -> Links:
    """Return the editors' addresses of the pages of the site at ``at``."""

    def index(number: int) -> str:
        url = site_at_link(at)
        return url if number <= 1 else f"{url}&page={number}"

    def sitemap_section(section: str, page: int) -> str:
        url = moment_url("admin:publishing_post_site_at_sitemap_section", at, section=section)
        return url if page <= 1 else f"{url}&p={page}"

    return Links(
        index=index,
        post=slug_addresses(
            "admin:publishing_post_site_at_post", urlencode({"at": at.isoformat()})
        ),
        feed=moment_url("admin:publishing_post_site_at_feed", at),
        sitemap=moment_url("admin:publishing_post_site_at_sitemap", at),
        sitemap_section=sitemap_section,
        leave=reverse("admin:publishing_post_calendar"),
    )


class ShareForm(forms.Form):
    hours = forms.IntegerField(
        label=_("Works for (hours)"),
        min_value=1,
        max_value=int(previews.MAX_LIFETIME.total_seconds() // 3600),
        initial=24,
    )


def _share_key(at: datetime) -> str:
    return f"publishing:site-at-link:{at.isoformat()}"


def _moment_or_form(request):
    """Return the moment asked for, or the page that asks for one (with why); only for
    editors who may preview posts."""
    _may_see(request)
    zone = timezone.get_current_timezone()
    now = database_now()
    moment = read_moment(request.GET, zone=zone, now=now)
    if moment.at is None:
        context = {
            "problem": moment.problem,
            "zone": getattr(zone, "key", str(zone)),
            "day": request.GET.get("day", ""),
            "time": request.GET.get("time", ""),
            "title": _("See the site at a moment"),
        }
        return None, respond(request, "publishing/site_at/choose.html", context)
    return replace(moment, now=now), None


def site_at_view(model_admin, request):
    """The public index as it will be at the moment asked for (or the page that asks); with
    the form that makes a link to share it, and the link just made."""
    moment, asking = _moment_or_form(request)
    if asking is not None:
        return asking
    links = admin_links(moment.at)
    context = index_context(moment.at, links, page=request.GET.get("page"), note=moment.note)
    context["share_form"] = ShareForm()
    context["share_url"] = moment_url("admin:publishing_post_site_at_share", moment.at)
    context["shared_link"] = request.session.pop(_share_key(moment.at), None)
    response = respond(request, "publishing/site_at/index.html", context)
    # The share form posts back to this site: under "no-referrer" browsers send that post with
    # "Origin: null", which Django's CSRF check refuses. Other sites still learn nothing.
    response["Referrer-Policy"] = "same-origin"
    return response


def site_at_post_view(model_admin, request, slug: str):
    """One post as it will be at the moment asked for; not live then, the page says so."""
    moment, asking = _moment_or_form(request)
    if asking is not None:
        return asking
    links = admin_links(moment.at)
    context = post_context(moment.at, links, slug, note=moment.note, now=moment.now)
    return respond(request, "publishing/site_at/post.html", context)


def site_at_feed_view(model_admin, request):
    """The Atom feed as it will be at the moment asked for."""
    moment, asking = _moment_or_form(request)
    if asking is not None:
        return asking
    return SiteAtFeed(moment.at, admin_links(moment.at))(request)


def site_at_sitemap_view(model_admin, request, section: str | None = None):
    """The sitemap as it will be at the moment asked for: its index, or a page of a section."""
    moment, asking = _moment_or_form(request)
    if asking is not None:
        return asking
    return sitemap_at(request, moment.at, admin_links(moment.at), section)


def site_at_share_view(model_admin, request):
    """Make a link that shows the moment to someone without an account (POST), shown once
    on the moment's index."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    moment, asking = _moment_or_form(request)
    if asking is not None:
        return asking
    form = ShareForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
    else:
        hours = form.cleaned_data["hours"]
        path = shared_link(at=moment.at, user=request.user, expires_in=timedelta(hours=hours))
        request.session[_share_key(moment.at)] = {
            "url": request.build_absolute_uri(path),
            "hours": hours,
        }
    return HttpResponseRedirect(site_at_link(moment.at) + "#site-at-share")
