"""hwmgr.compliance.rules: catalog settings and conditions → wanted items."""

from __future__ import annotations

from hwmgr.catalog.refs import Cite
from hwmgr.compliance.items import Status
from hwmgr.compliance.rules import holds, interface_wants, needed_sysctls, settings_wants

IXGBE = {"pause": {"rx": "on", "tx": "on"}, "ring": {"rx": "max", "tx": "max"},
         "channels": {"combined": "max"}, "txqueuelen": {"min": 10000}, "evidence": "seed 002"}
FORWARDING = {"id": "fwd", "drivers": ["ixgbe"], "when": {"sysctl": {"net.ipv4.ip_forward": 1}},
              "settings": {"features": {"lro": "off", "gro": "off"}}, "evidence": "seed 002"}
SHAPER = {"id": "shaper", "when": {"qdisc": ["cbq", "htb", "tbf"]},
          "settings": {"features": {"tso": "off"}}, "evidence": "seed 004"}


def test_settings_become_canonical_items() -> None:
    wants = settings_wants(IXGBE, "ixgbe")
    assert sorted(wants) == ["channels.combined", "pause.rx", "pause.tx", "ring.rx", "ring.tx",
                             "txqueuelen"]
    assert wants["ring.rx"].rule == "max" and wants["txqueuelen"].rule == {"min": 10000}
    assert wants["pause.rx"].cite == Cite("settings:ixgbe", None, "seed 002")
    assert wants["pause.rx"].source == "ixgbe"


def test_bare_levels_and_feature_aliases() -> None:
    wants = settings_wants({"ring": 2048, "channels": {"min": 4}, "features": {"gro": "off"},
                            "mtu": 9000}, "x")
    assert wants["ring.rx"].rule == wants["ring.tx"].rule == 2048
    assert wants["channels.combined"].rule == {"min": 4}
    assert "features.generic-receive-offload" in wants and wants["mtu"].rule == 9000


def test_conditions_hold_fail_or_cannot_be_told() -> None:
    fwd = {"sysctl.net.ipv4.ip_forward": 1}
    assert holds(FORWARDING["when"], None, fwd)[0] is True
    assert holds(FORWARDING["when"], None, {"sysctl.net.ipv4.ip_forward": 0})[0] is False
    ok, why = holds(FORWARDING["when"], None, {"sysctl.net.ipv4.ip_forward": Status.UNKNOWN})
    assert ok is None and "ip_forward" in why
    assert holds(SHAPER["when"], "tbf", {})[0] is True
    assert holds(SHAPER["when"], "mq", {}) == (False, "qdisc is mq")
    assert holds(SHAPER["when"], Status.UNKNOWN, {})[0] is None


def test_interface_wants_apply_only_matching_conditionals() -> None:
    fwd = {"sysctl.net.ipv4.ip_forward": 1}
    wants = interface_wants("ixgbe", IXGBE, [FORWARDING, SHAPER], "mq", fwd)
    assert wants["features.generic-receive-offload"].source == "fwd"
    assert "features.tcp-segmentation-offload" not in wants  # mq is no shaper
    endpoint = interface_wants("ixgbe", IXGBE, [FORWARDING], "mq",
                               {"sysctl.net.ipv4.ip_forward": 0})
    assert "features.generic-receive-offload" not in endpoint
    other = interface_wants("be2net", None, [FORWARDING, SHAPER], "tbf", fwd)
    assert list(other) == ["features.tcp-segmentation-offload"]  # drivers limit the rule
    unread = interface_wants("ixgbe", IXGBE, [FORWARDING], "mq", {})
    assert "could not be read" in (unread["features.large-receive-offload"].unknown or "")


def test_needed_sysctls_include_conditions() -> None:
    rules = [{"name": "net.ipv4.tcp_rmem", "when": {"sysctl": {"net.core.x": 1}}}]
    assert needed_sysctls(rules, [FORWARDING]) == ["net.core.x", "net.ipv4.ip_forward",
                                                   "net.ipv4.tcp_rmem"]
