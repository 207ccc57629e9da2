"""A fault that misses its bound says how starved of CPU the machine was over it."""

import pytest

from devtools.chaos.pressure import parse_stall_total, stalled_share, stalled_words

PRESSURE = (
    "some avg10=12.50 avg60=5.54 avg300=51.29 total=15797310987\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
)


@pytest.mark.parametrize(
    ("text", "total"),
    [
        (PRESSURE, 15797310987),
        ("full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", None),
        ("some avg10=0.00 avg60=0.00 avg300=0.00\n", None),
        ("", None),
    ],
)
def test_the_some_line_gives_the_stall_total(text, total):
    assert parse_stall_total(text) == total


@pytest.mark.parametrize(
    ("start", "end", "seconds", "share"),
    [
        (0, 500_000, 1.0, 0.5),
        (10, 10, 2.0, 0.0),
        (0, 3_000_000, 1.0, 1.0),  # a total read late counts no more than the whole window
        (None, 5, 1.0, None),
        (0, None, 1.0, None),
        (0, 5, 0.0, None),
    ],
)
def test_the_share_of_a_window_spent_stalled(start, end, seconds, share):
    assert stalled_share(start, end, seconds) == share


def test_the_accounts_line_names_the_share_or_says_it_is_unknown():
    assert stalled_words(0, 800_000, 1.13) == (
        "CPU pressure over the fault (1.13 s): at least one task waited for a CPU 71% of the time"
    )
    assert (
        stalled_words(None, None, 1.0) == "CPU pressure over the fault: not reported by this kernel"
    )
