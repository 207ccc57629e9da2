"""The webhook client against a real loopback endpoint: answers, failures and the guard."""

import json
import shutil
import socket
import subprocess

import pytest

from outbox.webhooks import client, signing
from outbox.webhooks.client import Attempt, Timeouts, send
from tests.support.webhook_receiver import Behaviour, WebhookReceiver

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = json.dumps({"event": "post.published", "post": 7}).encode()
TS = 1_700_000_000
#: What a bounded wait may overrun its timeout by on a loaded machine.
MARGIN = 2.0


@pytest.fixture(autouse=True)
def fresh_pools():
    """Each test starts without pooled connections and leaves none behind."""
    client.clear_pools()
    yield
    client.clear_pools()


def deliver(
    url, *, allow_private=True, allow_http=True, timeout=client.DEFAULT_TIMEOUTS, **kwargs
) -> Attempt:
    headers = signing.headers([SECRET], "d-42", TS, BODY)
    return send(
        url,
        BODY,
        headers,
        allow_private=allow_private,
        allow_http=allow_http,
        timeout=timeout,
        **kwargs,
    )


def dns(ip):
    """A getaddrinfo that answers ``ip`` for every name."""

    def getaddrinfo(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (ip, port))]

    return getaddrinfo


def test_a_2xx_answer_is_ok_and_the_endpoint_gets_a_signed_body():
    with WebhookReceiver(Behaviour(status=202, body=b'{"thanks": true}')) as receiver:
        attempt = deliver(receiver.url("/hooks/in?src=instatic"))
        (received,) = receiver.wait_for(1)
    assert attempt.ok and attempt.status_code == 202 and attempt.error == ""
    assert attempt.response_head == '{"thanks": true}'
    assert 0 < attempt.duration < MARGIN
    assert (received.method, received.path, received.body) == (
        "POST",
        "/hooks/in?src=instatic",
        BODY,
    )
    assert received.headers["Content-Type"] == "application/json"
    assert received.headers["User-Agent"] == "Instatic-Webhooks/1"
    assert received.headers["Host"] == f"127.0.0.1:{receiver.port}"
    assert signing.verify(
        SECRET,
        received.headers["webhook-id"],
        int(received.headers["webhook-timestamp"]),
        received.body,
        received.headers["webhook-signature"],
        now=TS,
    )


def test_the_checked_address_is_connected_to_with_the_original_host_header():
    with WebhookReceiver() as receiver:
        url = receiver.url(host="hooks.example.com")
        attempt = deliver(url, getaddrinfo=dns("127.0.0.1"))
        (received,) = receiver.wait_for(1)
    assert attempt.ok, attempt.error
    assert received.headers["Host"] == f"hooks.example.com:{receiver.port}"


def test_a_5xx_answer_is_not_ok_and_keeps_the_status_and_head():
    with WebhookReceiver(Behaviour(status=500, body=b"boom\n" + b"x" * 1000)) as receiver:
        attempt = deliver(receiver.url())
    assert not attempt.ok and attempt.status_code == 500
    assert attempt.error == "the endpoint answered HTTP 500"
    assert attempt.response_head == ("boom\n" + "x" * 1000)[:512]


def test_the_head_is_decoded_with_replacement():
    with WebhookReceiver(Behaviour(body=b"caf\xc3\xa9 \xff")) as receiver:
        attempt = deliver(receiver.url())
    assert attempt.ok and attempt.response_head == "café \ufffd"


def test_an_endless_answer_is_read_only_up_to_the_limit():
    timeout = Timeouts(connect=1, read=1, total=30)
    with WebhookReceiver(Behaviour(endless=True)) as receiver:
        attempt = deliver(receiver.url(), timeout=timeout)
    assert attempt.ok and attempt.status_code == 200
    assert attempt.response_head == "x" * 512
    assert attempt.duration < MARGIN


def test_a_slow_endpoint_times_out_within_the_read_timeout():
    timeout = Timeouts(connect=1, read=0.5, total=10)
    with WebhookReceiver(Behaviour(delay=30)) as receiver:
        attempt = deliver(receiver.url(), timeout=timeout)
        receiver.wait_for(1)
    assert not attempt.ok and attempt.status_code is None
    assert attempt.error == "timed out waiting for 127.0.0.1 (127.0.0.1) to answer after 0.5 s"
    assert attempt.duration < timeout.read + MARGIN


def test_the_total_deadline_bounds_the_read_timeout():
    timeout = Timeouts(connect=1, read=30, total=0.5)
    with WebhookReceiver(Behaviour(delay=30)) as receiver:
        attempt = deliver(receiver.url(), timeout=timeout)
    assert not attempt.ok and "timed out after 0.5 s in all" in attempt.error
    assert attempt.duration < timeout.total + MARGIN


def test_the_total_deadline_bounds_an_answer_that_trickles_in():
    timeout = Timeouts(connect=1, read=5, total=0.5)
    with WebhookReceiver(Behaviour(drip=0.05)) as receiver:
        attempt = deliver(receiver.url(), timeout=timeout)
    assert not attempt.ok and attempt.status_code == 200
    assert attempt.response_head.startswith("...")
    assert attempt.error == "timed out after 0.5 s in all, waiting for 127.0.0.1 (127.0.0.1)"
    assert attempt.duration < timeout.total + MARGIN


