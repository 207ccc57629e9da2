"""Signatures of webhook deliveries, as the Standard Webhooks specification (v1.0.0) says.

Each delivery carries ``webhook-id`` (the delivery id, the same on every attempt),
``webhook-timestamp`` (integer seconds since the epoch) and ``webhook-signature``: one or
more ``v1,<base64 HMAC-SHA256>`` values separated by spaces, each over
``{webhook-id}.{webhook-timestamp}.{body}`` under one secret's key. The id and timestamp are
signed with the body so a captured delivery cannot be replayed under another id or, past the
tolerance, at another time. While a secret is rotated a delivery is signed with the new and
the old one, and a receiver holding either accepts it (:mod:`outbox.webhooks.secrets`).

Any Standard Webhooks library verifies these (``standardwebhooks`` for Python, JavaScript,
Go, Ruby, Java, PHP, Rust, C#...); :func:`verify` is the same check for Instatic's own use.
"""

import base64
import hashlib
import hmac
from collections.abc import Iterable

from outbox.webhooks.secrets import key_of

SCHEME = "v1"
#: How far (seconds) a delivery's timestamp may be from the receiver's clock.
TOLERANCE = 300
CONTENT_TYPE = "application/json"
USER_AGENT = "Instatic-Webhooks/1"
SIGNATURE_HEADER = "webhook-signature"


def signed_content(delivery_id: str, timestamp: int, body: bytes) -> bytes:
    """Return the bytes a signature covers: the delivery id, the timestamp and the body."""
    return f"{delivery_id}.{timestamp}.".encode() + body


def sign(secret: str, delivery_id: str, timestamp: int, body: bytes) -> str:
    """Return one signature, ``v1,<base64 HMAC-SHA256>``, of the delivery under ``secret``."""
    content = signed_content(delivery_id, timestamp, body)
    mac = hmac.new(key_of(secret), content, hashlib.sha256).digest()
    return f"{SCHEME},{base64.b64encode(mac).decode()}"


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
    """Return True if ``header`` holds a ``v1,`` signature of this delivery under ``secret``
    and ``timestamp`` is within ``tolerance`` seconds of ``now``.

    Every value is compared in constant time (none is skipped once one matches), so the
    time taken says nothing about which value, or how much of it, was right. Values of other
    schemes are ignored, so a later scheme can be added beside ``v1``.
    """
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, delivery_id, timestamp, body).encode()
    matched = False
    for value in header.split(" "):
        if value.startswith(f"{SCHEME},"):
            # Bytes, not str: compare_digest refuses non-ASCII str, and a header is untrusted.
            matched |= hmac.compare_digest(expected, value.encode("utf-8", "replace"))
    return matched


def headers(
    secrets: Iterable[str], delivery_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """Return the HTTP headers of a delivery: content type, user agent, id, timestamp and a
    signature under each of ``secrets`` (the current one first)."""
    signatures = " ".join(sign(secret, delivery_id, timestamp, body) for secret in secrets)
    return {
        "Content-Type": CONTENT_TYPE,
        "User-Agent": USER_AGENT,
        "webhook-id": delivery_id,
        "webhook-timestamp": str(timestamp),
        SIGNATURE_HEADER: signatures,
    }


def redacted(sent: dict[str, str]) -> dict[str, str]:
    """Return the headers ``sent`` as people may see them: the signatures' values hidden."""
    shown = dict(sent)
    if SIGNATURE_HEADER in shown:
        count = len(shown[SIGNATURE_HEADER].split(" "))
        shown[SIGNATURE_HEADER] = " ".join([f"{SCHEME},(redacted)"] * count)
    return shown
