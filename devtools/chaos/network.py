"""The replicas' network namespaces (see ``devtools.chaos``): a partition takes a link down."""

import os
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
