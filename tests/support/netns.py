"""Two network namespaces joined by a veth pair, for real iperf3 traffic that never touches eth0.

`VethLink.create(tag)` makes `hw<tag>a`/`hw<tag>b` (names carry the pid, so parallel runs do
not collide), addresses 10.251.0.1/24 (side a) and 10.251.0.2/24 (side b); `teardown()` removes
both namespaces (which removes the veth pair) and is safe to call twice.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

A_IP = "10.251.0.1"
B_IP = "10.251.0.2"
UNUSED_IP = "10.251.0.77"  # on the link's subnet, nobody answers ARP for it
IP = shutil.which("ip") or "/usr/sbin/ip"  # absolute: tests run hwmgr with a stripped PATH


def sh(argv: Sequence[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run a setup command; raise with its stderr when `check` and it fails."""
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                         check=False)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: rc {res.returncode}: {res.stderr.strip()}")
    return res


@dataclass
class VethLink:
    """A veth pair between namespaces `ns_a` (where hwmgr runs) and `ns_b` (the peer)."""

    ns_a: str
    ns_b: str
    if_a: str
    if_b: str
    procs: list[subprocess.Popen] = field(default_factory=list)

    @classmethod
    def create(cls, tag: str = "") -> VethLink:
        pid = os.getpid()
        link = cls(f"hwmgr-{pid}{tag}-a", f"hwmgr-{pid}{tag}-b",
                   f"hv{pid % 100000}{tag}a"[:15], f"hv{pid % 100000}{tag}b"[:15])
        try:
            sh(["ip", "netns", "add", link.ns_a])
            sh(["ip", "netns", "add", link.ns_b])
            sh(["ip", "link", "add", link.if_a, "netns", link.ns_a, "type", "veth",
                "peer", "name", link.if_b, "netns", link.ns_b])
            for ns, ifname, ip in ((link.ns_a, link.if_a, A_IP), (link.ns_b, link.if_b, B_IP)):
                sh(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", ifname])
                sh(["ip", "-n", ns, "link", "set", ifname, "up"])
                sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        except BaseException:
            link.teardown()
            raise
        return link

    def argv(self, ns: str, argv: Sequence[str]) -> list[str]:
        """`argv` run inside namespace `ns`."""
        return [IP, "netns", "exec", ns, *argv]

    def run_a(self, argv: Sequence[str], env: dict[str, str] | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a command (e.g. the hwmgr CLI) inside side a."""
        full = dict(os.environ)
        full.update(env or {})
        return subprocess.run(self.argv(self.ns_a, argv), capture_output=True, text=True,
                              timeout=timeout, env=full, check=False)

    def start_b(self, argv: Sequence[str]) -> subprocess.Popen:
        """Start a long-running process inside side b (stopped by teardown)."""
        proc = subprocess.Popen(self.argv(self.ns_b, argv), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    def iperf3_server(self, port: int = 5201) -> subprocess.Popen:
        """A real `iperf3 -s` on side b, returned once it accepts connections."""
        proc = self.start_b(["iperf3", "-s", "-p", str(port)])
        self.wait_port(port, proc)
        return proc

    def stall_server(self, port: int) -> subprocess.Popen:
        """A Python server on side b that accepts connections and never says a word."""
        code = (
            "import socket,time\n"
            "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            f"s.bind(('{B_IP}',{port})); s.listen(8); held=[]\n"
            "while True:\n"
            "    c,_=s.accept(); held.append(c)\n"
        )
        proc = self.start_b([sys.executable, "-c", code])
        self.wait_port(port, proc)
        return proc

    def wait_port(self, port: int, proc: subprocess.Popen, timeout: float = 10) -> None:
        """Wait until something listens on side b's `port` (checked with `ss` in the netns)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server in {self.ns_b} exited: {proc.stderr.read()}")
            out = sh(["ip", "netns", "exec", self.ns_b, "ss", "-Htln", f"sport = :{port}"],
                     check=False).stdout
            if out.strip():
                return
            time.sleep(0.05)
        raise RuntimeError(f"nothing listens on {B_IP}:{port} after {timeout}s")

    def shape(self, rate: str = "100mbit") -> None:
        """Shape side a's egress (a → b) with a token bucket, as in seed 004."""
        sh(["tc", "-n", self.ns_a, "qdisc", "add", "dev", self.if_a, "root", "tbf",
            "rate", rate, "burst", "32kbit", "latency", "400ms"])

    def unshape(self) -> None:
        sh(["tc", "-n", self.ns_a, "qdisc", "del", "dev", self.if_a, "root"], check=False)

    def teardown(self) -> None:
        """Stop started processes and delete both namespaces (idempotent)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            if proc.stderr:
                proc.stderr.close()
        self.procs.clear()
        for ns in (self.ns_a, self.ns_b):
            sh(["ip", "netns", "del", ns], check=False)


def leftover_namespaces() -> list[str]:
    """Namespaces this process created and did not remove (for a teardown assertion)."""
    prefix = f"hwmgr-{os.getpid()}"
    return [n for n in (p.name for p in Path("/run/netns").glob("*")) if n.startswith(prefix)]


def free_port() -> int:
    """A TCP port number unlikely to be in use (namespaces are private, so any will do)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
