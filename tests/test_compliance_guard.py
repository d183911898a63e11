"""Don't cut the branch we sit on: default route through a stack, a real sshd peer, --force.

This kernel has no bonding or 8021q module, so the stack is a bridge over the target veth
(`ip link add type bridge`); guard follows sysfs upper_*/lower_*/master the same way for all.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.apply_env import ApplyNs, waiter_pids

pytestmark = pytest.mark.root
GRO_ON = [{"interface": "v0", "item": "features.gro", "current": "off", "wanted": "on"}]


def _bridge_default_route(env: ApplyNs) -> None:
    env.ip("link", "add", "hbr0", "type", "bridge")
    env.ip("link", "set", "v0", "master", "hbr0")
    env.ip("link", "set", "hbr0", "up")
    env.ip("addr", "add", "10.252.0.1/24", "dev", "hbr0")
    env.ip("route", "add", "default", "via", "10.252.0.2", "dev", "hbr0")


def test_default_route_through_a_bridge_over_the_nic_is_refused(ns: ApplyNs) -> None:
    _bridge_default_route(ns)
    res = ns.apply(GRO_ON, "--yes")
    assert res.returncode == 9
    assert "v0 carries the default route via hbr0" in res.stderr
    assert ns.gro() == "off" and not Path(ns.state).exists()


def test_txqueuelen_on_the_guarded_nic_is_applied(ns: ApplyNs) -> None:
    """A queue length never resets the link, so the uplink may take it without --force."""
    _bridge_default_route(ns)
    res = ns.apply([{"interface": "v0", "item": "txqueuelen", "current": ns.qlen(),
                     "wanted": 4321}], "--yes")
    assert res.returncode == 0, res.stderr
    assert ns.qlen() == 4321


def test_unrelated_interface_is_not_refused(ns: ApplyNs) -> None:
    ns.ip("addr", "add", "10.252.0.1/24", "dev", "v1")
    ns.ip("route", "add", "default", "via", "10.252.0.2", "dev", "v1")
    res = ns.apply(GRO_ON, "--yes")
    assert res.returncode == 0, res.stderr
    assert ns.gro() == "on"


@pytest.fixture
def sshd(ns: ApplyNs, tmp_path: Path):
    """A real sshd in the namespace on 10.253.0.1:<high port>, and an established client
    connection to it from a second namespace across the veth (no SSH_CONNECTION anywhere)."""
    binary = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(binary) or not shutil.which("ssh-keygen"):
        pytest.skip("openssh-server is not installed")
    peer = f"{ns.ns}-p"
    subprocess.run(["ip", "netns", "add", peer], check=True, timeout=30)
    try:
        ns.ip("link", "set", "v1", "netns", peer)
        subprocess.run(["ip", "-n", peer, "link", "set", "v1", "up"], check=True)
        subprocess.run(["ip", "-n", peer, "addr", "add", "10.253.0.2/24", "dev", "v1"],
                       check=True)
        ns.ip("addr", "add", "10.253.0.1/24", "dev", "v0")
        key = tmp_path / "hostkey"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                       check=True, timeout=30)
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        port = 42000 + os.getpid() % 2000
        proc = ns.start([binary, "-D", "-e", "-f", "/dev/null", "-h", str(key),
                         "-o", f"ListenAddress=10.253.0.1:{port}", "-o", "PidFile=none"])
        deadline = time.monotonic() + 20
        while not ns.x("ss", "-Htln", f"sport = :{port}").stdout.strip():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "sshd did not start listening"
            time.sleep(0.1)
        code = ("import socket,sys,time\n"
                f"s=socket.create_connection(('10.253.0.1',{port}))\n"
                "print('up',flush=True); time.sleep(600)\n")
        client = subprocess.Popen(["ip", "netns", "exec", peer, sys.executable, "-c", code],
                                  stdout=subprocess.PIPE, text=True)
        ns.procs.append(client)
        assert client.stdout and client.stdout.readline().strip() == "up"
        yield port
    finally:
        subprocess.run(["ip", "netns", "del", peer], check=False, timeout=30)


def test_established_sshd_peer_socket_is_refused(ns: ApplyNs, sshd: int) -> None:
    out = ns.x("ss", "-Htn", "state", "established", f"sport = :{sshd}").stdout
    assert "10.253.0.2" in out  # the real socket exists, seen from sshd's side
    res = ns.apply(GRO_ON, "--yes")
    assert res.returncode == 9, res.stderr
    assert "v0 carries an SSH session from 10.253.0.2" in res.stderr
    assert ns.gro() == "off"


def _wait_for(predicate, what: str, limit: float = 90) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)


@pytest.mark.slow  # waits for the timed revert
def test_force_applies_last_and_timed_revert_fires(ns: ApplyNs) -> None:
    _bridge_default_route(ns)
    changes = GRO_ON + [{"interface": None, "item": "sysctl.net.ipv4.tcp_syncookies",
                         "current": None, "wanted": 0}]
    ns.x("sh", "-c", "echo 1 > /proc/sys/net/ipv4/tcp_syncookies")
    res = ns.apply(changes, "--yes", "--force", "--confirm-timeout", "2", "--json")
    assert res.returncode == 0, res.stderr
    txn = json.loads(res.stdout)["data"]["transaction"]
    names = [s["name"] for s in txn["steps"]]
    assert names[-2:] == ["arm timed revert", "set v0:features.generic-receive-offload"]
    assert names.index("set sysctl.net.ipv4.tcp_syncookies") < names.index("arm timed revert")
    # nobody confirms: the detached waiter reverts the whole apply
    _wait_for(lambda: not waiter_pids(ns.state), "the timed revert to finish")
    assert ns.gro() == "off" and ns.sysctl("net.ipv4.tcp_syncookies") == "1"
    hist = json.loads(ns.hwmgr("history", "--state-dir", ns.state, "--json").stdout)
    top = hist["data"]["transactions"][0]
    assert (top["kind"], top["driver"], top["state"]) == ("revert", f"#{txn['id']}",
                                                           "committed")
    assert not (ns.root / "etc/systemd/network/10-hwmgr-v0.link").exists()


@pytest.mark.slow  # waits for the timed revert
def test_force_confirmed_in_time_is_kept(ns: ApplyNs) -> None:
    _bridge_default_route(ns)
    res = ns.apply(GRO_ON, "--yes", "--force", "--confirm-timeout", "3", "--json")
    assert res.returncode == 0, res.stderr
    tid = json.loads(res.stdout)["data"]["transaction"]["id"]
    ok = ns.hwmgr("apply", "--state-dir", ns.state, "--confirm", str(tid))
    assert ok.returncode == 0, ok.stderr
    _wait_for(lambda: not waiter_pids(ns.state), "the waiter to give up")
    assert ns.gro() == "on"
    hist = json.loads(ns.hwmgr("history", "--state-dir", ns.state, "--json").stdout)
    assert [t["kind"] for t in hist["data"]["transactions"]] == ["apply"]
    again = ns.hwmgr("apply", "--state-dir", ns.state, "--confirm", str(tid))
    assert again.returncode == 4


def test_ssh_peer_reader_on_a_fake_proc(tmp_path: Path) -> None:
    """/proc/net/tcp6 parsing (v4-mapped peers) without a live socket, through a fake root."""
    from hwmgr.host.runner import Result
    from hwmgr.host.seam import Host
    from hwmgr.inventory.guard import ssh_peer_interfaces

    (tmp_path / "proc/net").mkdir(parents=True)
    (tmp_path / "proc/net/tcp").write_text("  sl  local_address rem_address   st\n")
    (tmp_path / "proc/net/tcp6").write_text(
        "  sl  local_address rem_address   st\n"
        "   0: 0000000000000000FFFF00000100000A:0016 0000000000000000FFFF00000200000A:C350 01 "
        "0 0 0 0 0 0 0 0 0\n")

    class Routes:
        def run(self, argv, **kw):  # noqa: ANN001, ANN003 - a runner answering `ip route get`
            if argv[:3] == ["ip", "route", "get"]:
                return Result(tuple(argv), 0, f"{argv[3]} dev eth9 src 10.0.0.1 uid 0\n")
            return Result(tuple(argv), 127, "", "not here")

    assert ssh_peer_interfaces(Host(tmp_path, Routes())) == {"eth9": "10.0.0.2"}
    assert socket.inet_aton("10.0.0.2")  # (the address the hex above encodes)
