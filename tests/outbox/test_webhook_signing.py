"""Webhook signatures (Standard Webhooks): the known value, what verification accepts and
what it refuses, the headers, and the secrets' format."""

import base64
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook

from outbox.webhooks import secrets, signing

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
ID = "d-1"
TS = 1_700_000_000
BODY = b'{"a":1}'
# Computed outside Python, with the key the secret's base64 decodes to:
# printf 'd-1.1700000000.{"a":1}' | openssl dgst -sha256 -mac HMAC \
#   -macopt hexkey:31f290f6bf06298aab4f08d43c3f082cf648a362da2da4b0 -binary | base64
KNOWN = "v1,ps/tMVAcIG1st3TqiLCVubqniU8DDx4qKyteBh8pPMM="
KNOWN_EMPTY = "v1,wI0HNuRUGhtkBY+LTRmi5agnTI2ZY6mrqTBFtdKwFog="
OLD_SECRET = "whsec_" + base64.b64encode(b"o" * 24).decode()
OTHER = signing.sign(OLD_SECRET, ID, TS, BODY)


@pytest.mark.parametrize(
    "body, expected",
    [(BODY, KNOWN), (b"", KNOWN_EMPTY)],
    ids=["body", "empty body"],
)
def test_sign_matches_an_independent_hmac(body, expected):
    assert signing.sign(SECRET, ID, TS, body) == expected


def test_sign_matches_the_standard_webhooks_library():
    at = datetime.fromtimestamp(TS, tz=UTC)
    assert signing.sign(SECRET, ID, TS, BODY) == Webhook(SECRET).sign(ID, at, BODY)


@pytest.mark.parametrize(
    "header, now, expected",
    [
        (KNOWN, TS, True),
        (f"{OTHER} {KNOWN}", TS, True),
        (f"{KNOWN} {OTHER}", TS, True),
        (f"v2,abc {KNOWN}", TS, True),
        (OTHER, TS, False),
        ("", TS, False),
        ("v1,", TS, False),
        (KNOWN.removeprefix("v1,"), TS, False),
        (KNOWN.replace("v1,", "v2,"), TS, False),
        (KNOWN.replace("v1,", "v1="), TS, False),
        (f"{OTHER},{KNOWN}", TS, False),
        (KNOWN[:-2], TS, False),
        ("v1,é" + KNOWN[4:], TS, False),
        (KNOWN, TS + 300, True),
        (KNOWN, TS - 300, True),
        (KNOWN, TS + 301, False),
        (KNOWN, TS - 301, False),
    ],
    ids=[
        "exact",
        "rotation: new second",
        "rotation: new first",
        "unknown scheme beside",
        "other secret",
        "empty header",
        "empty value",
        "no scheme",
        "wrong scheme",
        "old form v1=",
        "comma-separated (not the standard's space)",
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


def test_headers_carry_one_signature_per_secret_separated_by_a_space():
    assert signing.headers([SECRET, OLD_SECRET], ID, TS, BODY) == {
        "Content-Type": "application/json",
        "User-Agent": "Instatic-Webhooks/1",
        "webhook-id": ID,
        "webhook-timestamp": str(TS),
        "webhook-signature": f"{KNOWN} {OTHER}",
    }


def test_redacted_headers_hide_every_signature():
    sent = signing.headers([SECRET, OLD_SECRET], ID, TS, BODY)
    shown = signing.redacted(sent)
    assert shown["webhook-signature"] == "v1,(redacted) v1,(redacted)"
    assert shown["webhook-id"] == ID and sent["webhook-signature"] == f"{KNOWN} {OTHER}"


def test_a_new_secret_is_whsec_and_32_random_bytes():
    made = {secrets.new_secret() for _ in range(5)}
    assert len(made) == 5
    for secret in made:
        assert secret.startswith("whsec_") and len(secrets.key_of(secret)) == 32
        assert secrets.problem(secret) is None


def b64(size: int) -> str:
    return base64.b64encode(b"k" * size).decode()


@pytest.mark.parametrize(
    "typed, wrong",
    [
        (f"whsec_{b64(24)}", None),
        (f"whsec_{b64(64)}", None),
        (f"whsec_{b64(32)}".rstrip("="), None),
        (f"whsec_{b64(23)}", "23 bytes"),
        (f"whsec_{b64(65)}", "65 bytes"),
        ("whsec_", "0 bytes"),
        ("s", "starts with whsec_"),
        (b64(32), "starts with whsec_"),
        ("whsec_not base64!", "not valid base64"),
    ],
    ids=["24 bytes", "64 bytes", "unpadded", "23", "65", "empty", "one char", "no prefix", "junk"],
)
def test_a_typed_secret_must_meet_the_specifications_length(typed, wrong):
    problem = secrets.problem(typed)
    assert (problem is None) if wrong is None else (wrong in problem)


@pytest.mark.parametrize(
    "secret, shown",
    [("whsec_abcdefgh", "whsec_…efgh"), ("", "")],
)
def test_a_saved_secret_is_shown_by_its_last_characters(secret, shown):
    assert secrets.masked(secret) == shown


NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    "previous, until, signers",
    [
        ("", None, ["new"]),
        ("old", None, ["new"]),
        ("old", NOW + timedelta(seconds=1), ["new", "old"]),
        ("old", NOW, ["new"]),
        ("old", NOW - timedelta(hours=1), ["new"]),
    ],
    ids=["never rotated", "no window", "in the window", "window ends now", "window over"],
)
def test_a_rotated_secret_signs_beside_the_new_one_during_its_window(previous, until, signers):
    assert secrets.signing_secrets("new", previous, until, now=NOW) == signers
