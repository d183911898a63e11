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
    assert "seed 002" in (gro.evidence or "")


def test_seed002_after_is_compliant_and_layers_filter() -> None:
    findings = check("seed002-after")
    # the ixgbevf VFs' version has no catalog verdict: uncatalogued, which is still exit 0
    assert findings and {x.status for x in findings} == {"ok", "uncatalogued"}
    assert [x.device for x in findings if x.status == "uncatalogued"] == [
        "0000:01:10.0", "0000:01:10.2"]
    assert exit_code(findings, []) == 0
    assert {x.layer for x in check("seed002-after", "sysctl")} == {"sysctl"}


def test_seed000_known_bad_driver_with_upgrade_fix() -> None:
    got = [x for x in check("seed000-ustor", "driver,firmware,sysctl")
           if x.device == "0000:02:00.0" or x.layer == "sysctl"]
    drv = next(x for x in got if x.item == "driver_version")
    assert (drv.status, drv.actual, drv.expected) == ("drift", "4.1.307r", "10.2.470.14")
    assert drv.fix == "hwmgr upgrade be2net --to 10.2.470.14" and "seed 000" in drv.evidence
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
