"""The webhook address guard: which URLs are accepted and which addresses may be reached."""

import socket

import pytest

from outbox.webhooks import addresses
from outbox.webhooks.addresses import BlockedAddress, UnresolvedHost, check_url, resolve


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/in",
        "https://hooks.example.com",
        "https://hooks.example.com:8443/in?x=1",
        "HTTPS://Hooks.Example.com/in",
        "https://8.8.8.8/in",
        "https://[2606:4700::1]/in",
        "https://hooks.example.com:1/",
        "https://hooks.example.com:65535/",
    ],
)
def test_accepted_urls(url):
    assert check_url(url, allow_http=False, allow_private=False) is None


@pytest.mark.parametrize(
    "url, words",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("http://hooks.example.com/in", "https://"),
        ("ftp://hooks.example.com/in", "must start with https://"),
        ("hooks.example.com/in", "must start with https://"),
        ("//hooks.example.com/in", "must start with https://"),
        ("https://user:pw@hooks.example.com/in", "user name or password"),
        ("https://user@hooks.example.com/in", "user name or password"),
        ("https:///in", "no host"),
        ("https://:8443/in", "no host"),
        ("https://hooks.example.com:0/", "port"),
        ("https://hooks.example.com:65536/", "port"),
        ("https://hooks.example.com:http/", "port"),
        ("https://hooks.example.com/a b", "spaces"),
        ("https://hooks.example.com/\r\nX: y", "control characters"),
        ("https://[::1/", "not a valid URL"),
        ("https://bü..example/", "not a valid domain name"),
        ("https://127.0.0.1/in", "not a public address"),
        ("https://10.1.2.3/in", "not a public address"),
        ("https://169.254.169.254/latest/meta-data", "not a public address"),
        ("https://[::1]/in", "not a public address"),
        ("https://[::ffff:127.0.0.1]/in", "not a public address"),
        ("https://0.0.0.0/in", "not a public address"),
    ],
)
def test_refused_urls_say_how_to_fix_them(url, words):
    problem = check_url(url, allow_http=False, allow_private=False)
    assert problem is not None and words in problem
    assert "\n" not in problem and problem.endswith(".")


def test_http_is_accepted_only_when_allowed():
    assert check_url("http://hooks.example.com/in", allow_http=True, allow_private=False) is None
    problem = check_url("ftp://hooks.example.com/", allow_http=True, allow_private=False)
    assert "https:// or http://" in problem


def test_private_literals_are_accepted_when_allowed():
    assert check_url("https://127.0.0.1:8443/in", allow_http=False, allow_private=True) is None


@pytest.mark.parametrize(
    "url, target, host_header",
    [
        ("https://h.example/in?x=1", ("https", "h.example", 443, "/in?x=1"), "h.example"),
        ("http://H.example:8080", ("http", "h.example", 8080, "/"), "h.example:8080"),
        (
            "https://[2606:4700::1]:8443/",
            ("https", "2606:4700::1", 8443, "/"),
            "[2606:4700::1]:8443",
        ),
        (
            "https://bücher.example/",
            ("https", "xn--bcher-kva.example", 443, "/"),
            "xn--bcher-kva.example",
        ),
    ],
)
def test_parse_url(url, target, host_header):
    parsed = addresses.parse_url(url, allow_http=True, allow_private=False)
    assert tuple(parsed) == target
    assert parsed.host_header == host_header


def test_parse_url_raises_the_sentence():
    with pytest.raises(ValueError, match="user name or password"):
        addresses.parse_url("https://u@h.example/", allow_http=False, allow_private=False)


def fake_dns(*ips):
    """A getaddrinfo answering ``ips`` for any host, and recording what it was asked."""
    asked = []

    def getaddrinfo(host, port, *args, **kwargs):
        asked.append((host, port))
        return [
            (
                socket.AF_INET6 if ":" in ip else socket.AF_INET,
                socket.SOCK_STREAM,
                socket.IPPROTO_TCP,
                "",
                (ip, port, 0, 0) if ":" in ip else (ip, port),
            )
            for ip in ips
        ]

    getaddrinfo.asked = asked
    return getaddrinfo


NOT_PUBLIC = [
    "127.0.0.1",
    "127.8.9.10",
    "10.0.0.5",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.2.1",
    "198.18.0.1",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "ff02::1",
    "ff0e::1",
    "2001:db8::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "2002:7f00:1::",
    "2002:a00:1::",
    "64:ff9b::7f00:1",
    "64:ff9b::a9fe:a9fe",
    # Counted global by Python's ipaddress, not public here: the deprecated site-local
    # range and the documentation ranges.
    "fec0::1",
    "feff:ffff::1",
    "3fff::1",
    "3fff:fff:ffff::1",
    "198.51.100.7",
    "203.0.113.7",
]


