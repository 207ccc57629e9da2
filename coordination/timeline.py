"""The scheduler's timeline: runs, missed slots and leadership terms of a window, laid out.

The admin view queries the rows, this module places them on a plot of fixed width, the
template draws the marks as SVG. Keeping the layout pure (rows in, marks out) lets it be tested
without a database and keeps the template free of arithmetic. The number of marks is bounded
whatever the ledger holds: runs are capped, and missed slots that fall on the same pixel
column are drawn as one mark that says how many it stands for. Labels and hover texts are
words (:mod:`coordination.wording`): a lane is ``Scheduler (node web-1)``, a run took ``6 ms``
and started ``on time``, and every time names its zone.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo

from django.utils import timezone

from coordination.models import JobRun, LeadershipTerm
from coordination.wording import duration_text, lateness_text, local_time, scheduler_text

#: Width of the plot area, in SVG user units (the SVG scales to the page).
WIDTH = 1000
LANE_HEIGHT = 24
#: The most runs drawn in one window (the newest are kept).
MAX_RUNS = 3000
#: The windows an operator can pick, in hours.
WINDOWS = (1, 6, 24, 168)
LEADERS_LANE = "who led"
MISSED_LANE = "missed slots"

_TICK_STEPS = [timedelta(minutes=m) for m in (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)]


@dataclass(frozen=True)
class Mark:
    """One shape: a bar (``width`` > 0) or a marker at ``x`` in lane ``lane``."""

    x: float
    width: float
    lane: int
    css: str
    title: str

    @property
    def y(self) -> int:
        return self.lane * LANE_HEIGHT + 4


@dataclass(frozen=True)
class Lane:
    """One row of the plot: its label in words and, for a scheduler's lane, the raw node name."""

    label: str
    node: str = ""


@dataclass
class Timeline:
    start: datetime
    end: datetime
    lanes: list[Lane]
    marks: list[Mark] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)
    truncated: bool = False
    terms: list[LeadershipTerm] = field(default_factory=list)
    #: The zone's name of the axis labels (``CET``), shown beside the axis.
    zone_name: str = ""

    @property
    def width(self) -> int:
        return WIDTH

    @property
    def height(self) -> int:
        return len(self.lanes) * LANE_HEIGHT + 24

    @property
    def lane_rows(self) -> list[tuple[int, Lane]]:
        return [(index * LANE_HEIGHT, lane) for index, lane in enumerate(self.lanes)]


class _Scale:
    def __init__(self, start: datetime, end: datetime):
        self.start = start
        self.span = (end - start).total_seconds()

    def x(self, instant: datetime) -> float:
        offset = (instant - self.start).total_seconds() / self.span
        return round(min(max(offset, 0.0), 1.0) * WIDTH, 1)


def build(
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    runs: list[JobRun],
    terms: list[LeadershipTerm],
    zone: tzinfo,
    truncated: bool = False,
    show_job: bool = True,
) -> Timeline:
    """Lay out ``runs`` and ``terms`` between ``start`` and ``end`` (labels in ``zone``)."""
    scale = _Scale(start, end)
    runs = [run for run in runs if run.status != JobRun.Status.QUEUED]  # drawn once started
    nodes = sorted({run.node for run in runs if run.node} | {term.node for term in terms})
    lanes = [Lane(LEADERS_LANE), *(Lane(scheduler_text(n), n) for n in nodes), Lane(MISSED_LANE)]
    lane_of = {name: index for index, name in enumerate([LEADERS_LANE, *nodes, MISSED_LANE])}
    timeline = Timeline(
        start=start,
        end=end,
        lanes=lanes,
        truncated=truncated,
        terms=terms,
        zone_name=timezone.localtime(end, zone).tzname() or "",
    )

    for term in terms:
        timeline.marks.extend(_term_marks(term, scale, now, lane_of, zone))
    missed: dict[tuple[int, str], list[JobRun]] = defaultdict(list)
    for run in runs:
        if run.started_at is None or not run.node:
            # One mark per unit of width and reason, however many slots fall on it.
            missed[(int(scale.x(run.slot)), run.reason or run.status)].append(run)
            continue
        timeline.marks.append(_run_mark(run, scale, now, lane_of[run.node], zone, show_job))
    for (x, reason), grouped in sorted(missed.items()):
        timeline.marks.append(_missed_mark(x, reason, grouped, lane_of[MISSED_LANE], zone))
    timeline.ticks = _ticks(start, end, scale, zone)
    return timeline


