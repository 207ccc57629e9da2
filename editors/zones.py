"""The time zones an editor may choose, and the zone an editor's admin requests use."""

import logging
from functools import cache
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.conf import settings

logger = logging.getLogger(__name__)


@cache
def zone_names() -> tuple[str, ...]:
    """Return the IANA zone names this host knows, sorted (read once: tzdata is static)."""
    # "localtime" and the like name the host's zone, which means nothing to an editor.
    return tuple(sorted(z for z in available_timezones() if "/" in z or z == "UTC"))


@cache
def current_zone_names() -> tuple[str, ...]:
    """Return the zones a picker offers: tzdata's ``zone.tab`` (one per region) and UTC.

    ``zone.tab`` leaves out old names kept for compatibility (``Asia/Calcutta``,
    ``US/Eastern``) and the ``Etc/GMT+1`` zones, whose signs are the reverse of what they
    seem; every place a person lives in has a current name there.
    """
    table = resources.files("tzdata").joinpath("zoneinfo", "zone.tab").read_text()
    names = {
        line.split("\t")[2] for line in table.splitlines() if line and not line.startswith("#")
    }
    return tuple(sorted(names & set(zone_names()))) + ("UTC",)


@cache
def old_zone_names() -> dict[str, str]:
    """Return each old zone name the picker leaves out mapped to the current zone it names.

    Read from tzdata's links (``L Asia/Kolkata Asia/Calcutta``): browsers still report some
    old names (Chromium says ``Asia/Calcutta``), which the picker offers as the current one.
    """
    offered = set(current_zone_names())
    data = resources.files("tzdata").joinpath("zoneinfo", "tzdata.zi").read_text()
    links = (line.split() for line in data.splitlines() if line.startswith("L "))
    return {
        alias: target for _, target, alias in links if target in offered and alias not in offered
    }


def zone_label(name: str) -> str:
    """How a zone reads in the picker: ``Argentina / Buenos Aires`` under America."""
    place = name.split("/", 1)[1] if "/" in name else name
    return place.replace("_", " ").replace("/", " / ")


def grouped_zone_choices(current: str = "") -> list:
    """Return picker choices: the site's zone, UTC, then every current zone by region.

    ``current``, a stored zone the picker would not offer (an old name), is kept at the top
    so saving the form unchanged never changes or refuses it.
    """
    regions: dict[str, list[tuple[str, str]]] = {}
    for name in current_zone_names():
        if "/" in name:
            regions.setdefault(name.split("/", 1)[0], []).append((name, zone_label(name)))
    choices: list = [("", f"The site's zone ({settings.TIME_ZONE})")]
    if current and current not in current_zone_names():
        choices.append((current, f"{current} (an older name; pick its current one below)"))
    choices.append(("UTC", "UTC"))
    for region in sorted(regions):
        choices.append((region, sorted(regions[region], key=lambda choice: choice[1])))
    return choices


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
