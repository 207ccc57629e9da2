"""Tests for coordination.schedules: slot arithmetic, validation, text and DST behaviour.

These tests need neither Django nor a database.
"""

import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from coordination import schedules
from coordination.schedules import (
    Cron,
    Every,
    InvalidSchedule,
    Schedule,
    WhenDue,
    coerce,
    cron,
    daily,
    every,
    every_minutes,
    hourly,
    monthly,
    weekly,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def utc(*args: int) -> datetime:
    """Return a UTC datetime."""
    return datetime(*args, tzinfo=UTC)


def chain(schedule: Schedule, start: datetime, count: int) -> list[datetime]:
    """Return ``count`` slots by calling next_after repeatedly from ``start``."""
    slots = []
    instant = start
    for _ in range(count):
        instant = schedule.next_after(instant)
        slots.append(instant)
    return slots


def assert_strictly_increasing(slots: list[datetime]) -> None:
    """Assert the slots are strictly increasing (hence free of duplicates)."""
    assert all(a < b for a, b in zip(slots, slots[1:], strict=False)), slots


# Every ----------------------------------------------------------------------------------


class TestEvery:
    def test_slots_are_anchored_at_the_epoch(self):
        schedule = every(timedelta(minutes=7))
        from_first = chain(schedule, utc(2026, 5, 1, 10, 0, 3), 20)
        from_second = chain(schedule, utc(2026, 5, 1, 10, 13, 59, 123456), 18)
        assert from_first[2:] == from_second
        for slot in from_first:
            assert (slot - schedules.EPOCH) % timedelta(minutes=7) == timedelta(0)

    def test_hourly_interval_fires_at_top_of_utc_hour(self):
        assert every(timedelta(hours=1)).next_after(utc(2026, 5, 1, 10, 17)) == utc(2026, 5, 1, 11)

    def test_next_after_is_strictly_after(self):
        schedule = every(timedelta(minutes=5))
        assert schedule.next_after(utc(2026, 5, 1, 10, 5)) == utc(2026, 5, 1, 10, 10)
        just_before = utc(2026, 5, 1, 10, 5) - timedelta(microseconds=1)
        assert schedule.next_after(just_before) == utc(2026, 5, 1, 10, 5)

    def test_output_is_utc_whatever_the_input_zone(self):
        result = every(timedelta(hours=1)).next_after(datetime(2026, 5, 1, 12, 17, tzinfo=BERLIN))
        assert result == utc(2026, 5, 1, 11)
        assert result.tzinfo is UTC

    def test_interval_below_one_second_rejected(self):
        with pytest.raises(InvalidSchedule, match="at least 1 second"):
            every(timedelta(milliseconds=999))
        with pytest.raises(InvalidSchedule, match="at least 1 second"):
            Every(timedelta(0))
        with pytest.raises(InvalidSchedule, match="at least 1 second"):
            Every(timedelta(seconds=-5))
        assert every(timedelta(seconds=1)).interval == timedelta(seconds=1)

    def test_interval_must_be_timedelta(self):
        with pytest.raises(InvalidSchedule, match="timedelta"):
            every(60)  # type: ignore[arg-type]

    def test_fractional_interval_in_microseconds(self):
        schedule = every(timedelta(seconds=1, microseconds=500_000))
        assert schedule.next_after(utc(2026, 1, 1)) == utc(2026, 1, 1, 0, 0, 1, 500_000)

    def test_slots_between_inclusive_both_ends(self):
        schedule = every_minutes(15)
        assert schedule.slots_between(utc(2026, 5, 1, 10), utc(2026, 5, 1, 11)) == [
            utc(2026, 5, 1, 10),
            utc(2026, 5, 1, 10, 15),
            utc(2026, 5, 1, 10, 30),
            utc(2026, 5, 1, 10, 45),
            utc(2026, 5, 1, 11),
        ]
        assert schedule.slots_between(utc(2026, 5, 1, 10, 1), utc(2026, 5, 1, 10, 14)) == []

    def test_slots_between_limit_returns_most_recent(self):
        schedule = every_minutes(15)
        result = schedule.slots_between(utc(2026, 5, 1, 10), utc(2026, 5, 1, 11), limit=2)
        assert result == [utc(2026, 5, 1, 10, 45), utc(2026, 5, 1, 11)]
        assert schedule.slots_between(utc(2026, 5, 1, 10), utc(2026, 5, 1, 11), limit=0) == []
        assert len(schedule.slots_between(utc(2026, 5, 1), utc(2026, 5, 2), limit=1000)) == 97

    def test_slots_between_empty_when_end_before_start(self):
        assert every_minutes(1).slots_between(utc(2026, 5, 2), utc(2026, 5, 1)) == []

    def test_slots_between_rejects_bad_limit(self):
        with pytest.raises(ValueError, match="limit"):
            every_minutes(1).slots_between(utc(2026, 5, 1), utc(2026, 5, 2), limit=-1)

    def test_slots_between_matches_chained_next_after(self):
        schedule = every(timedelta(seconds=37))
        start = utc(2026, 5, 1, 10, 0, 5)
        slots = schedule.slots_between(start, start + timedelta(hours=1))
        assert slots == chain(schedule, start - timedelta(microseconds=1), len(slots))

    def test_slots_between_is_arithmetic(self, monkeypatch):
        schedule = every(timedelta(seconds=1))
        start, end = utc(2026, 5, 1), utc(2026, 5, 11, 0, 0, 0, 500_000)

        def forbidden(*args, **kwargs):
            raise AssertionError("Every.slots_between must not iterate with next_after")

        monkeypatch.setattr(Every, "next_after", forbidden)
        began = time.perf_counter()
        slots = schedule.slots_between(start, end, limit=1000)
        elapsed = time.perf_counter() - began
        assert len(slots) == 1000
        assert slots[-1] == utc(2026, 5, 11)
        assert slots[0] == utc(2026, 5, 11) - timedelta(seconds=999)
        assert elapsed < 0.5

    def test_before_epoch(self):
        schedule = every(timedelta(hours=1))
        assert schedule.next_after(utc(1969, 12, 31, 22, 30)) == utc(1969, 12, 31, 23)
        assert schedule.slots_between(utc(1969, 12, 31, 22, 30), utc(1970, 1, 1, 0, 30)) == [
            utc(1969, 12, 31, 23),
            utc(1970, 1, 1),
        ]


class TestEveryMinutes:
    @pytest.mark.parametrize("n", [0, 1441, -5])
    def test_out_of_range_rejected(self, n):
        with pytest.raises(InvalidSchedule, match="between 1 and 1440"):
            every_minutes(n)

    def test_exact_message(self):
        with pytest.raises(InvalidSchedule) as info:
            every_minutes(0)
        assert str(info.value) == "every_minutes(0): n must be between 1 and 1440 minutes"

    @pytest.mark.parametrize("n", [1.5, 2.0, True, False, "5", None])
    def test_non_int_rejected(self, n):
        with pytest.raises(InvalidSchedule, match="whole number of minutes"):
            every_minutes(n)

    @pytest.mark.parametrize("n", [1, 15, 1440])
    def test_bounds_accepted(self, n):
        assert every_minutes(n) == every(timedelta(minutes=n))


# Cron and cadence helpers -----------------------------------------------------------------


class TestCronArithmetic:
    def test_cron_every_five_minutes(self):
        schedule = cron("*/5 * * * *")
        assert schedule.next_after(utc(2026, 5, 1, 10, 3, 7)) == utc(2026, 5, 1, 10, 5)
        assert schedule.next_after(utc(2026, 5, 1, 10, 5)) == utc(2026, 5, 1, 10, 10)

    def test_next_after_strictly_after_with_microseconds(self):
        schedule = cron("0 * * * *")
        assert schedule.next_after(utc(2026, 5, 1, 10)) == utc(2026, 5, 1, 11)
        assert schedule.next_after(utc(2026, 5, 1, 10, 0, 0, 1)) == utc(2026, 5, 1, 11)
        before = utc(2026, 5, 1, 10) - timedelta(microseconds=1)
        assert schedule.next_after(before) == utc(2026, 5, 1, 10)

    def test_output_is_utc(self):
        result = daily(at="03:30", tz="Europe/Berlin").next_after(utc(2026, 5, 1))
        assert result == utc(2026, 5, 1, 1, 30)
        assert result.tzinfo is UTC

    def test_hourly(self):
        schedule = hourly(minute=5)
        assert chain(schedule, utc(2026, 5, 1, 10, 5), 3) == [
            utc(2026, 5, 1, 11, 5),
            utc(2026, 5, 1, 12, 5),
            utc(2026, 5, 1, 13, 5),
        ]
        assert hourly().next_after(utc(2026, 5, 1, 10, 59)) == utc(2026, 5, 1, 11)

    def test_hourly_in_half_hour_offset_zone(self):
        schedule = hourly(minute=0, tz="Asia/Kolkata")
        assert schedule.next_after(utc(2026, 5, 1, 10)) == utc(2026, 5, 1, 10, 30)

    def test_daily(self):
        schedule = daily(at="03:30")
        assert chain(schedule, utc(2026, 5, 1, 3, 30), 2) == [
            utc(2026, 5, 2, 3, 30),
            utc(2026, 5, 3, 3, 30),
        ]
        assert daily().next_after(utc(2026, 5, 1, 12)) == utc(2026, 5, 2)

    def test_daily_in_time_zone(self):
        # Berlin is UTC+2 in summer and UTC+1 in winter.
        assert daily(at="03:30", tz="Europe/Berlin").next_after(utc(2026, 7, 1)) == utc(
            2026, 7, 1, 1, 30
        )
        assert daily(at="03:30", tz="Europe/Berlin").next_after(utc(2026, 1, 1)) == utc(
            2026, 1, 1, 2, 30
        )

    def test_weekly(self):
        # 2026-05-04 is a Monday.
        schedule = weekly("monday", at="09:00")
        assert chain(schedule, utc(2026, 5, 1), 2) == [utc(2026, 5, 4, 9), utc(2026, 5, 11, 9)]
        assert schedule.expression == "0 9 * * 1"

    @pytest.mark.parametrize(
        ("index", "names", "first_date"),
        [
            (0, ("monday", "Monday", "MON", "mon"), utc(2026, 5, 4)),
            (1, ("tuesday", "tue"), utc(2026, 5, 5)),
            (2, ("wednesday", "wed"), utc(2026, 5, 6)),
            (3, ("thursday", "thu"), utc(2026, 5, 7)),
            (4, ("friday", "Fri"), utc(2026, 5, 1)),
            (5, ("saturday", "sat"), utc(2026, 5, 2)),
            (6, ("SUNDAY", "sun"), utc(2026, 5, 3)),
        ],
    )
    def test_weekly_int_and_names_agree(self, index, names, first_date):
        by_index = weekly(index, at="00:00")
        start = utc(2026, 4, 30, 12)  # a Thursday, after its midnight
        assert by_index.next_after(start) == first_date
        assert first_date.weekday() == index
        for name in names:
            assert weekly(name) == by_index
            assert weekly(name).next_after(start) == first_date

    @pytest.mark.parametrize("weekday", [7, -1, "funday", "mo", "", True, 1.0, None])
    def test_weekly_bad_weekday(self, weekday):
        with pytest.raises(InvalidSchedule, match="weekday must be"):
            weekly(weekday)

    def test_monthly(self):
        schedule = monthly(1)
        assert chain(schedule, utc(2026, 1, 15), 3) == [
            utc(2026, 2, 1),
            utc(2026, 3, 1),
            utc(2026, 4, 1),
        ]
        assert monthly(28, at="23:59").next_after(utc(2026, 2, 1)) == utc(2026, 2, 28, 23, 59)

    @pytest.mark.parametrize("day", [0, 29, 31, -1, True, "1"])
    def test_monthly_bad_day(self, day):
        with pytest.raises(InvalidSchedule, match="1 to 28") as info:
            monthly(day)
        if day == 29:
            assert "do not exist in every month" in str(info.value)

    def test_last_day_of_month_via_cron(self):
        assert cron("0 0 L * *").next_after(utc(2026, 2, 2)) == utc(2026, 2, 28)

    @pytest.mark.parametrize("at", ["25:00", "24:00", "12:60", "noon", "1230", "12:3", "", None])
    def test_bad_hhmm(self, at):
        with pytest.raises(InvalidSchedule, match=r"time must be HH:MM \(00:00-23:59\)"):
            daily(at=at)
        with pytest.raises(InvalidSchedule, match="HH:MM"):
            weekly("monday", at=at)
        with pytest.raises(InvalidSchedule, match="HH:MM"):
            monthly(1, at=at)

    def test_bad_hhmm_exact_message(self):
        with pytest.raises(InvalidSchedule) as info:
            daily(at="25:00")
        assert str(info.value) == "daily(at='25:00'): time must be HH:MM (00:00-23:59)"

    @pytest.mark.parametrize("minute", [-1, 60, True, "5"])
    def test_hourly_bad_minute(self, minute):
        with pytest.raises(InvalidSchedule, match="minute must be"):
            hourly(minute)

    def test_slots_between_with_and_without_limit(self):
        schedule = cron("*/20 * * * *")
        start, end = utc(2026, 5, 1, 10), utc(2026, 5, 1, 11, 10)
        assert schedule.slots_between(start, end) == [
            utc(2026, 5, 1, 10),
            utc(2026, 5, 1, 10, 20),
            utc(2026, 5, 1, 10, 40),
            utc(2026, 5, 1, 11),
        ]
        assert schedule.slots_between(start, end, limit=2) == [
            utc(2026, 5, 1, 10, 40),
            utc(2026, 5, 1, 11),
        ]
        assert schedule.slots_between(start, end, limit=10) == schedule.slots_between(start, end)

    def test_slots_between_limit_after_long_outage(self):
        schedule = cron("* * * * *")
        start, end = utc(2025, 5, 1), utc(2026, 5, 1, 0, 0, 30)
        began = time.perf_counter()
        slots = schedule.slots_between(start, end, limit=1000)
        elapsed = time.perf_counter() - began
        assert len(slots) == 1000
        assert slots[-1] == utc(2026, 5, 1)
        assert slots[0] == utc(2026, 5, 1) - timedelta(minutes=999)
        assert elapsed < 5

    def test_slots_between_limit_with_sparse_schedule(self):
        schedule = monthly(15)
        slots = schedule.slots_between(utc(2020, 1, 1), utc(2026, 5, 1), limit=3)
        assert slots == [utc(2026, 2, 15), utc(2026, 3, 15), utc(2026, 4, 15)]
        assert schedule.slots_between(utc(2026, 1, 1), utc(2026, 5, 1), limit=100) == [
            utc(2026, 1, 15),
            utc(2026, 2, 15),
            utc(2026, 3, 15),
            utc(2026, 4, 15),
        ]


class TestCronValidation:
    @pytest.mark.parametrize(
        "expression", ["* * * *", "* * * * * *", "0 0 * * * * 2026", "@daily", "*"]
    )
    def test_wrong_field_count(self, expression):
        with pytest.raises(InvalidSchedule, match="expected 5 fields"):
            cron(expression)

    def test_seconds_field_explained(self):
        with pytest.raises(InvalidSchedule, match="seconds field is not supported"):
            cron("*/10 * * * * *")

    @pytest.mark.parametrize("expression", ["", "   "])
    def test_empty(self, expression):
        with pytest.raises(InvalidSchedule, match="empty"):
            cron(expression)

    def test_out_of_range_exact_message(self):
        with pytest.raises(InvalidSchedule) as info:
            cron("61 * * * *")
        assert str(info.value) == "cron '61 * * * *': minute field value 61 is out of range 0-59"

    @pytest.mark.parametrize(
        ("expression", "field"),
        [
            ("0 24 * * *", "hour field value 24"),
            ("0 0 32 * *", "day-of-month field value 32"),
            ("0 0 * 13 *", "month field value 13"),
            ("0 0 * * 8", "day-of-week field value 8"),
            ("x * * * *", "minute field 'x' is invalid"),
            ("*/0 * * * *", "minute field '\\*/0' is invalid"),
            ("0 0 30 2 *", "day-of-month field '30' is invalid"),
        ],
    )
    def test_bad_fields(self, expression, field):
        with pytest.raises(InvalidSchedule, match=field):
            cron(expression)

    def test_not_a_string(self):
        with pytest.raises(InvalidSchedule, match="must be a string"):
            cron(5)  # type: ignore[arg-type]

    def test_whitespace_and_case_normalised(self):
        assert cron("  0   9 * *  mon ").expression == "0 9 * * mon"
        assert cron("0 9 * * mon") == cron("0 9 * * MON")

    def test_symbolic_names_accepted(self):
        assert cron("0 9 * * MON-FRI").next_after(utc(2026, 5, 2)) == utc(2026, 5, 4, 9)

    @pytest.mark.parametrize("tz", ["Mars/Base", "", "utc", "../etc/passwd", "/etc/localtime"])
    def test_unknown_time_zone(self, tz):
        with pytest.raises(InvalidSchedule, match="use an IANA name such as 'Europe/Berlin'"):
            cron("* * * * *", tz=tz)

    def test_unknown_time_zone_exact_message(self):
        with pytest.raises(InvalidSchedule) as info:
            daily(at="03:00", tz="Mars/Base")
        assert str(info.value) == (
            "unknown time zone 'Mars/Base': use an IANA name such as 'Europe/Berlin'"
        )

    @pytest.mark.parametrize(
        "factory",
        [
            lambda: hourly(tz="Nowhere/Land"),
            lambda: daily(tz="Nowhere/Land"),
            lambda: weekly("monday", tz="Nowhere/Land"),
            lambda: monthly(1, tz="Nowhere/Land"),
        ],
    )
    def test_helpers_check_time_zone(self, factory):
        with pytest.raises(InvalidSchedule, match="unknown time zone 'Nowhere/Land'"):
            factory()

    def test_invalid_schedule_is_value_error(self):
        assert issubclass(InvalidSchedule, ValueError)


# DST ----------------------------------------------------------------------------------------


class TestDaylightSavingTime:
    """Exact UTC instants across the 2026 transitions in Berlin and New York.

    Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST (01:00 UTC);
    2026-10-25 03:00 CEST -> 02:00 CET (01:00 UTC), so 02:00-03:00 local happens twice.
    America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT (07:00 UTC);
    2026-11-01 02:00 EDT -> 01:00 EST (06:00 UTC), so 01:00-02:00 local happens twice.
    """

    def test_berlin_daily_in_skipped_hour_runs_once_right_after_jump(self):
        schedule = daily(at="02:30", tz="Europe/Berlin")
        slots = schedule.slots_between(utc(2026, 3, 27, 12), utc(2026, 3, 30, 12))
        assert slots == [
            utc(2026, 3, 28, 1, 30),  # 02:30 CET
            utc(2026, 3, 29, 1, 0),  # 02:30 does not exist: 03:00 CEST, right after the jump
            utc(2026, 3, 30, 0, 30),  # 02:30 CEST
        ]
        assert slots[1].astimezone(BERLIN).strftime("%H:%M %Z") == "03:00 CEST"

    def test_berlin_daily_in_repeated_hour_runs_once(self):
        schedule = daily(at="02:30", tz="Europe/Berlin")
        slots = schedule.slots_between(utc(2026, 10, 24, 12), utc(2026, 10, 26, 12))
        assert slots == [
            utc(2026, 10, 25, 0, 30),  # 02:30 CEST, the first pass
            utc(2026, 10, 26, 1, 30),  # 02:30 CET the next day
        ]
        # Inside the repeated hour, neither pass yields a second run that day.
        assert schedule.next_after(utc(2026, 10, 25, 0, 30)) == utc(2026, 10, 26, 1, 30)
        assert schedule.next_after(utc(2026, 10, 25, 0, 45)) == utc(2026, 10, 26, 1, 30)
        second_pass = datetime(2026, 10, 25, 2, 15, fold=1, tzinfo=BERLIN)
        assert second_pass.astimezone(UTC) == utc(2026, 10, 25, 1, 15)
        assert schedule.next_after(second_pass) == utc(2026, 10, 26, 1, 30)
        assert schedule.next_after(utc(2026, 10, 25, 1, 15)) == utc(2026, 10, 26, 1, 30)

    def test_new_york_daily_in_skipped_hour_runs_once_right_after_jump(self):
        schedule = daily(at="02:30", tz="America/New_York")
        slots = schedule.slots_between(utc(2026, 3, 7), utc(2026, 3, 9, 12))
        assert slots == [
            utc(2026, 3, 7, 7, 30),  # 02:30 EST
            utc(2026, 3, 8, 7, 0),  # 02:30 does not exist: 03:00 EDT
            utc(2026, 3, 9, 6, 30),  # 02:30 EDT
        ]

    def test_new_york_daily_on_fall_back_day_runs_once(self):
        schedule = daily(at="02:30", tz="America/New_York")
        slots = schedule.slots_between(utc(2026, 10, 31, 12), utc(2026, 11, 2, 12))
        assert slots == [utc(2026, 11, 1, 7, 30), utc(2026, 11, 2, 7, 30)]  # 02:30 EST both

    def test_new_york_daily_in_repeated_hour_runs_once(self):
        schedule = daily(at="01:30", tz="America/New_York")
        slots = schedule.slots_between(utc(2026, 10, 31, 12), utc(2026, 11, 2, 12))
        assert slots == [
            utc(2026, 11, 1, 5, 30),  # 01:30 EDT, the first pass
            utc(2026, 11, 2, 6, 30),  # 01:30 EST the next day
        ]
        assert schedule.next_after(utc(2026, 11, 1, 6, 15)) == utc(2026, 11, 2, 6, 30)

    def test_fixed_slots_collapsing_onto_the_jump_run_once(self):
        schedule = cron("0,30 2 * * *", tz="Europe/Berlin")
        slots = schedule.slots_between(utc(2026, 3, 28, 12), utc(2026, 3, 30, 12))
        assert slots == [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0), utc(2026, 3, 30, 0, 30)]

    @pytest.mark.parametrize(
        ("tz", "start", "end"),
        [
            ("Europe/Berlin", utc(2026, 3, 28, 21), utc(2026, 3, 29, 5)),
            ("Europe/Berlin", utc(2026, 10, 24, 21), utc(2026, 10, 25, 5)),
            ("America/New_York", utc(2026, 3, 8, 3), utc(2026, 3, 8, 11)),
            ("America/New_York", utc(2026, 11, 1, 2), utc(2026, 11, 1, 10)),
        ],
    )
    @pytest.mark.parametrize("expression", ["0 * * * *", "*/30 * * * *", "*/15 * * * *"])
    def test_wildcard_hour_follows_real_time(self, tz, start, end, expression):
        """Wildcard-hour jobs skip the missing hour and run in both passes of a repeated one.

        In UTC that is simply a regular grid, strictly increasing and without duplicates.
        """
        schedule = cron(expression, tz=tz)
        step = {"0 * * * *": 60, "*/30 * * * *": 30, "*/15 * * * *": 15}[expression]
        expected = []
        slot = start
        while slot <= end:
            expected.append(slot)
            slot += timedelta(minutes=step)
        slots = schedule.slots_between(start, end)
        assert slots == expected
        assert slots == chain(schedule, start - timedelta(seconds=1), len(expected))
        assert_strictly_increasing(slots)

    def test_hourly_across_berlin_transitions_exact(self):
        schedule = hourly(tz="Europe/Berlin")
        spring = schedule.slots_between(utc(2026, 3, 28, 23), utc(2026, 3, 29, 2))
        assert spring == [
            utc(2026, 3, 28, 23),  # 00:00 CET
            utc(2026, 3, 29, 0),  # 01:00 CET
            utc(2026, 3, 29, 1),  # 03:00 CEST (02:00 local does not exist)
            utc(2026, 3, 29, 2),  # 04:00 CEST
        ]
        autumn = schedule.slots_between(utc(2026, 10, 24, 23), utc(2026, 10, 25, 2))
        assert autumn == [
            utc(2026, 10, 24, 23),  # 01:00 CEST
            utc(2026, 10, 25, 0),  # 02:00 CEST
            utc(2026, 10, 25, 1),  # 02:00 CET (the repeated hour runs again)
            utc(2026, 10, 25, 2),  # 03:00 CET
        ]
        local = [slot.astimezone(BERLIN).strftime("%H:%M %Z") for slot in autumn]
        assert local == ["01:00 CEST", "02:00 CEST", "02:00 CET", "03:00 CET"]

    def test_half_hourly_across_new_york_fall_back_exact(self):
        schedule = cron("*/30 * * * *", tz="America/New_York")
        slots = chain(schedule, utc(2026, 11, 1, 5), 4)
        assert slots == [
            utc(2026, 11, 1, 5, 30),  # 01:30 EDT
            utc(2026, 11, 1, 6),  # 01:00 EST (second pass)
            utc(2026, 11, 1, 6, 30),  # 01:30 EST
            utc(2026, 11, 1, 7),  # 02:00 EST
        ]
        local = [slot.astimezone(NEW_YORK).strftime("%H:%M %Z") for slot in slots]
        assert local == ["01:30 EDT", "01:00 EST", "01:30 EST", "02:00 EST"]

    def test_wildcard_minute_fixed_hour(self):
        """``*/15 2 * * *`` follows real time: no run on the spring day, eight in autumn."""
        schedule = cron("*/15 2 * * *", tz="Europe/Berlin")
        spring = schedule.slots_between(utc(2026, 3, 28, 12), utc(2026, 3, 29, 23))
        assert spring == []
        autumn = schedule.slots_between(utc(2026, 10, 24, 12), utc(2026, 10, 25, 23))
        assert autumn == [utc(2026, 10, 25, 0) + timedelta(minutes=15 * i) for i in range(8)]

    @pytest.mark.parametrize(
        ("tz", "start"),
        [
            ("Europe/Berlin", utc(2026, 3, 27)),
            ("Europe/Berlin", utc(2026, 10, 23)),
            ("America/New_York", utc(2026, 3, 6)),
            ("America/New_York", utc(2026, 10, 30)),
        ],
    )
    @pytest.mark.parametrize(
        "expression", ["30 2 * * *", "0 2 * * *", "30 1 * * *", "0,30 1-3 * * *", "*/5 * * * *"]
    )
    def test_chained_next_after_never_repeats_or_goes_back(self, tz, start, expression):
        schedule = cron(expression, tz=tz)
        end = start + timedelta(days=4)
        slots = schedule.slots_between(start, end)
        assert slots
        assert_strictly_increasing(slots)
        assert slots == chain(schedule, start - timedelta(seconds=1), len(slots))
        # next_after agrees with slots_between from every instant in the range.
        instant = start
        while instant < end - timedelta(days=1):
            expected = next(slot for slot in slots if slot > instant)
            assert schedule.next_after(instant) == expected, instant
            instant += timedelta(minutes=7)


