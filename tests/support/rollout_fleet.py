"""Rollout test hosts: network namespaces whose `v0` is a veth to a peer namespace of their
own, the peer serving iperf3 on a loopback address of its own (10.250.N.1) routed over it.

Every `v0` starts at txqueuelen 500 (the site layer of tests/ansible_fleet.py wants 1000) and
is shaped with tc tbf: 300 Mbit/s, so that a gate's iperf3 run costs little CPU, or 10 Mbit/s
for a host built to fail its throughput gate (floor `FLOOR`). Used by
tests/test_rollout_fleet.py and bench/rollout.
"""

from __future__ import annotations

import json
import subprocess

from support import ansible_fleet as af

FLOOR = 100  # Mbit/s: the gate's floor
RATE, SLOW = "300mbit", "10mbit"


class RolloutFleet(af.Fleet):
    """af.Fleet's hosts, each with a peer namespace serving iperf3 on its own address."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.servers: list[subprocess.Popen] = []
        self.ns_of: dict[str, str] = {}

    def peered(self, name: str, n: int, *, shaped: bool = False) -> None:
        """Host `name` (the n-th: its addresses), its peer, the peer's iperf3 and its vars."""
        ns = self.namespace(txqueuelen=af.TXQ_DRIFTED)
        peer = f"{ns}-p"
        af.sh([af.IP, "netns", "add", peer])
        self.namespaces.append(peer)
        af.sh([af.IP, "-n", ns, "link", "del", "v0"])  # v0's pair goes to the peer instead
        af.sh([af.IP, "-n", ns, "link", "add", "v0", "txqueuelen", str(af.TXQ_DRIFTED),
               "type", "veth", "peer", "name", "v1", "netns", peer])
        addr, peer_addr, service = (f"10.249.{n}.1", f"10.249.{n}.2", f"10.250.{n}.1")
        af.sh([af.IP, "-n", ns, "addr", "add", f"{addr}/30", "dev", "v0"])
        af.sh([af.IP, "-n", ns, "link", "set", "v0", "up"])
        for argv in (["addr", "add", f"{peer_addr}/30", "dev", "v1"], ["link", "set", "v1", "up"],
                     ["link", "set", "lo", "up"], ["addr", "add", f"{service}/32", "dev", "lo"]):
            af.sh([af.IP, "-n", peer, *argv])
        af.sh([af.IP, "-n", ns, "route", "add", f"{service}/32", "via", peer_addr])
        af.sh([af.IP, "netns", "exec", ns, "tc", "qdisc", "add", "dev", "v0", "root", "tbf",
               "rate", SLOW if shaped else RATE, "burst", "64kbit", "latency", "50ms"])
        self.servers.append(subprocess.Popen(
            [af.IP, "netns", "exec", peer, "iperf3", "-s", "-B", service],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        py, _ = self.wrappers(ns, installed=True)
        self.hosts[name] = {
            "ansible_connection": "local", "ansible_python_interpreter": str(py),
            "hwmgr_state_dir": str(self.tmp / "state" / name),
            "hwmgr_persist_root": str(self.tmp / "persist" / name),
            "hwmgr_rollout_peer": service, "hwmgr_rollout_floor": FLOOR}
        (self.tmp / "persist" / name).mkdir(parents=True)
        self.ns_of[name] = ns

    def stop(self) -> None:
        """Stop the iperf3 servers, then remove every namespace."""
        for proc in self.servers:
            proc.terminate()
            proc.wait(timeout=10)
        self.servers.clear()
        self.teardown()

    def txqueuelen(self, name: str) -> int:
        """The host's v0 txqueuelen as the kernel reports it."""
        out = af.sh([af.IP, "-n", self.ns_of[name], "-j", "link", "show", "v0"]).stdout
        return int(json.loads(out)[0]["txqlen"])