def test_the_total_deadline_bounds_the_wait_for_an_answer_that_stalls():
    # Bytes until shortly before the deadline, then nothing: the last read may wait only
    # what is left of the deadline, not the whole read timeout.
    timeout = Timeouts(connect=1, read=10, total=3)
    with WebhookReceiver(Behaviour(drip=0.05, drip_count=55)) as receiver:
        attempt = deliver(receiver.url(), timeout=timeout)
    assert not attempt.ok and attempt.status_code == 200
    assert attempt.error == "timed out after 3 s in all, waiting for 127.0.0.1 (127.0.0.1)"
    assert attempt.duration < timeout.total + 1.5


def test_a_connection_closed_without_an_answer():
    with WebhookReceiver(Behaviour(close=True)) as receiver:
        attempt = deliver(receiver.url())
        receiver.wait_for(1)
    assert not attempt.ok and attempt.status_code is None
    assert "closed the connection without a complete response" in attempt.error


def test_a_refused_connection():
    with WebhookReceiver() as receiver:
        url = receiver.url()
    attempt = deliver(url)
    assert not attempt.ok and attempt.status_code is None
    assert "connection refused" in attempt.error


def test_the_next_address_is_tried_when_one_refuses():
    def getaddrinfo(host, port, *args, **kwargs):
        # 127.0.0.2 is loopback too, but nothing listens there: the receiver has 127.0.0.1.
        return [
            (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.2", port)),
            (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", port)),
        ]

    with WebhookReceiver() as receiver:
        attempt = deliver(receiver.url(host="hooks.example.com"), getaddrinfo=getaddrinfo)
        receiver.wait_for(1)
    assert attempt.ok, attempt.error


def test_a_redirect_is_not_followed():
    with WebhookReceiver() as target, WebhookReceiver() as receiver:
        receiver.behaviour = Behaviour(status=301, redirect_to=target.url("/elsewhere"))
        attempt = deliver(receiver.url())
        receiver.wait_for(1)
        assert target.requests == []
    assert not attempt.ok and attempt.status_code == 301
    assert "redirected (HTTP 301) to " + target.url("/elsewhere") in attempt.error
    assert "not followed" in attempt.error


def test_a_private_address_is_refused_unless_allowed():
    with WebhookReceiver() as receiver:
        refused = deliver(receiver.url(), allow_private=False)
        by_name = deliver(
            receiver.url(host="hooks.example.com"),
            allow_private=False,
            getaddrinfo=dns("127.0.0.1"),
        )
        assert receiver.requests == []
        allowed = deliver(receiver.url(), allow_private=True)
        receiver.wait_for(1)
    assert not refused.ok and refused.status_code is None
    assert "not a public address" in refused.error
    assert not by_name.ok and "blocked address" in by_name.error and "127.0.0.1" in by_name.error
    assert allowed.ok


def test_http_is_refused_unless_allowed():
    with WebhookReceiver() as receiver:
        attempt = deliver(receiver.url(), allow_http=False)
        assert receiver.requests == []
    assert not attempt.ok and attempt.status_code is None
    assert "https://" in attempt.error


def test_an_unresolvable_host():
    def getaddrinfo(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    attempt = deliver("https://nowhere.example/in", getaddrinfo=getaddrinfo)
    assert not attempt.ok and "could not be resolved" in attempt.error


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for hooks.test (no CA in the system store signed it)."""
    if not shutil.which("openssl"):
        pytest.skip("needs the openssl command")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        + ["-nodes", "-days", "1", "-subj", "/CN=hooks.test"]
        + ["-addext", "subjectAltName=DNS:hooks.test", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def test_https_sends_the_host_name_and_verifies_the_certificate(certificate):
    with WebhookReceiver(certificate=certificate) as receiver:
        url = receiver.url(host="hooks.test", scheme="https")
        attempt = deliver(url, allow_http=False, getaddrinfo=dns("127.0.0.1"))
        assert receiver.requests == []
    assert receiver.server_names == ["hooks.test"]
    assert not attempt.ok and attempt.status_code is None
    assert attempt.error.startswith("TLS failure with hooks.test (127.0.0.1)")
    assert "certificate verify failed" in attempt.error


def test_a_receiver_dripping_its_status_line_and_headers_is_cut_off_at_the_deadline():
    from tests.outbox.slowloris import SlowLorisReceiver

    # Each byte comes well within the read timeout: only the attempt's deadline ends it.
    timeout = Timeouts(connect=1, read=1, total=0.5)
    with SlowLorisReceiver(interval=0.05) as receiver:
        attempt = deliver(receiver.url(), timeout=timeout)
    assert not attempt.ok and attempt.status_code is None
    assert "timed out after 0.5 s in all" in attempt.error
    assert attempt.duration < timeout.total + MARGIN


def test_a_status_line_that_arrived_does_not_make_a_cut_off_attempt_a_success():
    from tests.outbox.slowloris import SlowLorisReceiver

    # The status line ("HTTP/1.1 200 OK") arrives; the headers never end.
    timeout = Timeouts(connect=1, read=1, total=0.5)
    with SlowLorisReceiver(interval=0.005, header_bytes=100_000) as receiver:
        attempt = deliver(receiver.url(), timeout=timeout)
    assert not attempt.ok
    assert "timed out after 0.5 s in all" in attempt.error
    assert attempt.duration < timeout.total + MARGIN
