"""The time zones an editor may choose, and the zone an editor's admin requests use."""

import logging
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.conf import settings

logger = logging.getLogger(__name__)


@cache
def zone_names() -> tuple[str, ...]:
    """Return the IANA zone names this host knows, sorted (read once: tzdata is static)."""
    # "localtime" and the like name the host's zone, which means nothing to an editor.
    return tuple(sorted(z for z in available_timezones() if "/" in z or z == "UTC"))


def zone_choices() -> list[tuple[str, str]]:
    """Return choices for a zone field: blank (the site's zone) and every IANA zone."""
    return [("", f"The site's zone ({settings.TIME_ZONE})"), *((z, z) for z in zone_names())]


def zone_or_none(name: str) -> ZoneInfo | None:
    """Return the zone called ``name``, or None (logged) when this host does not know it.

    A stored zone can disappear when tzdata drops or renames one; the editor then sees the
    site's zone rather than an error page.
    """
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        logger.warning("editor time zone %r is unknown here; using the site's zone", name)
        return None
