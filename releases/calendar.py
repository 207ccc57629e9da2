"""Releases on the editors' calendar: one entry each, with the first of its posts' titles.

A kind of entry of publishing's calendar (:func:`publishing.calendar.add_entry_kind`). A
stopped release carries its problem and is shown stopped (it waits for an editor), not failed;
one past its time that has not gone out is late and listed, like the publishes.
"""

from datetime import datetime

from django.db.models import Count, F, Window
from django.db.models.functions import RowNumber
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from publishing.calendar import Entry, EntryKind
from releases.models import Release, ReleaseItem

KIND = "release"
#: How many of a release's posts its calendar entry names.
ITEMS_SHOWN = 5


def scheduled_releases(end: datetime) -> list[tuple]:
    """Return (id, name, release_at, problem) of scheduled releases before ``end``.

    No lower bound, like the publishes: one due before the window has not gone out, and is
    listed late. One range scan of the releases' ``(status, release_at)`` index.
    """
    return list(
        Release.objects.filter(status=Release.Status.SCHEDULED, release_at__lt=end)
        .order_by("release_at", "id")
        .values_list("id", "name", "release_at", "problem")
    )


def item_titles(release_ids: list[int], shown: int) -> dict[int, tuple[list[str], int]]:
    """Return, for each release, its first ``shown`` items' titles and how many more it has.

    Two queries whatever the releases' sizes: the counts, and the first items of each
    (numbered per release by a window function, so a release of 10,000 sends ``shown``).
    """
    if not release_ids:
        return {}
    items = ReleaseItem.objects.filter(release_id__in=release_ids)
    counts = dict(items.values("release_id").annotate(n=Count("id")).values_list("release_id", "n"))
    first = (
        items.annotate(
            place=Window(RowNumber(), partition_by=F("release_id"), order_by=F("id").asc())
        )
        .filter(place__lte=shown)
        .order_by("release_id", "place")
        .values_list("release_id", "post_title")
    )
    titles: dict[int, list[str]] = {pk: [] for pk in release_ids}
    for release_id, title in first:
        titles[release_id].append(title)
    return {pk: (names, counts.get(pk, 0) - len(names)) for pk, names in titles.items()}


def entries(start: datetime, end: datetime, now: datetime) -> list[Entry]:
    """Return the scheduled releases before ``end``, one entry each with its posts (two queries)."""
    rows = scheduled_releases(end)
    titles = item_titles([pk for pk, *_ in rows], ITEMS_SHOWN)
    return [
        Entry(
            KIND,
            pk,
            name,
            at,
            problem,
            at <= now,
            items=tuple(titles.get(pk, ([], 0))[0]),
            more_items=titles.get(pk, ([], 0))[1],
            waiting=True,
        )
        for pk, name, at, problem in rows
    ]


ENTRY_KIND = EntryKind(
    name=KIND,
    entries=entries,
    label=_("release"),
    more_label=lambda n: ngettext("+%d more release", "+%d more releases", n) % n,
    entry_url=lambda entry: reverse("admin:releases_release_change", args=[entry.post_id]),
    list_url=lambda: f"{reverse('admin:releases_release_changelist')}?status__exact=scheduled",
)
