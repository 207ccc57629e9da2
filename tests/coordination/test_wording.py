"""The words for durations, lateness, times and schedulers, as tables of values and texts."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from coordination.wording import duration_text, lateness_text, local_time, scheduler_text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (0, "0 ms"),
        (-0.2, "0 ms"),
        (0.0004, "under 1 ms"),
        (0.0005, "under 1 ms"),
        (0.006441874999950414, "6 ms"),
        (0.0995, "100 ms"),
        (0.9994, "999 ms"),
        (0.9996, "1.0 s"),
        (1, "1.0 s"),
        (3.2149, "3.2 s"),
        (9.94, "9.9 s"),
        (9.96, "10 s"),
        (42.4, "42 s"),
        (59.4, "59 s"),
        (59.6, "1 min"),
        (60, "1 min"),
        (250, "4 min 10 s"),
        (3599.4, "59 min 59 s"),
        (3599.6, "1 h"),
        (3600 + 5 * 60 + 20, "1 h 5 min"),
        (86399, "1 d"),
        (90000, "1 d 1 h"),
        (10 * 86400, "10 d"),
    ],
)
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (-3.0, "on time"),
        (0, "on time"),
        (0.006441874999950414, "on time"),
        (0.999, "on time"),
        (1.0, "1.0 s late"),
        (3.24, "3.2 s late"),
        (250, "4 min 10 s late"),
        (7300, "2 h 2 min late"),
    ],
)
def test_lateness_text(seconds, text):
    assert lateness_text(seconds) == text


INSTANT = datetime(2026, 12, 1, 22, 5, 9, 750_000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("instant", "zone", "text"),
    [
        (None, "UTC", "—"),
        (INSTANT, "UTC", "2026-12-01 22:05:09 UTC"),
        (INSTANT, "Europe/Berlin", "2026-12-01 23:05:09 CET"),
        (INSTANT.replace(month=7), "Europe/Berlin", "2026-07-02 00:05:09 CEST"),
        (INSTANT, "America/Sao_Paulo", "2026-12-01 19:05:09 -03"),
        (datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), "UTC", "0999-01-02 03:04:05 UTC"),
    ],
)
def test_local_time_names_the_zone(instant, zone, text):
    assert local_time(instant, ZoneInfo(zone)) == text


def test_local_time_defaults_to_the_current_zone():
    with timezone.override(ZoneInfo("Asia/Tokyo")):
        assert local_time(INSTANT) == "2026-12-02 07:05:09 JST"


@pytest.mark.parametrize(
    ("node", "text"),
    [
        ("vm:11206", "Scheduler (node vm:11206)"),
        ("web-1", "Scheduler (node web-1)"),
        ("", "—"),
        ("vm:29421/worker-1", "Worker (node vm:29421/worker-1)"),
        ("vm:29421/tasks", "Worker (node vm:29421/tasks)"),
        ("web-1/worker-12", "Worker (node web-1/worker-12)"),
        ("worker-1", "Scheduler (node worker-1)"),  # a scheduler named so by its operator
    ],
)
def test_scheduler_text(node, text):
    assert scheduler_text(node) == text
