"""Schedules at the ends of the calendar: declared or refused, never raising at run time.

A schedule the declaration accepts computes its slots for any instant Python can represent
(0001-01-01 to 9999-12-31 UTC): the next slot, or ``None`` once the calendar has no more. A
schedule that would overflow is refused where it is declared, with what to change.
"""

from datetime import UTC, datetime, timedelta
from zoneinfo import available_timezones

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordination.registry import JobDeclarationError, JobRegistry, make_job
from coordination.schedules import (
    CALENDAR_END,
    InvalidSchedule,
    Schedule,
    WhenDue,
    cron,
    daily,
    every,
    every_minutes,
    hourly,
    monthly,
    weekly,
)

NOW = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)
ZONES = sorted(available_timezones())


def job_func(ctx):
    """A job that does nothing."""


@pytest.mark.parametrize(
    ("schedule", "instant"),
    [
        (every(timedelta(hours=1)), datetime(9999, 12, 31, 23, 30, tzinfo=UTC)),
        (every(timedelta(days=400)), datetime(9999, 9, 26, tzinfo=UTC)),
        (daily(at="00:00"), datetime(9999, 12, 31, 12, tzinfo=UTC)),
        (daily(at="00:00", tz="Asia/Tokyo"), datetime(9999, 12, 31, 16, tzinfo=UTC)),
        (cron("0 0 29 2 *"), datetime(9996, 3, 1, tzinfo=UTC)),
        (WhenDue(timedelta(days=2)), datetime(9999, 12, 31, tzinfo=UTC)),
        (hourly(), CALENDAR_END),
    ],
    ids=str,
)
def test_next_after_at_the_far_end_of_the_calendar_is_none(schedule, instant):
    assert schedule.next_after(instant) is None


def test_the_slots_of_a_schedule_end_with_the_calendar():
    schedule = every(timedelta(days=1))
    start = datetime(9999, 12, 28, tzinfo=UTC)
    assert schedule.slots_between(start, CALENDAR_END) == [
        datetime(9999, 12, day, tzinfo=UTC) for day in (28, 29, 30, 31)
    ]
    assert list(schedule.iter_slots(start, CALENDAR_END))[-1] == datetime(9999, 12, 31, tzinfo=UTC)


def test_a_zone_west_of_utc_at_the_start_of_the_calendar_gives_a_later_slot():
    schedule = daily(at="06:00", tz="America/New_York")
    assert schedule.next_after(datetime(1, 1, 1, tzinfo=UTC)) == datetime(
        1, 1, 1, 10, 56, 2, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        (
            every(timedelta(days=3_000_000)),
            r"every\(timedelta\(days=3000000\)\): no slot falls before the end of the "
            r"calendar \(9999-12-31\).*use a shorter interval",
        ),
        (
            every(timedelta(days=999_999_999)),
            r"no slot falls before the end of the calendar",
        ),
        (
            WhenDue(timedelta(days=3_000_000)),
            r"WhenDue\(timedelta\(days=3000000\)\): no slot falls before the end",
        ),
    ],
    ids=["3-million-days", "largest-timedelta", "when-due"],
)
def test_a_schedule_that_would_overflow_is_a_declaration_error(schedule, message):
    with pytest.raises(JobDeclarationError, match=message) as caught:
        make_job(job_func, name="calendar.too_far", schedule=schedule)
    assert "calendar.too_far" in str(caught.value)
    assert "\n" not in str(caught.value)


