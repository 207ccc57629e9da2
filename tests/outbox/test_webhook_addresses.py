"""Where a webhook may go: the URL's form, and public addresses only unless allowed."""

import socket

import pytest

from outbox.webhooks.addresses import BlockedAddress, check_url, resolve


@pytest.mark.parametrize(
    ("url", "allow_http", "allow_private", "problem"),
    [
        ("https://hooks.example.com/x", False, False, None),
        ("http://hooks.example.com/x", False, False, "must start with https://"),
        ("http://hooks.example.com/x", True, False, None),
        ("ftp://hooks.example.com/x", True, False, "must start with"),
        ("https:///x", False, False, "no host"),
        ("https://u:p@hooks.example.com/", False, False, "user name or password"),
        ("https://10.0.0.5/x", False, False, "not a public address"),
        ("https://10.0.0.5/x", False, True, None),
        ("https://[::ffff:127.0.0.1]/x", False, False, "not a public address"),
        ("https://hooks.example.com:99999/x", False, False, "not a URL"),
    ],
)
def test_check_url(url, allow_http, allow_private, problem):
    found = check_url(url, allow_http=allow_http, allow_private=allow_private)
    assert (found is None) if problem is None else (problem in found)


def resolver(*addresses):
    def getaddrinfo(host, port, type=0):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    return getaddrinfo


@pytest.mark.parametrize(
    ("addresses", "allow_private", "expected"),
    [
        (["93.184.216.34"], False, ["93.184.216.34"]),
        (["10.1.2.3", "93.184.216.34"], False, ["93.184.216.34"]),  # only the public one
        (["127.0.0.1"], True, ["127.0.0.1"]),
        (["127.0.0.1"], False, BlockedAddress),
        (["169.254.169.254"], False, BlockedAddress),  # cloud metadata
        (["192.168.1.1", "::1", "fd00::1", "224.0.0.1"], False, BlockedAddress),
    ],
    ids=["public", "mixed", "private-allowed", "loopback", "link-local", "all-private"],
)
def test_resolve(addresses, allow_private, expected):
    getaddrinfo = resolver(*addresses)
    if expected is BlockedAddress:
        with pytest.raises(BlockedAddress, match="INSTATIC_WEBHOOK_ALLOW_PRIVATE"):
            resolve("hooks.example.com", 443, allow_private=allow_private, getaddrinfo=getaddrinfo)
    else:
        found = resolve(
            "hooks.example.com", 443, allow_private=allow_private, getaddrinfo=getaddrinfo
        )
        assert found == expected
