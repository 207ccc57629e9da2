"""Which open deliveries a subscriber's run takes: order per post, back-off, lost attempts."""

from datetime import UTC, datetime, timedelta

import pytest

from outbox.delivering import Open, choose

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=1)


def row(pk, post, *, status="pending", due=NOW, run=None, attempts=0):
    return Open(pk, pk, post, status, attempts, due, run)


@pytest.mark.parametrize(
    ("rows", "live", "take", "lost", "next_due"),
    [
        ([], set(), [], [], None),
        ([row(1, 10), row(2, 11)], set(), [1, 2], [], None),
        # A post's later events follow its first, in order, in the same run.
        ([row(1, 10), row(2, 10)], set(), [1, 2], [], None),
        # Waiting for its back-off holds the post's later events, not other posts'.
        ([row(1, 10, due=LATER), row(2, 10), row(3, 11)], set(), [3], [], LATER),
        # Held by a live claim-first run: the post waits, nothing to settle.
        ([row(1, 10, status="running", run=7), row(2, 10)], {7}, [], [], None),
        # Its run is over without an outcome: settle the attempt; the post waits.
        ([row(1, 10, status="running", run=7), row(2, 10), row(3, 11)], set(), [3], [1], None),
        # Events without a post (none is lost) are each their own unit.
        ([row(1, None, due=LATER), row(2, None)], set(), [2], [], LATER),
    ],
    ids=[
        "nothing",
        "two-posts",
        "one-post-in-order",
        "backoff-holds-its-post",
        "live-claim-holds",
        "lost-attempt-settled",
        "no-post",
    ],
)
def test_choose(rows, live, take, lost, next_due):
    choice = choose(rows, now=NOW, live_runs=live)
    assert [r.pk for r in choice.take] == take
    assert [r.pk for r in choice.lost] == lost
    assert choice.next_due == next_due
