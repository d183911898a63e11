"""hwmgr.compliance.check: exit codes (pure), layers, and check_host on the seed fixtures."""

from __future__ import annotations

import pytest
from support import FIXTURES, HOSTS, REPO

from hwmgr.catalog.load import load_catalog
from hwmgr.compliance.check import check_host, exit_code, parse_layers
from hwmgr.compliance.judge import Finding
from hwmgr.config import config_from
from hwmgr.errors import UsageError
from hwmgr.host.snapshot import open_host

SHIPPED = REPO / "catalogs"
SITE = FIXTURES / "catalogs" / "good" / "site-veth.json"


def f(layer: str, status: str) -> Finding:
    return Finding(layer, None, None, "x", None, None, status, "")


@pytest.mark.parametrize("findings,pending,code", [
    ([], [], 0),
    ([f("setting", "ok"), f("sysctl", "unsupported")], [], 0),
    ([f("setting", "drift"), f("sysctl", "unknown")], [], 5),
    ([f("setting", "unknown"), f("driver", "ok")], [], 11),
    ([f("driver", "uncatalogued"), f("driver", "ok")], [], 0),  # no opinion is not unknown
    ([f("driver", "uncatalogued")], [], 0),
    ([f("driver", "uncatalogued"), f("driver", "unknown")], [], 11),
    ([f("driver", "uncatalogued"), f("setting", "drift")], [], 5),
    ([f("driver", "drift")], [{"driver": "be2net"}], 7),  # the pending upgrade fixes it
    ([f("setting", "drift")], [{"driver": "be2net"}], 5),  # a reboot will not
    ([f("setting", "unknown")], [{"driver": "be2net"}], 7),
])
def test_exit_code(findings: list[Finding], pending: list, code: int) -> None:
    assert exit_code(findings, pending) == code


def test_parse_layers() -> None:
    assert parse_layers(None) == {"driver", "firmware", "setting", "sysctl"}
    assert parse_layers("settings, sysctl") == {"setting", "sysctl"}
    with pytest.raises(UsageError, match="'rings'"):
        parse_layers("driver,rings")


def check(name: str, layers: str | None = None) -> list[Finding]:
    host, cleanup = open_host(str(HOSTS / name))
    try:
        return check_host(host, load_catalog([SHIPPED], config=config_from(None)),
                          parse_layers(layers)).findings
    finally:
        if cleanup:
            cleanup()


def test_seed002_before_drifts_on_every_seed_item() -> None:
    got = {(x.interface, x.item): x for x in check("seed002-before")}
    port = "enp1s0f0"
    want = {"pause.rx": ("on", "off"), "pause.tx": ("on", "off"), "ring.rx": (4096, 256),
            "ring.tx": (4096, 256), "channels.combined": (63, 8),
            "features.generic-receive-offload": ("off", "on"),
            "txqueuelen": ({"min": 10000}, 1000)}
    for item, (expected, actual) in want.items():
        x = got[(port, item)]
        assert (x.status, x.expected, x.actual) == ("drift", expected, actual), item
        assert x.device == "0000:01:00.0" and x.fix
    assert got[(port, "features.large-receive-offload")].status == "ok"
    gro = got[(port, "features.generic-receive-offload")]
    assert gro.reason.endswith(
        "while net.ipv4.ip_forward = 1 (rule ixgbe-no-lro-gro-when-forwarding)")
    assert gro.source and gro.source.ref == "rule:ixgbe-no-lro-gro-when-forwarding"
    assert "seed 002" in (gro.source.text or "")  # the text stays for a terminal


def test_seed002_after_is_compliant_and_layers_filter() -> None:
    findings = check("seed002-after")
    # CentOS 7.6's in-tree builds (the ixgbevf VFs among them) have no catalog verdict:
    # uncatalogued kernel build, which is still exit 0
    assert findings and {x.status for x in findings} == {"ok", "uncatalogued"}
    assert {"0000:01:10.0", "0000:01:10.2"} <= {
        x.device for x in findings if x.status == "uncatalogued"}
    assert exit_code(findings, []) == 0
    assert {x.layer for x in check("seed002-after", "sysctl")} == {"sysctl"}


