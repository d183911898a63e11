"""The NetworkManager backend against a real NetworkManager (Debian's network-manager package),
confined: its own network namespace (a veth pair), its own mount namespace with a private
/run (D-Bus system bus, NM's runtime state, udev's database made by `udevadm test`) and
/etc/NetworkManager, its config, state and keyfiles in a temp dir, no conf.d of this machine,
DNS and hostname left alone, every device but v0 unmanaged. The host's own NetworkManager is
installed masked (`make apt-test`); the test proves this machine's NM and DNS files unchanged.
hwmgr runs inside those namespaces (nsenter), sets the values
through `nmcli connection modify`, NM writes the keyfile, a restarted NM reads it and applies
it when the connection comes up, and `hwmgr revert` puts the properties back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apply_env import REPO

pytestmark = [pytest.mark.root, pytest.mark.slow]  # NetworkManager starts twice

SETUP = """set -e
mount -t tmpfs none /run
mkdir -p /run/dbus /run/NetworkManager /run/netns
mount --bind {tmp}/lib /var/lib/NetworkManager
mount --bind {tmp}/etc /etc/NetworkManager
for d in v0 v1; do udevadm test --action=add /sys/class/net/$d >/dev/null 2>&1; done
dbus-daemon --system --fork --print-pid > {tmp}/dbus.pid
exec sleep 600
"""
CONF = """[main]
plugins=keyfile
no-auto-default=*
dns=none
rc-manager=unmanaged
hostname-mode=none
[keyfile]
path={tmp}/connections
unmanaged-devices=except:interface-name:v0
[device]
match-device=interface-name:v0
managed=1
"""
# what a NetworkManager let loose would change on this machine
HOST_FILES = ("/etc/resolv.conf", "/etc/hostname", "/etc/NetworkManager")


class ConfinedNM:
    """A netns + private mount namespace holding dbus-daemon and NetworkManager."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.ns = tmp, f"h27nm-{os.getpid()}"
        self.holder: subprocess.Popen | None = None
        self.nm: subprocess.Popen | None = None
        for d in ("lib", "connections", "etc", "conf.d", "system-conf.d"):
            (tmp / d).mkdir()
        (tmp / "nm.conf").write_text(CONF.format(tmp=tmp))
        subprocess.run(["ip", "netns", "add", self.ns], check=True)
        subprocess.run(["ip", "-n", self.ns, "link", "add", "v0", "type", "veth", "peer",
                        "name", "v1"], check=True)
        subprocess.run(["ip", "-n", self.ns, "link", "set", "v1", "up"], check=True)
        self.holder = subprocess.Popen(["ip", "netns", "exec", self.ns, "unshare", "-m",
                                        "--propagation", "private", "sh", "-c",
                                        SETUP.format(tmp=tmp)])
        deadline = time.monotonic() + 20
        while not (tmp / "dbus.pid").is_file() or not (tmp / "dbus.pid").read_text().strip():
            assert time.monotonic() < deadline, "dbus-daemon did not start"
            time.sleep(0.05)

    def argv(self, *cmd: str) -> list[str]:
        assert self.holder is not None
        return ["nsenter", "-t", str(self.holder.pid), "-m", "-n", *cmd]

    def x(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        env.pop("SSH_CONNECTION", None)
        return subprocess.run(self.argv(*cmd), capture_output=True, text=True, timeout=120,
                              check=check, cwd=REPO, env=env)

    def start_nm(self) -> None:
        t = self.tmp
        self.nm = subprocess.Popen(self.argv("NetworkManager", "--no-daemon",
                                             f"--config={t}/nm.conf",
                                             f"--config-dir={t}/conf.d",
                                             f"--system-config-dir={t}/system-conf.d",
                                             f"--intern-config={t}/lib/intern.conf",
                                             f"--state-file={t}/lib/NetworkManager.state"),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while "v0:ethernet:disconnected" not in self.x(
                "nmcli", "-t", "-f", "DEVICE,TYPE,STATE", "device", check=False).stdout \
                and "v0:ethernet:connected" not in self.x(
                "nmcli", "-t", "-f", "DEVICE,TYPE,STATE", "device", check=False).stdout:
            assert time.monotonic() < deadline, "NetworkManager does not manage v0"
            time.sleep(0.2)

    def stop_nm(self) -> None:
        if self.nm is not None and self.nm.poll() is None:
            self.nm.terminate()
            self.nm.wait(timeout=30)
        self.nm = None

    def gro(self) -> str:
        out = self.x("ethtool", "-k", "v0").stdout
        return out.split("generic-receive-offload:")[1].split()[0]

    def teardown(self) -> None:
        self.stop_nm()
        pid = self.tmp / "dbus.pid"
        if pid.is_file() and pid.read_text().strip():
            subprocess.run(["kill", pid.read_text().strip()], check=False)
        if self.holder is not None and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", self.ns], check=False)


@pytest.fixture
def nm(tmp_path: Path):
    if os.geteuid() != 0 or not shutil.which("NetworkManager") or not shutil.which("nsenter"):
        pytest.skip("needs root, NetworkManager (network-manager) and nsenter")
    before = {p: _snapshot(Path(p)) for p in HOST_FILES}
    env = ConfinedNM(tmp_path)
    try:
        env.start_nm()
        yield env
    finally:
        env.teardown()
    assert {p: _snapshot(Path(p)) for p in HOST_FILES} == before, "NM changed this machine"


def _snapshot(path: Path) -> object:
    """A file's bytes, or a directory's files and their bytes (None when absent)."""
    if path.is_dir():
        return {str(f): f.read_bytes() if f.is_file() else None for f in sorted(path.rglob("*"))}
    return path.read_bytes() if path.exists() else None


def test_networkmanager_reads_what_apply_wrote_and_revert_puts_it_back(nm: ConfinedNM,
                                                                       tmp_path: Path) -> None:
    nm.x("nmcli", "connection", "add", "type", "ethernet", "ifname", "v0", "con-name", "hw0",
         "ipv4.method", "disabled", "ipv6.method", "disabled")
    nm.x("nmcli", "connection", "up", "hw0")
    nm.x("ethtool", "-K", "v0", "gro", "off")
    keyfile = tmp_path / "connections/hw0.nmconnection"
    before = keyfile.read_bytes()
    changes = tmp_path / "changes.json"
    changes.write_text(json.dumps([{"interface": "v0", "item": "features.gro", "wanted": "on"}]))
    hw = [sys.executable, "-m", "hwmgr"]
    state = ["--state-dir", str(tmp_path / "state")]
    plan = nm.x(*hw, "apply", "--changes", str(changes), *state, "--dry-run", "--json")
    data = json.loads(plan.stdout)["data"]
    (c,) = data["changes"]
    assert c["persist"]["backend"] == "networkmanager", c  # and so no file of this machine
    assert c["persist"]["why"] == "NetworkManager manages v0 (connection hw0)"
    assert data["files"] == [] and data["nm"] == [
        {"connection": "hw0", "properties": {"ethtool.feature-gro": "on"}}]
    res = nm.x(*hw, "apply", "--changes", str(changes), *state, "--yes", check=False)
    assert res.returncode == 0, res.stderr
    assert nm.gro() == "on"
    assert "[ethtool]\nfeature-gro=true\n" in keyfile.read_text()  # what NM wrote
    # a fresh NetworkManager reads the keyfile and applies it when the connection comes up
    nm.stop_nm()
    nm.x("ethtool", "-K", "v0", "gro", "off")
    nm.start_nm()
    nm.x("nmcli", "connection", "up", "hw0")
    assert nm.x("nmcli", "-g", "ethtool.feature-gro", "connection", "show", "hw0"
                ).stdout.strip() == "on"
    assert nm.gro() == "on"
    rev = nm.x(*hw, "revert", *state, "--yes", check=False)
    assert rev.returncode == 0, rev.stderr
    assert nm.gro() == "off"
    assert "feature-gro" not in keyfile.read_text()
    # the [ethtool] setting apply created is removed again: the keyfile is byte for byte as
    # before but for the activation time NM itself records on `connection up`
    after = keyfile.read_bytes()
    assert [ln for ln in after.splitlines() if not ln.startswith(b"timestamp=")] == \
        [ln for ln in before.splitlines() if not ln.startswith(b"timestamp=")], after
