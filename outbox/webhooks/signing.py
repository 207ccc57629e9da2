"""Signatures of webhook deliveries, so a receiver can tell a delivery is ours and recent.

The signature is an HMAC-SHA256 over ``"{delivery_id}.{timestamp}."`` followed by the body,
sent as ``Instatic-Signature: v1=<hex>``. The delivery id and timestamp are signed with the
body so a captured delivery cannot be replayed under another id or, past the tolerance,
at another time. A header may carry several ``v1=`` values (comma-separated): while a
secret is rotated the sender signs with the old and the new one, and a receiver holding
either accepts the delivery.
"""

import hashlib
import hmac

SCHEME = "v1"
#: How far (seconds) a delivery's timestamp may be from the receiver's clock.
TOLERANCE = 300
CONTENT_TYPE = "application/json"
USER_AGENT = "Instatic-Webhooks/1"


def signed_content(delivery_id: str, timestamp: int, body: bytes) -> bytes:
    """Return the bytes the signature covers: the delivery id, the timestamp and the body."""
    return f"{delivery_id}.{timestamp}.".encode() + body


def digest(secret: str, delivery_id: str, timestamp: int, body: bytes) -> str:
    """Return the hex HMAC-SHA256 of the signed content under ``secret``."""
    content = signed_content(delivery_id, timestamp, body)
    return hmac.new(secret.encode(), content, hashlib.sha256).hexdigest()


def sign(secret: str, delivery_id: str, timestamp: int, body: bytes) -> str:
    """Return the ``Instatic-Signature`` header value: ``v1=<hex HMAC-SHA256>``."""
    return f"{SCHEME}={digest(secret, delivery_id, timestamp, body)}"


def verify(
    secret: str,
    delivery_id: str,
    timestamp: int,
    body: bytes,
    header: str,
    *,
    now: int,
    tolerance: int = TOLERANCE,
) -> bool:
    """Return True if ``header`` holds a ``v1=`` signature of this delivery under ``secret``
    and ``timestamp`` is within ``tolerance`` seconds of ``now``.

    Every ``v1=`` value is compared in constant time (none is skipped once one matches), so
    the time taken says nothing about which value, or how much of it, was right. Values of
    other schemes are ignored, so a later scheme can be added beside ``v1``.
    """
    if abs(now - timestamp) > tolerance:
        return False
    expected = digest(secret, delivery_id, timestamp, body).encode()
    matched = False
    for part in header.split(","):
        scheme, sep, value = part.strip().partition("=")
        if sep and scheme == SCHEME:
            # Bytes, not str: compare_digest refuses non-ASCII str, and a header is untrusted.
            matched |= hmac.compare_digest(expected, value.strip().encode("utf-8", "replace"))
    return matched


def headers(secret: str, delivery_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Return the HTTP headers of a delivery: content type, user agent, id, timestamp and
    signature."""
    return {
        "Content-Type": CONTENT_TYPE,
        "User-Agent": USER_AGENT,
        "Instatic-Delivery": delivery_id,
        "Instatic-Timestamp": str(timestamp),
        "Instatic-Signature": sign(secret, delivery_id, timestamp, body),
    }
