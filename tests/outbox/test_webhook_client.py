"""The webhook client against a real loopback server: answers, failures, bounds, refusals."""

import time

import pytest

from outbox.webhooks import signing
from outbox.webhooks.client import Timeouts, send
from tests.support.webhook_receiver import receiver

BODY = b'{"event":"published"}'


def post(url, **options):
    options.setdefault("allow_private", True)
    options.setdefault("allow_http", True)
    headers = signing.headers("s3cret", "d-1", 1_800_000_000, BODY)
    return send(url, BODY, headers, **options)


def test_a_2xx_is_ok_and_the_receiver_can_verify_the_signature():
    with receiver() as hook:
        attempt = post(hook.url)
        (request,) = hook.received
    assert (attempt.ok, attempt.status_code, attempt.response_head) == (True, 200, "answer 200")
    assert request.body == BODY
    assert request.headers["Instatic-Delivery"] == "d-1"
    assert request.headers["Host"] == hook.url.split("/")[2]
    assert signing.verify(
        "s3cret",
        request.headers["Instatic-Delivery"],
        int(request.headers["Instatic-Timestamp"]),
        request.body,
        request.headers["Instatic-Signature"],
        now=1_800_000_010,
    )


def test_a_500_is_a_failure_with_its_code_and_first_bytes():
    with receiver("status", 500) as hook:
        attempt = post(hook.url)
    assert (attempt.ok, attempt.status_code, attempt.response_head) == (False, 500, "answer 500")
    assert attempt.error == "the endpoint answered 500"


def test_a_receiver_that_never_answers_costs_at_most_the_timeouts():
    with receiver("hang") as hook:
        started = time.monotonic()
        attempt = post(hook.url, timeout=Timeouts(connect=1, read=0.5))
        took = time.monotonic() - started
    assert not attempt.ok and "timed out" in attempt.error
    assert took < 5  # the read timeout, far from the receiver's 30 s hang


def test_a_closed_connection_is_a_failure_saying_so():
    with receiver("close") as hook:
        attempt = post(hook.url)
    assert not attempt.ok and attempt.status_code is None
    assert "closed without an answer" in attempt.error


def test_a_redirect_is_not_followed():
    with receiver("redirect", "http://127.0.0.1:1/elsewhere") as hook:
        attempt = post(hook.url)
        assert len(hook.received) == 1
    assert (attempt.ok, attempt.status_code) == (False, 302)
    assert "redirected (302) to http://127.0.0.1:1/elsewhere" in attempt.error


def test_connection_refused():
    with receiver() as hook:
        url = hook.url
    attempt = post(url)  # the server is gone: nothing listens on its port
    assert not attempt.ok and attempt.error == "connection refused"


@pytest.mark.parametrize(
    ("url", "options", "error"),
    [
        ("http://127.0.0.1:9/hook", {"allow_private": False}, "not a public address"),
        ("http://localhost:9/hook", {"allow_private": False}, "not public"),
        ("http://example.com/hook", {"allow_http": False}, "must start with https://"),
        ("https://user:pw@example.com/hook", {}, "user name or password"),
    ],
    ids=["private-literal", "private-name", "http-off", "userinfo"],
)
def test_refused_before_any_request(url, options, error):
    with receiver() as hook:
        attempt = post(url, **options)
        assert hook.received == []
    assert not attempt.ok and error in attempt.error and attempt.error.startswith("refused")
