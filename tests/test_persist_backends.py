"""The persistence backends read by their real consumers: udev's own .link parser
(`udevadm test-builtin net_setup_link`, systemd 252 here), Debian's `ifquery` for ifupdown
stanzas, initscripts' ETHTOOL_OPTS splitting rules for network-scripts; each file edited in
place with every other byte kept, and a backup that restores it byte for byte.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.apply_env import ApplyNs, tree_bytes

from hwmgr.compliance.apply import Change, plan_apply
from hwmgr.compliance.persist.distro import split_ethtool_opts
from hwmgr.host.runner import Result, SubprocessRunner
from hwmgr.host.seam import Host

FIXTURES = Path(__file__).parent / "fixtures/hosts"


class NoTools:
    def run(self, argv, **kw):  # noqa: ANN001, ANN003
        return Result(tuple(argv), 127, "", f"{argv[0]}: command not found")


WANT = [Change("eth7", "ring.rx", 256, 4096), Change("eth7", "pause.rx", "off", "on"),
        Change("eth7", "features.gro", "on", "off"), Change("eth7", "mtu", 1500, 9000),
        Change("eth7", "txqueuelen", 1000, 10000)]


def _tree(tmp: Path, release: str) -> Path:
    net = tmp / "sys/class/net/eth7"
    net.mkdir(parents=True)
    (net / "address").write_text("00:1b:21:aa:bb:cc\n")
    (net / "addr_assign_type").write_text("0\n")
    (tmp / "etc").mkdir()
    (tmp / "etc/redhat-release").write_text(release)
    return tmp


def _by_item(plan) -> dict:  # noqa: ANN001
    return {c["item"]: c["persist"] for c in plan.changes}


# ---------------------------------------------------------------- network-scripts
IFCFG = (b"# site file, kept byte for byte\r\nDEVICE=eth7\nONBOOT=yes\nBOOTPROTO=none\n"
         b"ETHTOOL_OPTS='speed 1000 duplex full; -G eth7 tx 512'\nIPADDR=10.0.0.7\n")


def test_el7_with_an_ifcfg_file_persists_in_ethtool_opts_and_mtu(tmp_path: Path) -> None:
    root = _tree(tmp_path, "CentOS Linux release 7.6.1810 (Core)\n")
    ifcfg = root / "etc/sysconfig/network-scripts/ifcfg-eth7"
    ifcfg.parent.mkdir(parents=True)
    ifcfg.write_bytes(IFCFG)
    plan = plan_apply(Host(root, NoTools()), WANT)
    rows = _by_item(plan)
    assert rows["ring.rx"]["backend"] == "network-scripts"
    assert rows["mtu"]["key"] == "MTU"
    # initscripts has no TXQUEUELEN: a udev rule carries it, with the reason
    assert rows["txqueuelen"]["backend"] == "udev-rule"
    assert "ifup-eth reads MTU and ETHTOOL_OPTS only" in rows["txqueuelen"]["why"]
    new = next(f["content"] for f in plan.files if f["path"].endswith("ifcfg-eth7")).encode()
    assert new == (b"# site file, kept byte for byte\r\nDEVICE=eth7\nONBOOT=yes\nBOOTPROTO=none\n"
                   b'ETHTOOL_OPTS="speed 1000 duplex full; -G eth7 tx 512 rx 4096; '
                   b'-A eth7 rx on; -K eth7 generic-receive-offload off"\n'
                   b"IPADDR=10.0.0.7\nMTU=9000\n")
    # EL7's initscripts has no net.hotplug: the udev rule re-applies them on a driver reload
    rule = next(f["content"] for f in plan.files if f["path"].endswith(".rules"))
    assert 'RUN+="/sbin/ethtool -G $name rx 4096"' in rule
    assert 'ATTR{tx_queue_len}="10000"' in rule
    # what initscripts' ethtool_set runs for it (network-functions: IFS=';', then words)
    value = new.split(b'ETHTOOL_OPTS="')[1].split(b'"')[0].decode()
    assert split_ethtool_opts(value) == [
        ["-s", "$DEVICE", "speed", "1000", "duplex", "full"],
        ["-G", "eth7", "tx", "512", "rx", "4096"], ["-A", "eth7", "rx", "on"],
        ["-K", "eth7", "generic-receive-offload", "off"]]


def test_el6_needs_no_extra_rule_because_net_hotplug_runs_ifup_on_add(tmp_path: Path) -> None:
    root = _tree(tmp_path, "CentOS release 6.10 (Final)\n")
    ifcfg = root / "etc/sysconfig/network-scripts/ifcfg-eth7"
    ifcfg.parent.mkdir(parents=True)
    ifcfg.write_bytes(IFCFG)
    plan = plan_apply(Host(root, NoTools()), WANT[:1])
    assert [f["path"] for f in plan.files] == ["/etc/sysconfig/network-scripts/ifcfg-eth7"]


def test_the_initscripts_splitting_rule_sends_any_group_with_a_dash_to_ethtool() -> None:
    """`[[ "${opts}" =~ [[:space:]]*- ]]` is unanchored: a '-' anywhere makes the group a
    full ethtool command line; an empty group between two ';' is an `ethtool -s DEV` call."""
    assert split_ethtool_opts("autoneg off;;  -K eth0 tso off ; ") == [
        ["-s", "$DEVICE", "autoneg", "off"], ["-s", "$DEVICE"], ["-K", "eth0", "tso", "off"],
        ["-s", "$DEVICE"]]
    assert split_ethtool_opts("wol g;") == [["-s", "$DEVICE", "wol", "g"]]


def _bash_ethtool_set(value: str) -> list[list[str]]:
    """initscripts' ethtool_set loop (network-functions, 9.03 and 9.49 alike) run by bash with
    an `ethtool` that prints its argv: the real shell's splitting, not ours."""
    script = r'''
ethtool() { printf '%s\x1f' "$@"; printf '\n'; }
REALDEVICE='$DEVICE'
oldifs=$IFS; IFS=';'
for opts in $ETHTOOL_OPTS ; do
    IFS=$oldifs
    if [[ "${opts}" =~ [[:space:]]*- ]]; then ethtool $opts; else ethtool -s ${REALDEVICE} $opts; fi
    IFS=';'
done
'''
    out = subprocess.run(["bash", "-c", script], env={"ETHTOOL_OPTS": value}, check=True,
                         capture_output=True, text=True).stdout
    return [ln.split("\x1f")[:-1] for ln in out.splitlines()]