def test_seed000_known_bad_driver_with_upgrade_fix() -> None:
    got = [x for x in check("seed000-ustor", "driver,firmware,sysctl")
           if x.device == "0000:02:00.0" or x.layer == "sysctl"]
    drv = next(x for x in got if x.item == "driver_version")
    assert (drv.status, drv.actual, drv.expected) == ("drift", "4.1.307r", "10.2.470.14")
    assert drv.fix == "hwmgr upgrade be2net --to 10.2.470.14" and drv.source
    assert drv.source.ref == "version:be2net/4.1.307r" and "seed 000" in (drv.source.text or "")
    fw = next(x for x in got if x.item == "firmware_version")
    assert (fw.status, fw.actual) == ("ok", "10.0.803.19")
    rmem = next(x for x in got if x.item == "sysctl.net.ipv4.tcp_rmem")
    assert (rmem.status, rmem.actual) == ("ok", [4096, 87380, 4194304])


def test_site_catalog_governs_netdevs_by_driver_name(tmp_path) -> None:
    cat = load_catalog([SHIPPED, SITE], config=config_from(None))
    assert cat.netdev_entry("veth") == "veth" and cat.netdev_entry("ixgbe") is None
    assert [r["name"] for r in cat.sysctl_rules()][-1] == "net.ipv4.tcp_mtu_probing"
    assert {r["id"] for r in cat.conditional_settings()} == {
        "tso-off-under-shaper", "ixgbe-no-lro-gro-when-forwarding"}


ETHTOOL_ERAS = FIXTURES / "ethtool"


@pytest.mark.parametrize("recorded,version,rc,says", [
    # 2007's ethtool prints its usage (headed by its version) for -l, and exits 0
    (ETHTOOL_ERAS / "ethtool-6/veth/l.txt", None, 0, "ethtool version 6 on the host"),
    # a later one rejects what it cannot parse; its version comes from `ethtool --version`
    (ETHTOOL_ERAS / "field-badargs/unknown/l.txt", "ethtool version 2.6.33\n", 1,
     "ethtool version 2.6.33 on the host"),
    (ETHTOOL_ERAS / "field-badargs/unknown/l.txt", None, 1,
     "the host's ethtool (its version unknown)"),
])
def test_an_ethtool_too_old_for_l_is_unknown_naming_it(tmp_path, recorded, version, rc,
                                                       says) -> None:
    """seed 002 with the real output of an ethtool that does not know `-l` recorded for
    `ethtool -l enp1s0f0`: channels.combined is unknown (exit 11) with one line naming the
    ethtool and what it cannot report, never drift and never an internal error."""
    import json
    import shutil
    snap = tmp_path / "snap"
    shutil.copytree(HOSTS / "seed002-after", snap, symlinks=True)
    index = json.loads((snap / "commands/index.json").read_text())
    for e in index:
        if e["argv"] == ["ethtool", "-l", "enp1s0f0"]:
            e.pop("stdout", None)
            e.update(rc=rc, **{"stdout" if rc == 0 else "stderr": "commands/old-l.txt"})
    shutil.copy(recorded, snap / "commands/old-l.txt")
    if version:
        (snap / "commands/ethtool-version.txt").write_text(version)
        index.append({"argv": ["ethtool", "--version"], "rc": 0,
                      "stdout": "commands/ethtool-version.txt"})
    (snap / "commands/index.json").write_text(json.dumps(index))
    host, _ = open_host(str(snap))
    found = check_host(host, load_catalog([SHIPPED], config=config_from(None)),
                       parse_layers("setting")).findings
    got = {(x.interface, x.item): x for x in found}
    chan = got[("enp1s0f0", "channels.combined")]
    assert (chan.status, chan.actual) == ("unknown", None)
    assert chan.reason == (f"channels.combined could not be read: {says} does not know "
                           "`ethtool -l`, so it cannot report channel counts; a newer "
                           "ethtool there can")
    assert got[("enp1s0f1", "channels.combined")].status == "ok"  # its -l is recorded
    assert exit_code(found, []) == 11