class Raises(Schedule):
    """A schedule whose slots cannot be computed from ``raise_after`` to ``until``."""

    def __init__(self, *, raise_after: datetime, until=CALENDAR_END, backwards: bool = False):
        self.raise_after = raise_after
        self.until = until
        self.backwards = backwards

    def next_after(self, instant):
        if self.raise_after <= instant <= self.until:
            raise ZeroDivisionError("slot arithmetic went wrong")
        if self.backwards:
            return instant - timedelta(minutes=1)
        return (
            instant + timedelta(minutes=1) if instant < CALENDAR_END - timedelta(days=1) else None
        )

    def describe(self):
        return "a broken schedule"

    def fingerprint(self):
        return f"raises:{self.raise_after.isoformat()}:{self.backwards}"


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        (
            Raises(raise_after=datetime.now(UTC) + timedelta(minutes=500)),
            r"a broken schedule: computing its slots failed \(ZeroDivisionError: slot arithmetic "
            r"went wrong, after .*\); next_after\(\) must return a later instant or None",
        ),
        (
            Raises(raise_after=datetime(9999, 1, 1, tzinfo=UTC)),
            r"a broken schedule: computing its slots failed \(ZeroDivisionError: slot arithmetic "
            r"went wrong, after 9999-12-30T12:00",
        ),
        (
            Raises(raise_after=CALENDAR_END, backwards=True),
            r"a broken schedule: next_after\(.*\) returned .*, not a later instant",
        ),
    ],
    ids=["within-a-thousand-slots", "at-the-far-end", "not-later"],
)
def test_a_schedule_whose_slots_cannot_be_computed_is_a_declaration_error(schedule, message):
    registry = JobRegistry()
    with pytest.raises(JobDeclarationError, match=message):
        make_job(job_func, name="calendar.broken", schedule=schedule)
    assert registry.all() == []


def test_slots_verified_from_the_declaration_time():
    broken_tomorrow = Raises(
        raise_after=datetime(2026, 12, 2, tzinfo=UTC), until=datetime(2026, 12, 3, tzinfo=UTC)
    )
    with pytest.raises(InvalidSchedule, match="computing its slots failed"):
        broken_tomorrow.verify(now=NOW)
    # Its thousandth slot from a day earlier still comes before it breaks.
    broken_tomorrow.verify(now=NOW - timedelta(days=1))


# Property: any accepted schedule computes a later slot or None, from year 1 to 9999 ---------

zones = st.sampled_from(ZONES)
times = st.tuples(st.integers(0, 23), st.integers(0, 59)).map(lambda t: f"{t[0]:02d}:{t[1]:02d}")
cron_fields = st.tuples(
    st.sampled_from(["*", "0", "*/15", "5,35", "59"]),
    st.sampled_from(["*", "0", "2", "3", "23", "1-5"]),
    st.sampled_from(["*", "1", "15", "29", "31", "L"]),
    st.sampled_from(["*", "2", "1,7", "12"]),
    st.sampled_from(["*", "0", "1-5", "SAT", "7"]),
).map(" ".join)


def _accepted(build):
    """Return the schedule ``build()`` makes when a declaration accepts it, else None."""
    try:
        schedule = build()
        make_job(job_func, name="calendar.any", schedule=schedule)
    except (InvalidSchedule, JobDeclarationError):
        return None
    return schedule


schedules = st.one_of(
    st.builds(
        lambda seconds: _accepted(lambda: every(timedelta(seconds=seconds))),
        st.integers(1, 999_999_999 * 86_400),
    ),
    st.builds(lambda n: _accepted(lambda: every_minutes(n)), st.integers(1, 1440)),
    st.builds(lambda m, tz: _accepted(lambda: hourly(m, tz)), st.integers(0, 59), zones),
    st.builds(lambda at, tz: _accepted(lambda: daily(at, tz)), times, zones),
    st.builds(
        lambda day, at, tz: _accepted(lambda: weekly(day, at, tz)), st.integers(0, 6), times, zones
    ),
    st.builds(
        lambda day, at, tz: _accepted(lambda: monthly(day, at, tz)),
        st.integers(1, 28),
        times,
        zones,
    ),
    st.builds(lambda expr, tz: _accepted(lambda: cron(expr, tz)), cron_fields, zones),
).filter(lambda schedule: schedule is not None)

instants = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)
).map(lambda naive: naive.replace(tzinfo=UTC))
edges = st.sampled_from(
    [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(1, 1, 1, 23, 59, tzinfo=UTC),
        datetime(9999, 12, 31, tzinfo=UTC),
        datetime(9999, 12, 31, 12, tzinfo=UTC),
        CALENDAR_END,
    ]
)


@settings(max_examples=300)
@given(schedule=schedules, instant=st.one_of(instants, edges))
def test_an_accepted_schedule_gives_a_later_slot_or_none_anywhere_in_the_calendar(
    schedule, instant
):
    slot = schedule.next_after(instant)
    assert slot is None or (slot > instant and slot.utcoffset() == timedelta(0))
