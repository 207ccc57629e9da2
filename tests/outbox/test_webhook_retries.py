"""What a failed webhook attempt leads to (pure), and the endpoint's kept health (pure)."""

from datetime import UTC, datetime, timedelta

import pytest

from outbox.webhooks import health, retries

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
WINDOW_ENDS = NOW + timedelta(days=1)
S = timedelta(seconds=1)


def decide(status=500, retry_after="", refused=False, attempt=1, now=NOW, jitter=0.0):
    return retries.after_failure(
        status=status,
        retry_after=retry_after,
        refused=refused,
        error="why",
        attempt=attempt,
        now=now,
        window_ends=WINDOW_ENDS,
        first_backoff=30 * S,
        jitter=jitter,
    )


@pytest.mark.parametrize(
    "kwargs, retry_in, disables",
    [
        ({}, 30 * S, ""),
        ({"jitter": 1.0}, 15 * S, ""),
        ({"jitter": 0.5}, 22.5 * S, ""),
        ({"attempt": 2}, 60 * S, ""),
        ({"attempt": 8}, timedelta(hours=1), ""),
        ({"attempt": 200}, timedelta(hours=1), ""),
        ({"status": None}, 30 * S, ""),
        ({"status": 404}, 30 * S, ""),
        ({"status": 429, "retry_after": "120"}, 120 * S, ""),
        ({"status": 503, "retry_after": "120"}, 120 * S, ""),
        ({"status": 503, "retry_after": "0"}, S, ""),
        ({"status": 503, "retry_after": "999999"}, timedelta(hours=1), ""),
        ({"status": 503, "retry_after": "Tue, 01 Dec 2026 12:05:00 GMT"}, 300 * S, ""),
        ({"status": 503, "retry_after": "soon"}, 30 * S, ""),
        ({"status": 500, "retry_after": "120"}, 30 * S, ""),
        ({"status": 410}, None, "410 Gone"),
        ({"refused": True, "status": None}, None, "address rules"),
        ({"now": WINDOW_ENDS}, None, ""),
        ({"now": WINDOW_ENDS - 10 * S}, 10 * S, ""),
    ],
    ids=[
        "first back-off",
        "full jitter halves it",
        "half jitter",
        "doubles",
        "capped at an hour",
        "a huge attempt count",
        "no answer",
        "4xx is a failure like any",
        "429 Retry-After",
        "503 Retry-After",
        "Retry-After 0: at least a second",
        "Retry-After bounded to an hour",
        "Retry-After as a date",
        "unreadable Retry-After",
        "Retry-After of a 500 is not honoured",
        "410 disables",
        "refused by the address rules disables",
        "window over: give up",
        "never past the window",
    ],
)
def test_after_failure(kwargs, retry_in, disables):
    found = decide(**kwargs)
    now = kwargs.get("now", NOW)
    assert found.retry_at == (None if retry_in is None else now + retry_in)
    assert (disables in found.disable) if disables else found.disable == ""


T = [NOW + timedelta(minutes=m) for m in range(5)]


@pytest.mark.parametrize(
    "kept, attempts, expected",
    [
        (health.Kept(), [], health.Kept()),
        (health.Kept(), [(T[0], True)], health.Kept(T[0], T[0], None)),
        (health.Kept(), [(T[0], False)], health.Kept(T[0], None, T[0])),
        (health.Kept(), [(T[1], False), (T[0], True)], health.Kept(T[1], T[0], T[1])),
        (health.Kept(T[0], None, T[0]), [(T[1], False)], health.Kept(T[1], None, T[0])),
        (health.Kept(T[1], None, T[0]), [(T[2], True)], health.Kept(T[2], T[2], None)),
        (health.Kept(T[2], T[2], None), [(T[1], False)], health.Kept(T[2], T[2], None)),
        (
            health.Kept(T[0], T[0], None),
            [(T[3], False), (T[1], False), (T[2], True)],
            health.Kept(T[3], T[2], T[3]),
        ),
    ],
    ids=[
        "nothing",
        "a success",
        "a failure starts a spell",
        "out of order",
        "a spell goes on",
        "a success ends it",
        "an older attempt changes nothing",
        "the last success decides where the spell starts",
    ],
)
def test_fold(kept, attempts, expected):
    assert health.fold(kept, attempts) == expected


@pytest.mark.parametrize(
    "active, reason, failing_since, words",
    [
        (True, "", None, "Active"),
        (True, "", NOW, "Failing"),
        (False, "answered 410", None, "Disabled: answered 410"),
        (False, "", None, "Disabled"),
    ],
)
def test_state(active, reason, failing_since, words):
    shown = health.state(active=active, disabled_reason=reason, failing_since=failing_since)
    assert shown == words


@pytest.mark.parametrize(
    "ok, done, words", [(0, 0, "–"), (9, 10, "90% of 10"), (0, 3, "0% of 3"), (1, 3, "33% of 3")]
)
def test_rate_text(ok, done, words):
    assert health.rate_text(ok, done) == words
