"""What the invariants read besides plain counts: fault windows, log lines, faults' problems."""

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from devtools.chaos.clock import db_epoch
from devtools.chaos.config import (
    CATCHUP_JOB,
    CLAIMED_ELSEWHERE,
    FAULT_SLACK,
    JOBS,
    LATE_BOUND,
    LOG_STAMP,
    PROBE_JOB,
    WORKER_DISRUPTIONS,
    WORKER_FAULT_SLACK,
)
from devtools.chaos.databases import window_max
from devtools.chaos.queries import CHAOS_OR_PUBLISH
from devtools.chaos.soak import Soak


class Disturbance(NamedTuple):
    """A time (epoch seconds) when faults may have kept posts (``post_id``'s, or any) waiting."""

    start: float
    end: float
    post_id: int | None = None

    def explains(self, post_id: int, due: float, lateness: float) -> bool:
        """Whether the post was still on time when it began and went live before it ended.

        A post already later than LATE_BOUND when the faults began was not late because of
        them, and one that went live long after the group recovered was not either.
        """
        return (
            self.post_id in (None, post_id)
            and self.start - LATE_BOUND <= due
            and due + lateness <= self.end
        )


def disturbances(soak: Soak) -> list[Disturbance]:
    """From each fault that disrupts publishing until FAULT_SLACK after it ended, overlapping
    ones merged (a post may wait through several); a rowlock's for its own post only."""
    spans = sorted(
        (f.wall, f.ended_wall() + FAULT_SLACK) for f in soak.faults if f.disrupts_publishing
    )
    merged: list[Disturbance] = []
    for start, end in spans:
        if merged and start <= merged[-1].end:
            merged[-1] = merged[-1]._replace(end=max(end, merged[-1].end))
        else:
            merged.append(Disturbance(start, end))
    held = [
        Disturbance(f.wall, f.ended_wall() + FAULT_SLACK, f.post_id)
        for f in soak.faults
        if f.post_id is not None
    ]
    return merged + held


