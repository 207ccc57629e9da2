"""What a failed webhook attempt leads to, as the Standard Webhooks delivery rules say.

Pure: :func:`after_failure` decides from the answer (or its absence) and the clock, and the
sender does what it says. Only a 2xx answer is a success. A 410 (Gone) answer, or a refusal
by the address rules (fixing it takes a person), disables the endpoint: its deliveries wait
for it, none is given up. A 429 or 503 answer's ``Retry-After`` is honoured, within
:data:`RETRY_AFTER_BOUNDS`. Any other failure is tried again after a back-off that doubles
from the first one up to :data:`MAX_BACKOFF`, with jitter (so endpoints that fail together
are not all tried again at one instant), until the retry window ends; then it is given up.
"""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

#: The longest wait between two attempts of one delivery.
MAX_BACKOFF = timedelta(hours=1)
#: A ``Retry-After`` is honoured within these bounds: an endpoint can neither make us hammer
#: it (0) nor park a delivery past the retry window in one answer.
RETRY_AFTER_BOUNDS = (timedelta(seconds=1), timedelta(hours=1))
#: Answers whose ``Retry-After`` is honoured.
RETRY_AFTER_STATUSES = frozenset({429, 503})
#: The share of a back-off jitter may take off (a back-off of 60 s waits 30 to 60 s).
JITTER = 0.5


@dataclass(frozen=True)
class Verdict:
    """Try again at ``retry_at``; or give up (no ``retry_at``); or, with ``disable``, disable
    the endpoint for that reason and let the delivery wait for it."""

    retry_at: datetime | None
    disable: str = ""


def after_failure(
    *,
    status: int | None,
    retry_after: str,
    refused: bool,
    error: str,
    attempt: int,
    now: datetime,
    window_ends: datetime,
    first_backoff: timedelta,
    jitter: float,
) -> Verdict:
    """Return what follows failed attempt number ``attempt`` (1 for the first).

    ``jitter`` is a number in [0, 1) (random in production, fixed in tests).
    """
    if refused:
        return Verdict(None, disable=f"the address rules refused it: {error}")
    if status == 410:
        return Verdict(None, disable="the endpoint answered 410 Gone: it asks to be sent no more")
    if now >= window_ends:
        return Verdict(None)
    waited = retry_after_delay(retry_after, now=now) if status in RETRY_AFTER_STATUSES else None
    if waited is None:
        waited = backoff(attempt, first=first_backoff, jitter=jitter)
    return Verdict(min(now + waited, window_ends))


def backoff(attempt: int, *, first: timedelta, jitter: float) -> timedelta:
    """Return the wait after failed attempt ``attempt``: ``first`` doubling, at most
    :data:`MAX_BACKOFF`, less up to :data:`JITTER` of it."""
    exponent = min(max(attempt - 1, 0), 32)
    full = min(first * (2**exponent), MAX_BACKOFF)
    return full * (1 - JITTER * min(max(jitter, 0.0), 1.0))


def retry_after_delay(value: str, *, now: datetime) -> timedelta | None:
    """Return the wait a ``Retry-After`` header asks for (seconds, or an HTTP date), within
    :data:`RETRY_AFTER_BOUNDS`; None if there is none or it cannot be read."""
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        wait = timedelta(seconds=min(int(value), 10**9))
    else:
        try:
            at = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if at is None or at.tzinfo is None:
            return None
        seconds = (at - now).total_seconds()
        if math.isnan(seconds):
            return None
        wait = timedelta(seconds=seconds)
    low, high = RETRY_AFTER_BOUNDS
    return min(max(wait, low), high)
