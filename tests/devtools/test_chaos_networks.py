"""Chaos soaks at once on one machine (``make test``'s MariaDB and PostgreSQL runs) each take a
private network of their own, so neither waits for the other and no packet goes astray."""

import pytest

from devtools.chaos.network import Network
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
