"""Persistence planning on a fake host tree: .link first-match rules, merging, other owners."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwmgr.compliance.apply import Change, plan_apply
from hwmgr.compliance.persist.backends import link_matches, parse_ini
from hwmgr.host.runner import Result
from hwmgr.host.seam import Host

GRO = [Change("eth7", "features.gro", "on", "off"), Change("eth7", "ring.rx", 256, 4096)]


class NoTools:
    """A host without ethtool/ip/ss/udevadm/nmcli: every command is 'not available'."""

    def run(self, argv, **kw):  # noqa: ANN001, ANN003
        return Result(tuple(argv), 127, "", f"{argv[0]}: command not found")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    net = tmp_path / "sys/class/net/eth7"
    net.mkdir(parents=True)
    (net / "address").write_text("00:1b:21:aa:bb:cc\n")
    (net / "addr_assign_type").write_text("0\n")
    (tmp_path / "usr/lib/systemd/network").mkdir(parents=True)
    (tmp_path / "usr/lib/systemd/network/99-default.link").write_text(
        "[Match]\nOriginalName=*\n\n[Link]\nNamePolicy=keep kernel database onboard slot path\n"
        "AlternativeNamesPolicy=database onboard slot path\nMACAddressPolicy=persistent\n")
    return tmp_path


def _plan(root: Path, changes=GRO, **kw):  # noqa: ANN001, ANN003
    return plan_apply(Host(root, NoTools()), list(changes), persist_root="/", **kw)


def test_link_file_copies_the_keys_of_the_file_it_shadows(tree: Path) -> None:
    plan = _plan(tree)
    assert not plan.refusals
    (f,) = plan.files
    assert f["path"] == "/etc/systemd/network/10-hwmgr-eth7.link"
    assert f["content"] == (
        "# written by hwmgr apply; `hwmgr revert` restores the previous state\n"
        "[Match]\nMACAddress=00:1b:21:aa:bb:cc\n\n[Link]\n"
        "NamePolicy=keep kernel database onboard slot path\n"
        "AlternativeNamesPolicy=database onboard slot path\nMACAddressPolicy=persistent\n"
        "GenericReceiveOffload=no\nRxBufferSize=4096\n")
    assert any("99-default.link applies today" in n for n in plan.notes)


def test_tso_persists_both_tcp_segmentation_keys(tree: Path) -> None:
    """ethtool's tso covers IPv4 and IPv6 TSO; udev needs a key for each (seen in the lab)."""
    (f,) = _plan(tree, [Change("eth7", "features.tso", "on", "off")]).files
    assert f["content"].endswith("TCPSegmentationOffload=no\nTCP6SegmentationOffload=no\n")


def test_earlier_matching_link_file_is_refused_by_name(tree: Path) -> None:
    d = tree / "etc/systemd/network"
    d.mkdir(parents=True)
    (d / "05-uplink.link").write_text("[Match]\nMACAddress=00:1B:21:AA:BB:CC\n[Link]\nName=up0\n")
    plan = _plan(tree)
    assert plan.exit_code == 9
    assert "/etc/systemd/network/05-uplink.link matches eth7" in plan.refusals[0]["reason"]


def test_earlier_link_for_another_device_is_ignored(tree: Path) -> None:
    d = tree / "run/systemd/network"
    d.mkdir(parents=True)
    (d / "05-other.link").write_text("[Match]\nOriginalName=eth0 eth1\n[Link]\nName=x\n")
    assert not _plan(tree).refusals


def test_unknown_match_keys_before_ours_are_refused(tree: Path) -> None:
    d = tree / "etc/systemd/network"
    d.mkdir(parents=True)
    (d / "01-path.link").write_text("[Match]\nPath=pci-0000:01:00.0\n[Link]\nName=x\n")
    assert "may match eth7" in _plan(tree).refusals[0]["reason"]


def test_match_rules() -> None:
    facts = {"name": "eth7", "mac": "00:aa", "driver": "ixgbe", "type": "ether"}
    assert link_matches(parse_ini("[Match]\nDriver=ixg*\n"), facts) is True
    assert link_matches(parse_ini("[Match]\nOriginalName=!eth*\n"), facts) is False
    assert link_matches(parse_ini("[Match]\nMACAddress=00:bb\n"), facts) is False


def test_sysctl_owner_and_tuned_conflicts_name_the_files(tree: Path) -> None:
    (tree / "usr/lib/sysctl.d").mkdir(parents=True)
    (tree / "usr/lib/sysctl.d/50-default.conf").write_text("net.ipv4.tcp_syncookies = 1\n")
    (tree / "etc/tuned/throughput").mkdir(parents=True)
    (tree / "etc/tuned/active_profile").write_text("throughput\n")
    (tree / "etc/tuned/throughput/tuned.conf").write_text(
        "[main]\nsummary=x\n[sysctl]\nnet.core.rmem_max=8388608\n[net]\nfeatures=gro on\n")
    changes = GRO + [Change(None, "sysctl.net.ipv4.tcp_syncookies", 1, 0),
                     Change(None, "sysctl.net.core.rmem_max", 212992, 4194304)]
    plan = _plan(tree, changes)
    files = {(c["file"], c["item"]) for c in plan.conflicts}
    assert files == {("/usr/lib/sysctl.d/50-default.conf", "sysctl.net.ipv4.tcp_syncookies"),
                     ("/etc/tuned/throughput/tuned.conf", "sysctl.net.core.rmem_max"),
                     ("/etc/tuned/throughput/tuned.conf", "features.generic-receive-offload")}
    assert plan.exit_code == 9 and all("--override" in r["reason"] for r in plan.refusals)
    forced = _plan(tree, changes, override=True)
    assert not forced.refusals
    conf = next(f for f in forced.files if f["path"].endswith("90-hwmgr.conf"))
    assert "net.ipv4.tcp_syncookies = 0\n" in conf["content"]


def test_an_item_the_link_file_cannot_express_falls_back_to_a_udev_rule(tree: Path) -> None:
    """udev's .link has no key for rx-gro-list: a udev rule runs ethtool on every add."""
    plan = _plan(tree, [Change("eth7", "features.rx-gro-list", "off", "on")])
    (c,) = plan.changes
    assert c["persist"]["backend"] == "udev-rule"
    assert c["persist"]["why"] == "systemd-link: systemd .link has no key for it"
    assert any("udev-rule" in n and "systemd-link cannot carry some" in n for n in plan.notes)
    (f,) = plan.files
    assert f["path"] == "/etc/udev/rules.d/70-hwmgr-eth7.rules"
    assert f["content"].endswith(
        'ACTION=="add", SUBSYSTEM=="net", ATTR{address}=="00:1b:21:aa:bb:cc", '
        'RUN+="/sbin/ethtool -K $name rx-gro-list on"\n')


def test_persist_root_must_be_absolute(tree: Path) -> None:
    from hwmgr.errors import BadInputError

    with pytest.raises(BadInputError, match="persist-root"):
        plan_apply(Host(tree, NoTools()), GRO, persist_root="rel/dir")