# describe, fingerprint, equality, repr ---------------------------------------------------


class TestText:
    @pytest.mark.parametrize(
        ("schedule", "text"),
        [
            (every(timedelta(hours=1)), "every 1h"),
            (every_minutes(15), "every 15 min"),
            (every(timedelta(seconds=30)), "every 30s"),
            (every(timedelta(days=1)), "every 1d"),
            (every(timedelta(seconds=90)), "every 90s"),
            (every(timedelta(seconds=1, microseconds=500_000)), "every 1.5s"),
            (daily(at="03:30", tz="Europe/Berlin"), "daily at 03:30 (Europe/Berlin)"),
            (daily(at="3:30"), "daily at 03:30 (UTC)"),
            (
                weekly("monday", at="09:00", tz="Europe/Berlin"),
                "weekly on Monday at 09:00 (Europe/Berlin)",
            ),
            (weekly(6), "weekly on Sunday at 00:00 (UTC)"),
            (monthly(1), "monthly on day 1 at 00:00 (UTC)"),
            (hourly(5), "hourly at :05 (UTC)"),
            (cron("*/5 * * * *"), "cron '*/5 * * * *' (UTC)"),
            (WhenDue(), "when due (at least every 60s)"),
            (WhenDue(timedelta(minutes=5)), "when due (at least every 300s)"),
        ],
    )
    def test_describe(self, schedule, text):
        assert schedule.describe() == text
        assert str(schedule) == text

    def test_fingerprints(self):
        assert every(timedelta(hours=1)).fingerprint() == "every:3600.0"
        assert daily(at="03:30", tz="Europe/Berlin").fingerprint() == (
            "cron:30 3 * * *@Europe/Berlin"
        )
        assert WhenDue().fingerprint() == "when_due:60.0"

    def test_equal_schedules_have_equal_fingerprints(self):
        pairs = [
            (every(timedelta(minutes=60)), every(timedelta(hours=1))),
            (every_minutes(5), Every(timedelta(seconds=300))),
            (daily(at="03:30", tz="Europe/Berlin"), cron("30 3 * * *", tz="Europe/Berlin")),
            (weekly("mon"), cron("0 0 * * 1")),
            (hourly(), cron("0 * * * *")),
            (WhenDue(), WhenDue(timedelta(seconds=60))),
        ]
        for first, second in pairs:
            assert first.fingerprint() == second.fingerprint()
            assert first == second
            assert hash(first) == hash(second)
        assert len({every(timedelta(hours=1)), every(timedelta(minutes=60))}) == 1

    def test_different_schedules_differ(self):
        schedules_ = [
            every(timedelta(hours=1)),
            every(timedelta(hours=2)),
            hourly(),
            daily(at="03:30"),
            daily(at="03:30", tz="Europe/Berlin"),
            daily(at="03:31"),
            weekly("mon"),
            weekly("tue"),
            monthly(1),
            WhenDue(),
            WhenDue(timedelta(seconds=61)),
        ]
        fingerprints = {schedule.fingerprint() for schedule in schedules_}
        assert len(fingerprints) == len(schedules_)
        assert every(timedelta(hours=1)) != hourly()
        assert every(timedelta(seconds=60)) != WhenDue(timedelta(seconds=60))
        assert every(timedelta(hours=1)) != "every:3600.0"

    def test_repr(self):
        assert repr(every(timedelta(hours=1))) == "Every(datetime.timedelta(seconds=3600))"
        assert repr(cron("*/5 * * * *", tz="Europe/Berlin")) == (
            "Cron('*/5 * * * *', tz='Europe/Berlin')"
        )
        assert "label='daily at 03:30 (UTC)'" in repr(daily(at="03:30"))
        assert repr(WhenDue()) == "WhenDue(datetime.timedelta(seconds=60))"

    def test_attributes(self):
        schedule = weekly("friday", at="17:45", tz="Europe/Berlin")
        assert isinstance(schedule, Cron)
        assert schedule.expression == "45 17 * * 5"
        assert schedule.tz == "Europe/Berlin"
        assert schedule.label == "weekly on Friday at 17:45 (Europe/Berlin)"
        assert schedule.periodic is True
        assert every_minutes(1).periodic is True


