"""Webhook signatures: HMAC-SHA256 over the delivery id, a timestamp and the body.

The signed text is ``"<delivery id>.<timestamp>."`` followed by the raw body, so neither
the id nor the time can be changed without the secret, and a recorded request cannot be
replayed later (receivers refuse old timestamps). ``docs/webhooks.md`` shows the check a
receiver makes; :func:`verify` is that check.
"""

import hashlib
import hmac

#: The scheme's tag in the signature header; a header may carry several (secret rotation).
VERSION = "v1"


def sign(secret: str, delivery_id: str, timestamp: int, body: bytes) -> str:
    """Return the ``Instatic-Signature`` header's value for one request."""
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"{VERSION}={digest}"


def verify(
    secret: str,
    delivery_id: str,
    timestamp: int,
    body: bytes,
    header: str,
    *,
    now: int,
    tolerance: int = 300,
) -> bool:
    """Return True if ``header`` signs this request with ``secret`` and is recent enough."""
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, delivery_id, timestamp, body)
    given = [value.strip() for value in header.split(",")]
    return any(hmac.compare_digest(expected, value) for value in given)


def headers(secret: str, delivery_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Return the headers of one delivery's request."""
    return {
        "Content-Type": "application/json",
        "User-Agent": "Instatic-Webhooks/1",
        "Instatic-Delivery": delivery_id,
        "Instatic-Timestamp": str(timestamp),
        "Instatic-Signature": sign(secret, delivery_id, timestamp, body),
    }
