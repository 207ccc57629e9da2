"""The words the publishing admin uses for durations, lateness and moments (tables)."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from publishing.words import duration_text, lateness_text, moment_text, relative_text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 ms"),
        (0.006, "6 ms"),
        (0.35, "350 ms"),
        (0.9996, "1.0 s"),
        (1, "1.0 s"),
        (3.21, "3.2 s"),
        (9.96, "10 s"),
        (42.7, "42 s"),
        (60, "1 min"),
        (250, "4 min 10 s"),
        (3600, "1 h"),
        (3 * 3600 + 12 * 60 + 59, "3 h 12 min"),
        (86400 * 2 + 3600 * 4 + 5, "2 d 4 h"),
        (-250, "4 min 10 s"),
    ],
)
def test_a_duration_reads_in_at_most_two_units(seconds, text):
    assert duration_text(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, ""),
        (-0.2, "on time"),
        (0.0, "on time"),
        (0.999, "on time"),
        (1.0, "1.0 s late"),
        (3.24, "3.2 s late"),
        (250, "4 min 10 s late"),
    ],
)
def test_lateness_under_a_second_is_on_time(seconds, text):
    assert lateness_text(seconds) == text


TOKYO = ZoneInfo("Asia/Tokyo")
NOW = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2026, 12, 1, 20, 1, tzinfo=UTC), "Wed 2 Dec, 05:01 JST"),
        (datetime(2027, 1, 4, 0, 0, tzinfo=UTC), "Mon 4 Jan 2027, 09:00 JST"),
    ],
)
def test_a_moment_names_its_zone_and_only_another_year(value, text):
    assert moment_text(value, TOKYO, NOW) == text


@pytest.mark.parametrize(
    ("offset", "text"),
    [
        (timedelta(hours=3, minutes=12, seconds=30), "in 3 h 12 min"),
        (timedelta(minutes=-4, seconds=-10), "4 min 10 s ago"),
        (timedelta(milliseconds=400), "now"),
    ],
)
def test_a_relative_time_says_in_or_ago(offset, text):
    assert relative_text(NOW + offset, NOW) == text