@pytest.mark.parametrize("ip", NOT_PUBLIC)
def test_addresses_that_are_not_public_are_blocked(ip):
    with pytest.raises(BlockedAddress) as caught:
        resolve("hooks.example.com", 443, allow_private=False, getaddrinfo=fake_dns(ip))
    assert "blocked address" in caught.value.message
    assert ip in caught.value.message and "INSTATIC_WEBHOOK_ALLOW_PRIVATE" in caught.value.message


@pytest.mark.parametrize("ip", NOT_PUBLIC)
def test_addresses_that_are_not_public_are_returned_when_allowed(ip):
    assert resolve("h.example", 443, allow_private=True, getaddrinfo=fake_dns(ip)) == [ip]


@pytest.mark.parametrize(
    "ip",
    [
        "8.8.8.8",
        "1.1.1.1",
        "2606:4700::1",
        "::ffff:8.8.8.8",
        "2002:808:808::",
        "64:ff9b::808:808",
        # Just outside the site-local and the new documentation range.
        "2a00:1450::1",
        "3ff0::1",
        "2001:db9::1",
    ],
)
def test_public_addresses_are_returned(ip):
    assert resolve("h.example", 443, allow_private=False, getaddrinfo=fake_dns(ip)) == [ip]


def test_only_the_public_addresses_of_a_mixed_answer_are_returned():
    dns = fake_dns("10.0.0.1", "8.8.8.8", "::1", "8.8.8.8", "1.1.1.1")
    assert resolve("h.example", 8443, allow_private=False, getaddrinfo=dns) == [
        "8.8.8.8",
        "1.1.1.1",
    ]
    assert dns.asked == [("h.example", 8443)]


def test_repeats_are_dropped_in_order_when_private_is_allowed():
    dns = fake_dns("127.0.0.1", "::1", "127.0.0.1")
    assert resolve("localhost", 80, allow_private=True, getaddrinfo=dns) == ["127.0.0.1", "::1"]


def test_a_name_that_does_not_resolve():
    def getaddrinfo(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(UnresolvedHost, match="nowhere.example could not be resolved"):
        resolve("nowhere.example", 443, allow_private=False, getaddrinfo=getaddrinfo)
    with pytest.raises(UnresolvedHost, match="has no address"):
        resolve("nowhere.example", 443, allow_private=False, getaddrinfo=fake_dns())


def test_the_real_resolver_blocks_loopback():
    with pytest.raises(BlockedAddress):
        resolve("127.0.0.1", 80, allow_private=False)
    assert resolve("127.0.0.1", 80, allow_private=True) == ["127.0.0.1"]


@pytest.mark.parametrize(
    "url, allow_http, allow_private, ips, words",
    [
        ("https://hooks.example.com/in", False, False, ["8.8.8.8"], None),
        ("http://hooks.example.com/in", False, False, ["8.8.8.8"], "INSTATIC_WEBHOOK_ALLOW_HTTP"),
        ("http://hooks.example.com/in", True, False, ["8.8.8.8"], None),
        # With DEBUG: http:// only to loopback.
        ("http://hooks.example.com/in", "loopback", True, ["8.8.8.8"], "only to loopback"),
        ("http://localhost:8000/in", "loopback", True, ["127.0.0.1", "::1"], None),
        ("http://127.0.0.1:8000/in", "loopback", True, ["127.0.0.1"], None),
        ("http://mixed.example/in", "loopback", True, ["127.0.0.1", "10.0.0.1"], "loopback"),
        ("https://hooks.example.com/in", "loopback", False, ["8.8.8.8"], None),
        # Private addresses, written or resolved, name the setting that allows them.
        ("https://10.0.0.5/in", False, False, [], "INSTATIC_WEBHOOK_ALLOW_PRIVATE"),
        ("https://intranet.example/in", False, False, ["10.0.0.5"], "ALLOW_PRIVATE"),
        ("https://intranet.example/in", False, True, ["10.0.0.5"], None),
        # A name that does not resolve now may resolve later: not refused when saved.
        ("https://later.example/in", False, False, [], None),
    ],
    ids=[
        "https public",
        "http refused",
        "http allowed",
        "debug http to a public host",
        "debug http to localhost",
        "debug http to 127.0.0.1",
        "debug http to loopback and private",
        "debug https",
        "private literal",
        "name resolving to private",
        "private allowed",
        "unresolved",
    ],
)
def test_refusal_says_what_the_sender_will_refuse(url, allow_http, allow_private, ips, words):
    from outbox.webhooks.addresses import refusal

    problem = refusal(
        url, allow_http=allow_http, allow_private=allow_private, getaddrinfo=fake_dns(*ips)
    )
    assert (problem is None) if words is None else (words in problem), problem