@pytest.mark.parametrize("value", ["speed 1000 duplex full; -G eth7 tx 512 rx 4096",
                                   "-K eth7 tso off;-A eth7 rx on", "autoneg off;;  -L eth7 "
                                   "combined 4 ; ", "wol g;", ";", ""])
def test_our_splitting_matches_bash_running_the_initscripts_loop(value: str) -> None:
    assert split_ethtool_opts(value) == _bash_ethtool_set(value)


def test_el6_and_el7_fixtures_without_ifcfg_use_udev_and_say_why() -> None:
    for snap, why in (("seed002-before", "EL 7 ships systemd 219"),
                      ("seed000-ustor", "EL 6 ships no systemd")):
        host = Host(FIXTURES / snap, NoTools())
        iface = sorted(os.listdir(FIXTURES / snap / "sys/class/net"))[-1]
        plan = plan_apply(host, [Change(iface, "ring.rx", 256, 4096)])
        (c,) = plan.changes
        assert c["persist"]["backend"] == "udev-rule", c
        assert any(why in n for n in plan.notes), plan.notes


# ---------------------------------------------------------------- ifupdown
INTERFACES = (b"# The loopback network interface\nauto lo\niface lo inet loopback\n\n"
              b"allow-hotplug eth7\niface eth7 inet static\n\taddress 10.0.0.7/24\n\n"
              b"# next one\nauto eth8\niface eth8 inet dhcp\n")


