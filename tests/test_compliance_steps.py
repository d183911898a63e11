"""apply's and revert's params as journaled, checked once before their steps are built: a
damaged journal names its field (so `recover` fails in one line, never a traceback); sound
params build every step."""

from __future__ import annotations

import re

import pytest

from hwmgr.compliance.steps import REGISTRY
from hwmgr.errors import BadInputError

GOOD: dict[str, object] = {
    "items": [{"interface": "v0", "item": "txqueuelen", "wanted": 4242, "risky": False}],
    "files": [{"path": "/etc/sysctl.d/90-hwmgr.conf", "content": "net.core.somaxconn = 1\n"}],
    "nm": [{"connection": "c0", "properties": {"ethtool.feature-gro": "on"}}],
    "persist_root": "/"}


def test_sound_params_build_every_step_in_order() -> None:
    steps = REGISTRY["apply"](GOOD)
    assert [s.name for s in steps] == ["set v0:txqueuelen",
                                       "persist /etc/sysctl.d/90-hwmgr.conf",
                                       "nm-connection c0"]
    assert steps[0].description == "txqueuelen → 4242"


def test_sound_revert_params_build_every_step_in_revert_order() -> None:
    steps = REGISTRY["revert"]({
        "of": 3, "persist_root": "/",
        "items": [{"interface": None, "item": "sysctl.net.ipv4.ip_forward", "value": 0}],
        "files": [{"path": "/etc/sysctl.d/90-hwmgr.conf", "existed": False, "backup": None}],
        "nm": [{"connection": "c0", "properties": {"link.mtu": ""}, "remove": ["link"]}]})
    assert [s.name for s in steps] == ["nm-connection c0",
                                       "restore /etc/sysctl.d/90-hwmgr.conf",
                                       "restore sysctl.net.ipv4.ip_forward"]


@pytest.mark.parametrize(("kind", "params", "field"), [
    ("apply", {**GOOD, "items": [{"item": 5}]}, "params.items[0].item"),
    ("apply", {**GOOD, "items": [{"item": "mtu", "interface": 0}]}, "params.items[0].interface"),
    ("apply", {**GOOD, "files": [{"path": "/x", "content": None}]}, "params.files[0].content"),
    ("apply", {**GOOD, "nm": [{"connection": "c0", "properties": {"link.mtu": 9000}}]},
     "params.nm[0].properties.link.mtu"),
    ("apply", {**GOOD, "confirm": {"timeout": "soon", "argv": ["true"]}},
     "params.confirm.timeout"),
    ("apply", {**GOOD, "persist_root": None}, "params.persist_root"),
    ("apply", {**GOOD, "confirm": {"timeout": 120, "argv": ["hwmgr", 1]}},
     "params.confirm.argv[1]"),
    ("revert", {"of": 3, "items": "all"}, "params.items"),
    ("revert", {"of": 3, "items": [], "files": [{"path": "/x", "existed": "yes"}]},
     "params.files[0].existed"),
    ("revert", {"of": 3, "items": [], "files": [{"sha256": "ab"}]}, "params.files[0].path"),
    ("revert", {"of": 3, "items": [], "nm": [{"connection": "c0", "properties": {},
                                              "remove": "ethtool"}]}, "params.nm[0].remove"),
])
def test_a_damaged_field_is_named(kind: str, params: dict[str, object], field: str) -> None:
    with pytest.raises(BadInputError, match=re.escape(field)):
        REGISTRY[kind](params)
