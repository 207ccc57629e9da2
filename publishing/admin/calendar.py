"""The admin's calendar page: what goes out in the coming weeks, in the editor's zone.

Reached from the post list (``admin:publishing_post_calendar``); anyone who may view posts
may see it. :mod:`publishing.calendar` decides what goes on which day; this module turns
that into links and labels for the template. Plain HTML and CSS: every item and "+N more"
is a link, so the page works with the keyboard and without JavaScript.
"""

from datetime import date, datetime, timedelta
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from coordination.clock import database_now
from publishing import calendar, previews
from publishing.admin.site_at import site_at_link
from publishing.calendar import Kind
from publishing.conf import settings
from publishing.models import Post

S = Post.Status
MAX_WEEKS = calendar.MAX_WEEKS


#: How far before the next day's first instant a day's "See the site then" shows the site.
END_OF_DAY = timedelta(microseconds=1)


def _list_url(**params: str) -> str:
    return f"{reverse('admin:publishing_post_changelist')}?{urlencode(params)}"


def _iso(value: datetime) -> str:
    return value.isoformat()


def more_url(kind: str, start: datetime | None, end: datetime) -> str | None:
    """Return the post list filtered to ``kind`` items in ``[start, end)`` (None: no list)."""
    if kind == Kind.PUBLISH:
        params = {"status__exact": S.SCHEDULED, "publish_at__lt": _iso(end)}
        if start is not None:
            params["publish_at__gte"] = _iso(start)
        return _list_url(**params)
    if kind == Kind.UNPUBLISH:
        if start is None:  # overdue: only live posts are still to be taken down
            return _list_url(status__exact=S.PUBLISHED, unpublish_at__lt=_iso(end))
        return _list_url(
            status__in=f"{S.SCHEDULED},{S.PUBLISHED}",
            unpublish_at__gte=_iso(start),
            unpublish_at__lt=_iso(end),
        )
    other = calendar.entry_kind(kind)
    return other.list_url() if other is not None else None


MORE_LABELS = {
    Kind.PUBLISH: lambda n: ngettext("+%d more publish", "+%d more publishes", n) % n,
    Kind.UNPUBLISH: lambda n: ngettext("+%d more unpublish", "+%d more unpublishes", n) % n,
    Kind.REVISION: lambda n: ngettext("+%d more revision", "+%d more revisions", n) % n,
}
KIND_LABELS = {
    Kind.PUBLISH: _("publish"),
    Kind.UNPUBLISH: _("unpublish"),
    Kind.REVISION: _("revision"),
}


def _kind_label(kind: str) -> str:
    other = calendar.entry_kind(kind)
    return other.label if other is not None else KIND_LABELS[kind]


def _more_label(kind: str, count: int) -> str:
    other = calendar.entry_kind(kind)
    return other.more_label(count) if other is not None else MORE_LABELS[kind](count)


def _item(entry: calendar.Entry, zone, with_date: bool = False) -> dict:
    local = entry.at.astimezone(zone)
    classes = ["entry", str(entry.kind)]
    if entry.failed:
        classes.append("failed")
    elif entry.stopped:
        classes.append("stopped")
    elif entry.late:
        classes.append("late")
    return {
        "classes": " ".join(classes),
        # Each time names its zone's abbreviation too: it changes on a day the clocks do.
        "time": local.strftime("%Y-%m-%d %H:%M %Z" if with_date else "%H:%M %Z"),
        "iso": local.isoformat(),
        "kind": _kind_label(entry.kind),
        "title": entry.title or _("(untitled)"),
        "url": _entry_url(entry),
        "items": entry.items,
        "more_items": entry.more_items,
        "failed": entry.failed,
        "stopped": entry.stopped,
        "late": entry.late and not entry.error,
        "error": entry.error,
    }


def _entry_url(entry: calendar.Entry) -> str:
    other = calendar.entry_kind(entry.kind)
    if other is not None:
        return other.entry_url(entry)
    return reverse("admin:publishing_post_change", args=[entry.post_id])


def _more(more: dict[str, int], start, end) -> list[dict]:
    return [
        {"label": _more_label(kind, count), "url": more_url(kind, start, end)}
        for kind, count in more.items()
    ]


def _start(request, today: date) -> date:
    """Return the ``?start=`` day, clamped to the days the calendar has; today if none."""
    try:
        return calendar.clamp_start(date.fromisoformat(request.GET.get("start", "")))
    except ValueError:
        return today


def _weeks(request) -> int:
    try:
        weeks = int(request.GET.get("weeks", ""))
    except ValueError:
        weeks = int(settings.PUBLISH_CALENDAR_WEEKS)
    return max(1, min(MAX_WEEKS, weeks))


def calendar_view(model_admin, request):
    """Render the calendar for ``?start=YYYY-MM-DD`` (default: this week) and ``?weeks=N``."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    zone = timezone.get_current_timezone()
    now = database_now()
    today = now.astimezone(zone).date()
    weeks = _weeks(request)
    may_preview = previews.can_preview(request.user)
    built = calendar.build(
        start=_start(request, today),
        weeks=weeks,
        zone=zone,
        now=now,
        day_limit=int(settings.PUBLISH_CALENDAR_DAY_LIMIT),
    )
    grid = [
        [
            {
                "date": day.day,
                "today": day.day == today,
                "past": day.day < today,
                "items": [_item(e, zone) for e in day.entries],
                "more": _more(day.more, day.start, day.end),
                # The site as the day leaves it: its last instant (a past day has passed).
                "site_at_url": site_at_link(day.end - END_OF_DAY)
                if day.day >= today and may_preview
                else "",
            }
            for day in week
        ]
        for week in built.weeks
    ]
    first = built.start

    def page(offset_weeks: int) -> str:
        start = first + timedelta(weeks=offset_weeks)
        return "?" + urlencode({"start": start.isoformat(), "weeks": weeks})

    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": _("Calendar of what goes out"),
        "zone_name": timezone.get_current_timezone_name(),
        "now": now.astimezone(zone),
        "weeks": grid,
        "first": first,
        "last": first + timedelta(weeks=weeks, days=-1),
        "overdue": [_item(e, zone, with_date=True) for e in built.overdue],
        "overdue_more": _more(built.overdue_more, None, built.first_instant),
        "late_count": built.late,
        "failed_count": built.failed,
        "stopped_count": built.stopped,
        "previous_url": page(-weeks),
        "next_url": page(weeks),
        "this_week_url": "?" + urlencode({"weeks": weeks}),
        "list_url": reverse("admin:publishing_post_changelist"),
        "may_preview": may_preview,
    }
    return TemplateResponse(request, "admin/publishing/post/calendar.html", context)
