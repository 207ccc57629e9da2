"""Webhook signatures: the known value, what verification accepts and what it refuses."""

import pytest

from outbox.webhooks import signing

SECRET = "whsec_test"
ID = "d-1"
TS = 1_700_000_000
BODY = b'{"a":1}'
# Computed outside Python: printf 'd-1.1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test
KNOWN = "v1=5dbb9249a8ae1dbe9518af5dc7acb563ca7b9b21e9d5085b36a75224767304d9"
KNOWN_EMPTY = "v1=ffd0fa82c31de5c56336d56a8a72c617db2f49d6af8e8ab2ef854e6b8e71e6ce"
OTHER = signing.sign("whsec_old", ID, TS, BODY)


@pytest.mark.parametrize(
    "body, expected",
    [(BODY, KNOWN), (b"", KNOWN_EMPTY)],
    ids=["body", "empty body"],
)
def test_sign_matches_an_independent_hmac(body, expected):
    assert signing.sign(SECRET, ID, TS, body) == expected


@pytest.mark.parametrize(
    "header, now, expected",
    [
        (KNOWN, TS, True),
        (f"  {KNOWN}  ", TS, True),
        (f"{OTHER},{KNOWN}", TS, True),
        (f"{KNOWN}, {OTHER}", TS, True),
        (f"v2=abc,{KNOWN}", TS, True),
        (OTHER, TS, False),
        ("", TS, False),
        ("v1=", TS, False),
        (KNOWN.removeprefix("v1="), TS, False),
        (KNOWN.replace("v1=", "v2="), TS, False),
        (KNOWN.upper(), TS, False),
        (KNOWN[:-1], TS, False),
        ("v1=é" + KNOWN[4:], TS, False),
        (KNOWN, TS + 300, True),
        (KNOWN, TS - 300, True),
        (KNOWN, TS + 301, False),
        (KNOWN, TS - 301, False),
    ],
    ids=[
        "exact",
        "surrounding spaces",
        "rotation: new second",
        "rotation: new first",
        "unknown scheme beside",
        "other secret",
        "empty header",
        "empty value",
        "no scheme",
        "wrong scheme",
        "upper-case hex",
        "truncated",
        "non-ascii",
        "at tolerance, late",
        "at tolerance, early",
        "too old",
        "from the future",
    ],
)
def test_verify(header, now, expected):
    assert signing.verify(SECRET, ID, TS, BODY, header, now=now) is expected


@pytest.mark.parametrize(
    "delivery_id, timestamp, body",
    [("d-2", TS, BODY), (ID, TS + 1, BODY), (ID, TS, b'{"a":2}'), ("d-1.1700000000", 0, BODY)],
    ids=["other id", "other timestamp", "other body", "id and timestamp shifted"],
)
def test_verify_refuses_a_signature_of_another_delivery(delivery_id, timestamp, body):
    assert not signing.verify(SECRET, delivery_id, timestamp, body, KNOWN, now=timestamp)


def test_tolerance_is_configurable():
    assert not signing.verify(SECRET, ID, TS, BODY, KNOWN, now=TS + 11, tolerance=10)
    assert signing.verify(SECRET, ID, TS, BODY, KNOWN, now=TS + 10, tolerance=10)


def test_headers():
    assert signing.headers(SECRET, ID, TS, BODY) == {
        "Content-Type": "application/json",
        "User-Agent": "Instatic-Webhooks/1",
        "Instatic-Delivery": ID,
        "Instatic-Timestamp": str(TS),
        "Instatic-Signature": KNOWN,
    }
