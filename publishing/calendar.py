"""The calendar of what goes out: publishes, unpublishes, revisions (and what other apps add:
releases) by day, in the editor's zone.

Deciding is separate from reading: :func:`build` asks the selectors for the window's items
(three queries on the posts' ``(status, publish_at)`` and ``(status, unpublish_at)`` indexes
and the revisions' ``(status, publish_at)``, only the columns shown) and :func:`lay_out` puts
them on days. Each day keeps at most ``day_limit`` items and counts the rest, so a page for
10,000 items renders a few hundred. Another app adds its own kind of entry with
:func:`add_entry_kind` (its words, its links, and a function that reads its entries).
"""

import bisect
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from publishing import selectors


class Kind(enum.StrEnum):
    PUBLISH = "publish"
    UNPUBLISH = "unpublish"
    # Scheduled revisions of live posts: see revision_switches().
    REVISION = "revision"


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing that goes out: which post, what happens to it, and when (UTC).

    ``kind`` is one of :class:`Kind` or another app's (:func:`add_entry_kind`), whose entry's
    ``post_id`` is the id of its own thing (a release's), ``items`` the first posts' titles
    that go out with it and ``more_items`` how many others do.
    """

    kind: str
    post_id: int
    title: str
    at: datetime
    error: str = ""
    late: bool = False
    items: tuple[str, ...] = ()
    more_items: int = 0
    # Stopped, not failed: its ``error`` says what waits for an editor (a stopped release).
    waiting: bool = False

    @property
    def failed(self) -> bool:
        """A publish that failed (its ``error`` says why)."""
        return bool(self.error) and not self.waiting

    @property
    def stopped(self) -> bool:
        """Stopped (its ``error`` is the problem): it waits for an editor, nothing failed."""
        return bool(self.error) and self.waiting


@dataclass(frozen=True)
class EntryKind:
    """A kind of calendar entry another app adds.

    - ``entries(start, end, now)``: its entries before ``end`` (and late ones before
      ``start``), read in a few queries whatever their number.
    - ``label``: the word an entry shows; ``more_label(n)``: the "+N more" words.
    - ``entry_url(entry)``: the page of an entry's thing; ``list_url()``: the list of them.
    """

    name: str
    entries: Callable[[datetime, datetime, datetime], list[Entry]]
    label: str
    more_label: Callable[[int], str]
    entry_url: Callable[[Entry], str]
    list_url: Callable[[], str]


_kinds: dict[str, EntryKind] = {}


def add_entry_kind(kind: EntryKind) -> None:
    """Show ``kind``'s entries on the calendar (from the app's ``AppConfig.ready``)."""
    _kinds[kind.name] = kind


def entry_kind(name: str) -> EntryKind | None:
    """Return another app's kind of entry called ``name`` (None: one of publishing's own)."""
    return _kinds.get(name)


@dataclass
class Day:
    day: date
    entries: list[Entry] = field(default_factory=list)
    # Items beyond the day's limit, by kind: the "+N more" links.
    more: dict[str, int] = field(default_factory=dict)
    start: datetime | None = None  # the day's first instant, in the editor's zone
    end: datetime | None = None

    @property
    def total(self) -> int:
        return len(self.entries) + sum(self.more.values())


@dataclass
class Calendar:
    start: date
    zone: tzinfo
    weeks: list[list[Day]]
    overdue: list[Entry]
    overdue_more: dict[str, int]
    late: int
    failed: int
    stopped: int = 0

    @property
    def first_instant(self) -> datetime:
        return self.weeks[0][0].start


def midnight(day: date, zone: tzinfo) -> datetime:
    """Return the first instant of ``day`` in ``zone`` (a midnight in a DST gap moves on)."""
    return datetime.combine(day, time(), tzinfo=zone).astimezone(UTC).astimezone(zone)


def week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


#: The most weeks one calendar page shows.
MAX_WEEKS = 12
#: The first and last days a calendar page may start at. Its window, the pages before and
#: after it (its links) and every day's bounds in any zone (up to 14 hours from UTC) stay
#: between ``date.min`` and ``date.max``, which Python's dates cannot leave.
EARLIEST_START = date.min + timedelta(weeks=MAX_WEEKS + 1)
LATEST_START = date.max - timedelta(weeks=2 * MAX_WEEKS + 2)


def clamp_start(day: date) -> date:
    """Return ``day``, or the earliest or latest day a calendar page can start at.

    An editor who types a start at the ends of time (``0001-01-01``, ``9999-12-31``) gets
    the first or last page the calendar has, not an error.
    """
    return min(max(day, EARLIEST_START), LATEST_START)


def revision_switches(start: datetime, end: datetime, now: datetime) -> list[Entry]:
    """Return the scheduled revision switches before ``end`` (one indexed query).

    Like publishes, a switch due before ``start`` that has not happened is overdue and listed.
    The entry names the revision's title, the one that will go live.
    """
    return [
        Entry(Kind.REVISION, post_id, title, at, "", at <= now)
        for post_id, title, at in selectors.calendar_revisions(start, end)
    ]


def build(*, start: date, weeks: int, zone: tzinfo, now: datetime, day_limit: int) -> Calendar:
    """Return ``weeks`` weeks from the Monday of ``start``'s week, in ``zone``.

    ``start`` is clamped (:func:`clamp_start`) and ``weeks`` must be at most ``MAX_WEEKS``.

    ``now`` is the database's time: a scheduled publish (or a live post's unpublish) whose
    time has passed is late. Items due before the window that have not happened are overdue
    and listed apart, so nothing late hides in an earlier week.
    """
    first = week_start(clamp_start(start))
    days = [first + timedelta(days=n) for n in range(7 * weeks + 1)]
    bounds = [midnight(d, zone).astimezone(UTC) for d in days]
    window_start, window_end = bounds[0], bounds[-1]
    entries = [
        Entry(Kind.PUBLISH, pk, title, at, error, at <= now)
        for pk, title, at, error in selectors.calendar_publishes(window_start, window_end)
    ]
    entries += [
        Entry(Kind.UNPUBLISH, pk, title, at, "", published and at <= now)
        for pk, title, at, published in selectors.calendar_unpublishes(window_start, window_end)
    ]
    entries += revision_switches(window_start, window_end, now)
    for kind in _kinds.values():
        entries += kind.entries(window_start, window_end, now)
    entries.sort(key=lambda e: (e.at, e.post_id))
    return lay_out(entries, days[:-1], bounds, zone, day_limit)


def lay_out(
    entries: list[Entry], days: list[date], bounds: list[datetime], zone: tzinfo, day_limit: int
) -> Calendar:
    """Put sorted ``entries`` on ``days`` (``bounds`` are their starts and the window's end)."""
    grid = [
        Day(d, start=bounds[i].astimezone(zone), end=bounds[i + 1].astimezone(zone))
        for i, d in enumerate(days)
    ]
    overdue: list[Entry] = []
    overdue_more: dict[str, int] = {}
    late = failed = stopped = 0
    for entry in entries:
        failed += entry.failed
        stopped += entry.stopped
        late += entry.late and not entry.error
        index = bisect.bisect_right(bounds, entry.at) - 1
        if index < 0:
            target, more = overdue, overdue_more
        elif index < len(grid):
            target, more = grid[index].entries, grid[index].more
        else:
            continue
        if len(target) < day_limit:
            target.append(entry)
        else:
            more[entry.kind] = more.get(entry.kind, 0) + 1
    weeks = [grid[n : n + 7] for n in range(0, len(grid), 7)]
    return Calendar(days[0], zone, weeks, overdue, overdue_more, late, failed, stopped)
