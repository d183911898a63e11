"""hwmgr.compliance.judge and fixes: wanted vs actual → finding, and the fixing command."""

from __future__ import annotations

from hwmgr.catalog.refs import cite
from hwmgr.compliance.fixes import merge, setting_fix, sysctl_fix, upgrade_fix
from hwmgr.compliance.items import Status
from hwmgr.compliance.judge import judge_setting, judge_sysctl, summary
from hwmgr.compliance.rules import Want

ITEMS = {"ring": Status.OK, "ring.rx": 512, "ring.rx.max": 4096, "pause.rx": False,
         "features.generic-receive-offload": True, "txqueuelen": 1000,
         "channels": Status.OK, "channels.combined": Status.UNSUPPORTED,
         "channels.combined.max": Status.UNSUPPORTED, "features": Status.OK}


def judge(item: str, rule: object, items: dict | None = None):
    return judge_setting(Want(item, rule, "ixgbe", cite("settings:ixgbe", "seed 002")),
                         items or ITEMS, "enp1s0f0",
                         "0000:01:00.0", "ethtool gave nothing")


def test_ring_below_the_preset_maximum_drifts_with_the_fix() -> None:
    f = judge("ring.rx", "max")
    assert (f.status, f.expected, f.actual) == ("drift", 4096, 512)
    assert f.fix == "ethtool -G enp1s0f0 rx 4096"
    assert f.reason == "ring.rx is 512, the catalog wants the pre-set maximum 4096"
    assert f.to_json()["source"] == {"ref": "settings:ixgbe", "url": None} and f.layer == "setting"


def test_on_off_min_and_exact() -> None:
    assert judge("pause.rx", "on").fix == "ethtool -A enp1s0f0 rx on"
    assert judge("pause.rx", "on").actual == "off"
    gro = judge("features.generic-receive-offload", "off")
    assert gro.status == "drift" and gro.fix == "ethtool -K enp1s0f0 gro off"
    q = judge("txqueuelen", {"min": 10000})
    assert q.fix == "ip link set dev enp1s0f0 txqueuelen 10000" and q.expected == {"min": 10000}
    assert judge("txqueuelen", {"max": 2000}).status == "ok"
    assert judge("txqueuelen", 1000).status == "ok"


def test_unsupported_and_unknown_are_not_drift() -> None:
    assert judge("channels.combined", "max").status == "unsupported"
    f = judge("pause.tx", "on")  # never mentioned
    assert f.status == "unknown" and f.fix is None and "ethtool gave nothing" in f.reason
    veth = judge("ring.rx", "max", {"ring": Status.UNSUPPORTED, "ring.rx": Status.UNSUPPORTED})
    assert veth.status == "unsupported"


def test_sysctl_fields_value_and_bounds() -> None:
    rule = {"name": "net.ipv4.tcp_rmem", "fields": [None, None, {"min": 4194304}],
            "evidence": "seed 000"}
    f = judge_sysctl(rule, [4096, 87380, 174760], "")
    assert f.status == "drift" and f.item == "sysctl.net.ipv4.tcp_rmem"
    assert f.fix == 'sysctl -w net.ipv4.tcp_rmem="4096 87380 4194304"'
    assert judge_sysctl(rule, [4096, 87380, 6291456], "").status == "ok"
    assert judge_sysctl(rule, Status.UNKNOWN, "not recorded").status == "unknown"
    ws = {"name": "net.ipv4.tcp_window_scaling", "value": 1}
    assert judge_sysctl(ws, 0, "").fix == "sysctl -w net.ipv4.tcp_window_scaling=1"
    assert judge_sysctl({"name": "net.core.rmem_max", "min": 10}, 4, "").fix == \
        "sysctl -w net.core.rmem_max=10"
    assert judge_sysctl({"name": "net.core.rmem_max", "min": 10}, "x y", "").status == "unknown"


def test_fixes_quote_and_merge() -> None:
    assert setting_fix("a;b", "ring.rx", 4) == "ethtool -G 'a;b' rx 4"
    assert upgrade_fix("be2net", "10.2.470.14") == "hwmgr upgrade be2net --to 10.2.470.14"
    assert upgrade_fix("be2net", None) is None
    assert sysctl_fix("net.core.default_qdisc", "fq codel") == \
        "sysctl -w 'net.core.default_qdisc=fq codel'"
    assert merge(["ethtool -G e rx 4096", "ip link set dev e mtu 9000", "ethtool -G e tx 4096",
                  None, "ethtool -G f rx 1"]) == [
        "ethtool -G e rx 4096 tx 4096", "ip link set dev e mtu 9000", "ethtool -G f rx 1"]


def test_summary_counts_every_status() -> None:
    assert summary([judge("ring.rx", "max")]) == {"ok": 0, "drift": 1, "unknown": 0,
                                                  "uncatalogued": 0, "unsupported": 0}


def test_a_fixed_feature_that_differs_is_unsupported_not_drift() -> None:
    """ethtool's "[fixed]" (seed 002: `tx-checksum-fcoe-crc: on [fixed]`): no fix can work."""
    from hwmgr.compliance.ethtool import parse_features
    from hwmgr.compliance.items import Status
    from hwmgr.compliance.read import _group_items

    text = "Features for v0:\ntx-checksum-fcoe-crc: on [fixed]\ngeneric-receive-offload: on\n"
    items = _group_items("features", parse_features(text, 0), (), Status.UNKNOWN)
    fixed = judge_setting(Want("features.tx-checksum-fcoe-crc", "off", "t"), items, "v0", None,
                          "n/a")
    assert (fixed.status, fixed.fix) == ("unsupported", None) and "[fixed]" in fixed.reason
    gro = judge_setting(Want("features.generic-receive-offload", "off", "t"), items, "v0", None,
                        "n/a")
    assert gro.status == "drift" and gro.fix



def test_bounds_read_the_same_in_the_plan_and_the_table() -> None:
    """One wording of {min, max} (judge.bounds) for rule descriptions and check's table."""
    from hwmgr.compliance.judge import bounds, describe
    from hwmgr.ui.check_table import value_text

    cases = {(("min", 10),): "≥ 10", (("max", 9000),): "≤ 9000",
             (("min", 1), ("max", 2)): "1..2"}
    for pairs, words in cases.items():
        rule = dict(pairs)
        assert bounds(rule) == describe(rule) == value_text(rule) == words
    assert bounds({"value": 4}) is None and describe({"value": 4}) == "4"
    assert describe([None, {"min": 4194304}]) == "[*, ≥ 4194304]"
    assert value_text([None, {"min": 4194304}]) == "* ≥ 4194304"
    assert value_text({"rx": True}) == "rx True" and value_text(None) == "-"
