"""``jobs list``'s rows, decided from the states, the declared jobs and the database time."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from coordination.joblist import NOT_STARTED, listed_jobs, zoned
from coordination.registry import make_job
from coordination.schedules import Every, WhenDue, daily, every

NOW = datetime(2026, 12, 1, 21, 30, 15, tzinfo=UTC)


def job(name: str, schedule):
    def func(ctx):
        """Does nothing."""

    return make_job(func, name=name, group=name.split(".")[0], schedule=schedule)


class RaisesWhenAsked(Every):
    """Every minute at declaration; raises once ``broken`` is set."""

    broken = False

    def next_after(self, instant):
        if self.broken:
            raise OverflowError("date value out of range")
        return super().next_after(instant)


def summary(name: str, **fields) -> dict:
    return {
        "name": name,
        "group": name.split(".")[0],
        "schedule": "every 1 min",
        "next_due": None,
        "paused": False,
        "paused_reason": None,
        "run_requested": False,
        "retired": False,
        **fields,
    }


def test_declared_jobs_without_a_state_are_listed_not_started_yet_after_those_with_one():
    started = summary("a.started", next_due="2026-12-01T21:31:00+00:00")
    broken = RaisesWhenAsked(timedelta(minutes=1))
    declared = [
        job("a.started", every(timedelta(minutes=1))),
        job("a.minutely", every(timedelta(minutes=1))),
        job("b.daily", daily(at="06:00", tz="Europe/Berlin")),
        job("b.when_due", WhenDue(timedelta(seconds=60))),
        job("b.broken", broken),
    ]
    broken.broken = True
    rows = {row["name"]: row for row in listed_jobs([started], declared, now=NOW)}
    expected = {
        "a.started": ("active", "2026-12-01T21:31:00+00:00"),
        "a.minutely": (NOT_STARTED, "2026-12-01T21:31:00+00:00"),
        "b.daily": (NOT_STARTED, "2026-12-02T05:00:00+00:00"),
        "b.when_due": (NOT_STARTED, NOW.isoformat()),
        "b.broken": (
            f"{NOT_STARTED} (the scheduler could not plan it (OverflowError: date value out "
            "of range); fix its schedule, deploy, then resume it)",
            None,
        ),
    }
    assert {name: (row["state"], row["next_due"]) for name, row in rows.items()} == expected
    assert list(rows) == ["a.minutely", "a.started", "b.broken", "b.daily", "b.when_due"]
    assert set(rows["a.minutely"]) == set(rows["a.started"]) | {"state"} | {
        "last_status",
        "last_finished_at",
        "last_duration",
        "last_lateness",
        "last_node",
        "consecutive_failures",
        "missed",
        "current_run",
    }


@pytest.mark.parametrize(
    ("instant", "zone", "text"),
    [
        ("2026-12-01T22:00:00+00:00", "UTC", "2026-12-01 22:00:00 UTC"),
        ("2026-12-01T22:00:00+00:00", "Europe/Berlin", "2026-12-01 23:00:00 CET"),
        ("2026-07-01T22:00:00+00:00", "Asia/Tokyo", "2026-07-02 07:00:00 JST"),
        (None, "UTC", "none"),
    ],
)
def test_next_slots_are_shown_in_the_sites_zone_with_its_name(instant, zone, text):
    assert zoned(instant, ZoneInfo(zone)) == text
