"""Column headers, times in the editor's zone and status badges, shared by the admin's pages
(publishing's, and those of the apps that plug into it).

Every time the admin shows is in the editor's time zone (Django's current time zone), and a
column of times names that zone in its header.
"""

from django.utils import timezone
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe


def zone_name() -> str:
    """Return the editor's zone's name."""
    return timezone.get_current_timezone_name()


def with_zone(text: str):
    """Return ``text`` followed by the editor's zone's name, when shown."""
    return lazy(lambda: f"{text} ({zone_name()})", str)()


def column_with_zone(text: str):
    """Return a list column's header naming the zone, breakable after a "/" in its name.

    "(Asia/Tokyo)" would otherwise be the narrowest a time column can be, and four of them
    push the post list's last column out of view at 1,400 px.
    """

    def header():
        zone = format_html("{}", zone_name()).replace("/", "/<wbr>")
        return format_html("{} ({})", text, mark_safe(zone))

    return lazy(header, SafeString)()


def badge(kind: str, key: str, colour: str, label, *, title="") -> str:
    """Return a status badge: ``label`` in white on ``colour``, classed ``<kind>`` and
    ``<kind>-<key>`` (for tests and styles), with ``title`` as its tooltip when given."""
    return format_html(
        '<span class="{} {}-{}" style="display:inline-block;padding:1px 7px;'
        'border-radius:10px;color:#fff;background:{};white-space:nowrap"{}>{}</span>',
        kind,
        kind,
        key,
        colour,
        format_html(' title="{}"', title) if title else "",
        label,
    )