@pytest.mark.skipif(shutil.which("ifquery") is None, reason="needs ifupdown's ifquery")
def test_ifupdown_post_up_lines_are_what_ifquery_reads(tmp_path: Path) -> None:
    root = _tree(tmp_path, "")
    (root / "etc/redhat-release").unlink()
    (root / "etc/network").mkdir()
    (root / "etc/network/interfaces").write_bytes(INTERFACES)
    plan = plan_apply(Host(root, NoTools()), WANT[:2] + WANT[4:])
    assert {p["backend"] for p in _by_item(plan).values()} == {"ifupdown"}
    (f,) = plan.files
    new = f["content"].encode()
    start, end = new.index(b"\t# hwmgr"), new.rindex(b"|| true\n") + len(b"|| true\n")
    assert new[:start] + new[end:] == INTERFACES  # our block in the stanza, the rest kept
    path = tmp_path / "interfaces.new"
    path.write_bytes(new)
    out = subprocess.run(["ifquery", "-i", str(path), "eth7"], capture_output=True,
                         text=True, check=True).stdout
    assert "address: 10.0.0.7" in out.splitlines()  # the site's lines still read
    # ifupdown reads `post-up` as its alias `up`: run after the interface is configured
    assert [ln for ln in out.splitlines() if ln.startswith("up:")] == [
        "up: /sbin/ethtool -G eth7 rx 4096 || true",
        "up: /sbin/ethtool -A eth7 rx on || true",
        "up: /sbin/ip link set dev eth7 txqueuelen 10000 || true"]
    # applied again on top of itself: the same file (our block is replaced, not appended)
    (root / "etc/network/interfaces").write_bytes(new)
    assert plan_apply(Host(root, NoTools()), WANT[:2] + WANT[4:]).files[0]["content"] == \
        new.decode()


