"""Webhook signatures: the receiver's check accepts exactly what the sender signed."""

import pytest

from outbox.webhooks.signing import sign, verify

SECRET, ID, TS, BODY = "s3cret", "d-1", 1_800_000_000, b'{"a":1}'
GOOD = sign(SECRET, ID, TS, BODY)


def test_the_signature_is_hmac_sha256_over_id_timestamp_and_body():
    import hashlib
    import hmac

    expected = hmac.new(b"s3cret", b'd-1.1800000000.{"a":1}', hashlib.sha256).hexdigest()
    assert f"v1={expected}" == GOOD


@pytest.mark.parametrize(
    ("secret", "delivery", "body", "header", "now", "ok"),
    [
        (SECRET, ID, BODY, GOOD, TS, True),
        (SECRET, ID, BODY, f"v1=00, {GOOD}", TS + 299, True),  # rotation: any value matches
        ("other", ID, BODY, GOOD, TS, False),
        (SECRET, "d-2", BODY, GOOD, TS, False),
        (SECRET, ID, b'{"a":2}', GOOD, TS, False),
        (SECRET, ID, BODY, GOOD, TS + 301, False),  # too old: a replay
        (SECRET, ID, BODY, "", TS, False),
    ],
    ids=["good", "rotation", "wrong-secret", "other-id", "other-body", "replayed", "none"],
)
def test_verify(secret, delivery, body, header, now, ok):
    assert verify(secret, delivery, TS, body, header, now=now) is ok