def _when(instant: datetime | None, zone: tzinfo) -> str:
    return local_time(instant, zone)


def _run_mark(run: JobRun, scale: _Scale, now: datetime, lane: int, zone, show_job) -> Mark:
    x = scale.x(run.started_at)
    finished = run.finished_at or (now if run.status == JobRun.Status.RUNNING else None)
    width = max(scale.x(finished) - x, 2.0) if finished else 2.0
    parts = [run.job] if show_job else []
    parts.append(f"slot {_when(run.slot, zone)}")
    parts.append(f"{run.get_status_display()} on {scheduler_text(run.node)}")
    if run.trigger != JobRun.Trigger.SCHEDULE:
        parts.append(f"{run.get_trigger_display()} run")
    if run.attempt > 1:
        parts.append(f"attempt {run.attempt}")
    if run.trigger == JobRun.Trigger.SCHEDULE and run.attempt == 1:
        parts.append(f"started {lateness_text(run.lateness)}")
    if run.duration is not None:
        parts.append(f"took {duration_text(run.duration)}")
    if run.error:
        parts.append(run.error.strip().splitlines()[-1][:200])
    return Mark(x, width, lane, f"run {run.status.replace('_', '-')}", " · ".join(parts))


def _missed_mark(x: int, reason: str, runs: list[JobRun], lane: int, zone) -> Mark:
    slots = sorted(run.slot for run in runs)
    jobs = sorted({run.job for run in runs})
    if len(slots) == 1:
        title = f"{jobs[0]} · slot {_when(slots[0], zone)} · {reason}"
    else:
        title = (
            f"{len(slots)} slots {reason} ({', '.join(jobs[:3])}{'…' if len(jobs) > 3 else ''})"
            f" from {_when(slots[0], zone)} to {_when(slots[-1], zone)}"
        )
    css = "missed" if runs[0].status == JobRun.Status.MISSED else f"run {runs[0].status}"
    return Mark(x, 0.0, lane, css, title)


def _term_marks(term: LeadershipTerm, scale: _Scale, now: datetime, lane_of, zone) -> list[Mark]:
    x = scale.x(term.started_at)
    until = term.ended_at or now
    leader = scheduler_text(term.node)
    title = f"{leader} led the {term.group} group from {_when(term.started_at, zone)}"
    if term.ended_at is not None:
        title += f" to {_when(term.ended_at, zone)}: {term.get_end_reason_display()}"
        if term.detail:
            title += f" ({term.detail})"
    else:
        title += ", still leading"
    marks = [
        Mark(x, max(scale.x(until) - x, 2.0), lane_of[LEADERS_LANE], "term", title),
        Mark(x, 0.0, lane_of[term.node], "takeover", f"{leader} took over the {term.group} group"),
    ]
    if term.ended_at is not None:
        reason = term.end_reason.replace(" ", "-") or "unknown"
        marks.append(Mark(scale.x(term.ended_at), 0.0, lane_of[term.node], f"end {reason}", title))
    return marks


def _ticks(start: datetime, end: datetime, scale: _Scale, zone) -> list[tuple[float, str]]:
    """Axis labels at round local times, 4 to 12 of them."""
    span = end - start
    step = next((s for s in _TICK_STEPS if span / s <= 12), _TICK_STEPS[-1])
    local_start = timezone.localtime(start, zone)
    minutes = int(step.total_seconds() // 60)
    midnight = local_start.replace(hour=0, minute=0, second=0, microsecond=0)
    elapsed = int((local_start - midnight).total_seconds() // 60)
    first = midnight + timedelta(minutes=(elapsed // minutes + 1) * minutes)
    fmt = "%H:%M" if span <= timedelta(days=1) else "%a %H:%M"
    ticks = []
    tick = first
    while tick < end:
        ticks.append((scale.x(tick), timezone.localtime(tick, zone).strftime(fmt)))
        tick += step
    return ticks