# ---------------------------------------------------------------- systemd .link via udev
def _netns(name: str) -> None:
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "-n", name, "link", "add", "v0", "type", "veth", "peer", "name",
                    "v1"], check=True)


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a namespace")
def test_udev_reads_the_link_file_and_applies_it_on_device_add(tmp_path: Path) -> None:
    """udev's own parser and net_setup_link builtin (what runs on every device add) take
    our .link file without an unknown key and set the values on a veth in a namespace."""
    ns = f"h27link-{os.getpid()}"
    _netns(ns)
    try:
        host = Host("/", SubprocessRunner())
        link_dir = tmp_path / "etc/systemd/network"
        link_dir.mkdir(parents=True)
        plan = plan_apply(host, [Change("v0", "txqueuelen", 1000, 4242),
                                 Change("v0", "channels.rx", 1, 2)],
                          persist_root=str(tmp_path))
        (f,) = plan.files
        Path(f["path"]).write_text(f["content"])
        res = subprocess.run(
            ["ip", "netns", "exec", ns, "unshare", "-m", "sh", "-c",
             f"mount -t tmpfs none /run && mount --bind {link_dir} /etc/systemd/network && "
             "udevadm test-builtin net_setup_link /sys/class/net/v0"],
            capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert "Unknown key" not in res.stderr and "10-hwmgr-v0.link is applied" in res.stderr
        show = subprocess.run(["ip", "-n", ns, "link", "show", "v0"], capture_output=True,
                              text=True, check=True).stdout
        assert "qlen 4242" in show
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a namespace")
def test_the_udev_rule_is_applied_by_udev_on_device_add(tmp_path: Path) -> None:
    """`udevadm test --action=add` (udev's rule engine, as on a driver reload) writes our
    tx_queue_len and lists our ethtool RUN with $name expanded; /run is a private tmpfs so
    udev's database of this machine is not touched."""
    ns = f"h27rule-{os.getpid()}"
    _netns(ns)
    try:
        # planned for an EL6 tree (no systemd) whose v0 has a random MAC, like the veth
        (tmp_path / "etc").mkdir()
        (tmp_path / "etc/redhat-release").write_text("CentOS release 6.10 (Final)\n")
        (tmp_path / "sys/class/net/v0").mkdir(parents=True)
        (tmp_path / "sys/class/net/v0/addr_assign_type").write_text("1\n")
        plan = plan_apply(Host(tmp_path, NoTools()), [Change("v0", "txqueuelen", 1000, 4343),
                                                      Change("v0", "features.gro", "off", "on")])
        assert {c["persist"]["backend"] for c in plan.changes} == {"udev-rule"}
        (f,) = plan.files
        rules = tmp_path / f["path"].lstrip("/")
        rules.parent.mkdir(parents=True)
        rules.write_text(f["content"])
        res = subprocess.run(
            ["ip", "netns", "exec", ns, "unshare", "-m", "sh", "-c",
             f"mount -t tmpfs none /run && mount --bind {rules.parent} /etc/udev/rules.d && "
             "udevadm test --action=add /sys/class/net/v0"],
            capture_output=True, text=True, timeout=60)
        out = res.stdout + res.stderr
        assert res.returncode == 0, out
        assert "70-hwmgr-v0.rules:2 ATTR '/sys/devices/virtual/net/v0/tx_queue_len' writing " \
            "'4343'" in out
        assert "70-hwmgr-v0.rules:3 RUN '/sbin/ethtool -K $name generic-receive-offload on'" \
            in out
        show = subprocess.run(["ip", "-n", ns, "link", "show", "v0"], capture_output=True,
                              text=True, check=True).stdout
        assert "qlen 4343" in show
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


SITE_FILES = {
    "network-scripts": ("etc/sysconfig/network-scripts/ifcfg-v0",
                        IFCFG.replace(b"eth7", b"v0")),
    "ifupdown": ("etc/network/interfaces", INTERFACES.replace(b"eth7", b"v0")),
}


@pytest.mark.root
@pytest.mark.slow  # an apply and a revert per backend: the fast lane keeps its 90 s
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a namespace")
@pytest.mark.parametrize("backend", sorted(SITE_FILES))
def test_a_live_apply_edits_the_site_file_and_revert_restores_it_exactly(
        ns: ApplyNs, backend: str) -> None:
    rel, body = SITE_FILES[backend]
    (ns.root / rel).parent.mkdir(parents=True)
    (ns.root / rel).write_bytes(body)
    before = tree_bytes(ns.root)
    res = ns.apply([{"interface": "v0", "item": "features.gro", "wanted": "on"},
                     {"interface": "v0", "item": "txqueuelen", "wanted": 4242}],
                    "--yes", "--json")
    assert res.returncode == 0, res.stderr
    rows = {c["item"]: c["persist"]["backend"]
            for c in json.loads(res.stdout)["data"]["changes"]}
    # initscripts has no TXQUEUELEN: that one is the udev rule's
    assert rows == {"features.generic-receive-offload": backend, "txqueuelen":
                    "udev-rule" if backend == "network-scripts" else backend}
    assert (ns.gro(), ns.qlen()) == ("on", 4242)
    assert b"generic-receive-offload on" in (ns.root / rel).read_bytes()
    rev = ns.hwmgr("revert", "--state-dir", ns.state, "--yes")
    assert rev.returncode == 0, rev.stderr
    assert (ns.gro(), ns.qlen()) == ("off", 1000)
    assert tree_bytes(ns.root) == before  # the site file byte for byte, ours gone


def test_an_image_under_persist_root_is_judged_by_its_own_release(tmp_path: Path) -> None:
    """`--persist-root /mnt/image`: the image's systemd reads the files, not the running one."""
    root = _tree(tmp_path, "Debian\n")
    (root / "etc/redhat-release").unlink()
    (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    image = root / "img/etc"
    image.mkdir(parents=True)
    (image / "redhat-release").write_text("CentOS Linux release 7.9.2009 (Core)\n")
    plan = plan_apply(Host(root, NoTools()), [Change("eth7", "ring.rx", 256, 4096)],
                      persist_root="/img")
    (c,) = plan.changes
    assert c["persist"]["backend"] == "udev-rule"
    assert c["persist"]["why"] == ("systemd-link: systemd 219 has no RxBufferSize= "
                                   "(added in systemd 244)")
    plan = plan_apply(Host(root, NoTools()), [Change("eth7", "ring.rx", 256, 4096)])
    assert plan.changes[0]["persist"]["backend"] == "systemd-link"  # the host's Debian 12