def merge_spans(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Return ``spans`` (start, end) sorted, the overlapping ones merged."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def worker_disturbances(soak: Soak) -> list[tuple[float, float]]:
    """The times (epoch seconds, merged) when faults may have held up a queued run: each fault
    of WORKER_DISRUPTIONS that was not skipped, until WORKER_FAULT_SLACK after it ended; and
    the start-up, until every worker process served."""
    return merge_spans(
        [(0.0, soak.ready_wall)]
        + [
            (f.wall, f.ended_wall() + WORKER_FAULT_SLACK)
            for f in soak.faults
            if f.kind in WORKER_DISRUPTIONS and not f.skipped
        ]
    )


def waited_behind(spans: list[tuple[float, float]], queued: float, started: float) -> bool:
    """Whether a run queued at ``queued`` and started at ``started`` waited in any of
    ``spans``."""
    return any(start <= started and queued <= end for start, end in spans)


def lone_commits_near_probe_start(soak: Soak) -> int:
    """How many lone posts committed within 15 ms of their probe run's start: the moment a
    wake-up can go missing (the others tested the wake-up, but not that race)."""
    near = 0
    for _, slot, committed in soak.lone_commits:
        if soak.db.vendor == "mysql":  # naive times in UTC, as Django stores them there
            slot = slot.astimezone(UTC).replace(tzinfo=None)
        started = soak.scalar(
            "SELECT started_at FROM coordination_jobrun WHERE job = %s AND slot = %s",
            (PROBE_JOB, slot),
        )
        if started is not None and abs(db_epoch(started) - db_epoch(slot) - committed) < 0.015:
            near += 1
    return near


def log_stamp(text: str) -> float:
    """Return a log line's time stamp (``2026-12-07 15:47:56,852``, local time) as epoch seconds."""
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def claimed_elsewhere_lines(soak: Soak) -> list[float]:
    """Return the times of the schedulers' "already claimed elsewhere" lines (epoch seconds)."""
    stamps = []
    for path in soak.workdir.glob("chaos-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            match = LOG_STAMP.match(line)
            if match and CLAIMED_ELSEWHERE in line:
                stamps.append(log_stamp(match[1]))
    return sorted(stamps)


def log_lines_between(soak: Soak, start: float, end: float, *, mentioning: tuple[str, ...]):
    """Return the nodes' log lines stamped within ``[start, end]`` (epoch seconds) that mention
    any of ``mentioning``, in time order, each led by its log's name: a fault's own account,
    printed beside its problem, since a CI log keeps only the nodes' last warnings."""
    found = []
    for path in soak.workdir.glob("chaos-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            match = LOG_STAMP.match(line)
            if not match or not any(word in line for word in mentioning):
                continue
            stamp = log_stamp(match[1])
            if start <= stamp <= end:
                found.append((stamp, f"{path.stem}: {line[:240]}"))
    return [line for _, line in sorted(found)]


def kind_problems(soak: Soak, kind: str, noun: str = "stops") -> tuple[bool, str]:
    """Held when no fault of ``kind`` recorded a problem; the detail names the first few."""
    faults = [f for f in soak.faults if f.kind == kind]
    problems = [f"{f.target}: {f.problem}" for f in faults if f.problem]
    return not problems, "; ".join(problems[:2]) or f"{len(faults)} {noun}"


def bounded_kind(soak: Soak, kind: str) -> tuple[bool, str]:
    """Held when no fault of ``kind`` recorded a problem; the detail gives the worst gap."""
    held, detail = kind_problems(soak, kind, "faults")
    gaps = [f.lead_gap for f in soak.faults if f.kind == kind and f.lead_gap is not None]
    return held, detail + (f"; worst {max(gaps):.2f} s after the kill" if gaps else "")


def slot_gaps(soak: Soak) -> list[str]:
    """Return each gap between two scheduled slots of a job that are not a period apart.

    Manual runs (run now) are at the instant they were asked for, off the schedule's grid, and
    left out. A catch-up must not lose the slots before its job's first row, either.
    """
    gaps = []
    for job, spec in JOBS.items():
        slots = [
            row[0]
            for row in soak.query(
                "SELECT slot FROM coordination_jobrun WHERE job = %s"
                f" AND {soak.db.q('trigger')} <> 'manual' ORDER BY slot",
                (job,),
            )
        ]
        for a, b in zip(slots, slots[1:], strict=False):
            if b - a != timedelta(seconds=spec.period):
                gaps.append(f"{job} {a:%H:%M:%S}->{b:%H:%M:%S}")
        if (
            job == CATCHUP_JOB
            and soak.catchup_from
            and slots
            and slots[0] > soak.catchup_from
            and not _ledger_pruned(soak)
        ):
            gaps.append(f"{job} {soak.catchup_from:%H:%M:%S}->{slots[0]:%H:%M:%S} (catch-up)")
    return gaps


#: The built-in job that prunes the ledger to its newest runs per job (hourly, at :23).
PRUNE_JOB = "run_retention.prune"


def _ledger_pruned(soak: Soak) -> bool:
    """Whether the ledger's retention job ran during the soak: it keeps the newest runs of
    each job, so a catch-up's oldest missed slots are gone by design once it has run (a soak
    whose window holds minute 23 of an hour)."""
    return bool(
        soak.query(
            "SELECT 1 FROM coordination_jobrun WHERE job = %s AND started_at IS NOT NULL",
            (PRUNE_JOB,),
        )
    )


def busiest_minutes(soak: Soak) -> list[tuple[str, int]]:
    """Return (job, the most scheduled runs it started in any 60 s) for the chaos and publish
    jobs."""
    started = defaultdict(list)
    for job, at in soak.query(
        f"SELECT job, started_at FROM coordination_jobrun WHERE {CHAOS_OR_PUBLISH}"
        f" AND {soak.db.q('trigger')} <> 'manual' AND started_at IS NOT NULL"
        " ORDER BY job, started_at",
        {"publish": soak.publish_job},
    ):
        started[job].append(at)
    return [(job, window_max(times, timedelta(seconds=60))) for job, times in started.items()]