# WhenDue ------------------------------------------------------------------------------------


class TestWhenDue:
    def test_not_periodic(self):
        assert WhenDue.periodic is False
        assert WhenDue().periodic is False

    def test_next_after_adds_fallback_in_utc(self):
        instant = datetime(2026, 5, 1, 12, 0, 7, tzinfo=BERLIN)
        result = WhenDue(timedelta(seconds=90)).next_after(instant)
        assert result == utc(2026, 5, 1, 10, 1, 37)
        assert result.tzinfo is UTC

    def test_fallback_below_one_second_rejected(self):
        with pytest.raises(InvalidSchedule, match="at least 1 second"):
            WhenDue(timedelta(milliseconds=500))
        with pytest.raises(InvalidSchedule, match="timedelta"):
            WhenDue(60)  # type: ignore[arg-type]

    def test_no_fixed_slots(self):
        assert WhenDue().slots_between(utc(2026, 5, 1), utc(2026, 5, 2)) == []


# coerce and input validation -----------------------------------------------------------------


class TestCoerce:
    def test_schedule_returned_as_is(self):
        schedule = daily(at="03:30")
        assert coerce(schedule) is schedule
        when_due = WhenDue()
        assert coerce(when_due) is when_due

    def test_timedelta_becomes_every(self):
        result = coerce(timedelta(minutes=10))
        assert isinstance(result, Every)
        assert result == every_minutes(10)

    def test_short_timedelta_rejected(self):
        with pytest.raises(InvalidSchedule, match="at least 1 second"):
            coerce(timedelta(0))

    @pytest.mark.parametrize("value", ["*/5 * * * *", 60, 1.5, None, object()])
    def test_anything_else_rejected_with_hint(self, value):
        with pytest.raises(InvalidSchedule) as info:
            coerce(value)
        assert str(info.value).endswith(
            "use every(timedelta(...)), cron('...'), hourly(), daily(at='HH:MM'), "
            "weekly(...), monthly(...) or every_minutes(n)"
        )


class TestNaiveInput:
    naive = datetime(2026, 5, 1, 12)

    @pytest.mark.parametrize(
        "schedule", [every_minutes(5), cron("*/5 * * * *"), daily(tz="Europe/Berlin"), WhenDue()]
    )
    def test_naive_rejected(self, schedule):
        with pytest.raises(ValueError, match="timezone-aware"):
            schedule.next_after(self.naive)
        with pytest.raises(ValueError, match="timezone-aware"):
            schedule.slots_between(self.naive, utc(2026, 5, 2))
        with pytest.raises(ValueError, match="timezone-aware"):
            schedule.slots_between(utc(2026, 5, 1), self.naive)

    def test_invalid_schedule_is_not_raised_for_naive_input(self):
        with pytest.raises(ValueError) as info:
            every_minutes(5).next_after(self.naive)
        assert not isinstance(info.value, InvalidSchedule)


def test_limit_search_over_a_huge_range_does_not_overflow():
    slots = monthly(1).slots_between(datetime(1, 1, 1, tzinfo=UTC), utc(2026, 5, 1), limit=2)
    assert slots == [utc(2026, 4, 1), utc(2026, 5, 1)]
