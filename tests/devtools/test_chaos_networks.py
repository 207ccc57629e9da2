"""Chaos soaks at once on one machine (``make test``'s MariaDB and PostgreSQL runs) each take a
private network of their own, so neither waits for the other and no packet goes astray."""

import os
import shutil
import socket
import subprocess
import sys

import pytest

from devtools.chaos.network import Network, stale_links
from devtools.chaos.run import NETWORK_OCTETS, take_network

pytestmark = pytest.mark.sqlite


def test_a_second_soak_takes_another_network_while_the_first_holds_its_own():
    first, first_lock = take_network()
    with first_lock:
        second, second_lock = take_network()
        with second_lock:
            assert first != second
            assert {first, second} <= set(NETWORK_OCTETS)
    # Let go, a network is free again for the next soak.
    again, again_lock = take_network()
    with again_lock:
        assert again in NETWORK_OCTETS


def test_every_address_of_a_soak_is_in_its_own_network():
    network = Network(3, tag="7", octet=233)
    assert network.cidr == "10.233.0.0/16"
    assert network.service == "10.233.0.1"
    assert [network.host_address(i) for i in (1, 2, 3)] == [
        "10.233.1.1",
        "10.233.2.1",
        "10.233.3.1",
    ]
    assert network.namespace_address(2) == "10.233.2.2"


def link(name: str, *addresses: str, family: str = "inet") -> dict:
    """A link as ``ip -j addr show`` describes it."""
    return {"ifname": name, "addr_info": [{"family": family, "local": a} for a in addresses]}


@pytest.mark.parametrize(
    ("links", "stale"),
    [
        ([], []),
        ([link("ic8111h", "10.231.1.1")], ["ic8111h"]),
        # Another soak's network, loopback (the service address) and other links stay.
        ([link("ic4621h", "10.232.1.1")], []),
        ([link("lo", "127.0.0.1", "10.231.0.1")], []),
        ([link("eth0", "10.231.9.9")], []),
        ([link("ic8111h", "fe80::1", family="inet6")], []),
        ([link("ic8111h"), link("ic8112h", "10.231.2.1")], ["ic8112h"]),
    ],
)
def test_the_links_a_killed_soak_left_in_a_network_are_found(links, stale):
    assert stale_links(links, 231) == stale


def reaches(network: Network, index: int, address: str, port: int) -> bool:
    """Whether a TCP connection from the replica's namespace ``index`` opens within 5 s."""
    connect = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 5)"
    command = [*network.prefix(index), sys.executable, "-c", connect, address, str(port)]
    return subprocess.run(command, capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"
)
def test_a_soak_reaches_the_host_from_each_namespace_where_a_killed_soak_left_its_network():
    octet, held = take_network()
    with held:
        left = Network(2, tag="901", octet=octet)
        left.create()  # and never destroyed: its soak was killed
        network = Network(2, tag="902", octet=octet)
        try:
            network.create()
            assert network.available
            for index in (1, 2):
                with socket.create_server((network.host_address(index), 0)) as listener:
                    port = listener.getsockname()[1]
                    assert reaches(network, index, network.host_address(index), port), index
        finally:
            network.destroy()
            left.destroy()
