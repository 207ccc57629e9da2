"""The words the publishing admin uses for moments (tables); durations and lateness are
coordination.wording's (tests/coordination/test_wording.py)."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from publishing.words import moment_text, relative_text

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
