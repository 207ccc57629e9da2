"""The replicas' network namespaces (see ``devtools.chaos``): a partition takes a link down."""

import json
import os
import re
import shutil
import subprocess

from devtools.chaos.clock import log


class Network:
    """One namespace per replica, each joined to the host by a veth pair, all in the soak's
    own ``10.<octet>.0.0/16`` (soaks at once on one machine each take another octet)."""

    def __init__(self, count: int, tag: str, octet: int = 231):
        self.count = count
        self.tag = tag
        self.octet = octet
        self.available = os.geteuid() == 0 and shutil.which("ip") is not None
        self.created: list[int] = []

    def ns(self, index: int) -> str:
        return f"ichaos{self.tag}{index}"

    def host_link(self, index: int) -> str:
        return f"ic{self.tag}{index}h"

    @property
    def cidr(self) -> str:
        """The soak's private network, which its database server trusts."""
        return f"10.{self.octet}.0.0/16"

    def host_address(self, index: int) -> str:
        return f"10.{self.octet}.{index}.1"

    def namespace_address(self, index: int) -> str:
        return f"10.{self.octet}.{index}.2"

    @property
    def service(self) -> str:
        """The address of the soak's own services (its webhook receiver) on the host: on its
        loopback link, which no partition takes down, routed from every namespace through the
        namespace's own link."""
        return f"10.{self.octet}.0.1"

    def service_address(self) -> str:
        """Return where every replica reaches the soak's services (loopback without
        namespaces)."""
        return self.service if self.available else "127.0.0.1"

    def _ip(self, *args: str, check: bool = True) -> None:
        subprocess.run(["ip", *args], check=check, capture_output=True)

    def create(self) -> None:
        if not self.available:
            return
        self.clear_stale()
        try:
            # Left behind by a soak that was killed, the address is there already: fine.
            self._ip("addr", "add", f"{self.service}/32", "dev", "lo", check=False)
            for i in range(1, self.count + 1):
                ns, host, peer = self.ns(i), self.host_link(i), f"ic{self.tag}{i}n"
                self._ip("netns", "add", ns)
                self.created.append(i)
                self._ip("link", "add", host, "type", "veth", "peer", "name", peer)
                self._ip("link", "set", peer, "netns", ns)
                self._ip("addr", "add", f"{self.host_address(i)}/24", "dev", host)
                self._ip("link", "set", host, "up")
                self._ip("-n", ns, "addr", "add", f"{self.namespace_address(i)}/24", "dev", peer)
                self._ip("-n", ns, "link", "set", peer, "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
                self._ip("-n", ns, "route", "add", self.service, "via", self.host_address(i))
        except subprocess.CalledProcessError as exc:
            log(f"network namespaces unavailable ({exc.stderr.decode().strip()}); no partitions")
            self.destroy()
            self.available = False

    def clear_stale(self) -> None:
        """Remove the links and namespaces a killed soak left in this network.

        The caller holds the network's lock (see ``devtools.chaos.run.take_network``), so any
        link that carries one of its addresses is stale; left there, it shares a route with the
        new link of the same replica, and the host answers that replica through the dead link
        (its connections never open).
        """
        shown = subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True)
        for link in stale_links(json.loads(shown.stdout or "[]"), self.octet):
            log(f"removing {link}, left in 10.{self.octet}.0.0/16 by a soak that was killed")
            self._ip("link", "del", link, check=False)  # its namespace's end goes with it
            self._ip("netns", "del", namespace_of(link), check=False)

    def prefix(self, index: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(index)] if self.available else []

    def address(self, index: int) -> str:
        return self.host_address(index) if self.available else "127.0.0.1"

    def partition(self, index: int, down: bool) -> None:
        self._ip("link", "set", self.host_link(index), "down" if down else "up")

    def destroy(self) -> None:
        if self.available:
            self._ip("addr", "del", f"{self.service}/32", "dev", "lo", check=False)
        for i in self.created:
            self._ip("link", "del", self.host_link(i), check=False)
            self._ip("netns", "del", self.ns(i), check=False)
        self.created = []


#: A replica's host link (``ic<tag><index>h``) and the namespace it joins (``ichaos<tag><index>``).
HOST_LINK = re.compile(r"ic(\d+)h")


def stale_links(links: list[dict], octet: int) -> list[str]:
    """Return the host links (from ``ip -j addr show``) that carry an address of the network
    ``10.<octet>.0.0/16``: replicas' links, never loopback (which holds the soak's service
    address, added again by each soak)."""
    return [
        link["ifname"]
        for link in links
        if HOST_LINK.fullmatch(link.get("ifname", ""))
        and any(
            address.get("family") == "inet" and address.get("local", "").startswith(f"10.{octet}.")
            for address in link.get("addr_info", [])
        )
    ]


def namespace_of(host_link: str) -> str:
    """Return the namespace a replica's host link joins."""
    return "ichaos" + HOST_LINK.fullmatch(host_link).group(1)
