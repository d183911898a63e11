"""The `ip link` text parser on recorded outputs, checked against ip's JSON of the same links."""

from __future__ import annotations

import json
from pathlib import Path

from hwmgr.compliance.iplink import parse_ip_link

FIX = Path(__file__).parent / "fixtures" / "iplink"


def _text(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def test_detailed_text() -> None:
    links = parse_ip_link(_text("ip-d-link.txt"))
    assert set(links) == {"lo", "v0", "v1", "br0", "tun0"}
    v0, v1 = links["v0"], links["v1"]
    assert (v0.mtu, v0.txqueuelen, v0.qdisc, v0.kind, v0.peer) == (9000, 5000, "noqueue",
                                                                   "veth", "v1")
    assert v0.master is None and "UP" in v0.flags
    assert (v1.master, v1.kind, v1.slave_kind) == ("br0", "veth", "bridge")
    assert links["br0"].kind == "bridge"
    assert links["tun0"].kind == "tun" and links["tun0"].txqueuelen == 500
    assert links["lo"].kind is None and links["lo"].mtu == 65536


def test_text_agrees_with_ips_json() -> None:
    """`ip -d -j link show` of the same namespace, recorded by the same script: what the text
    parser reads must be what iproute2 itself reports in JSON, link by link."""
    text = parse_ip_link(_text("ip-d-link.txt"))
    js = {link["ifname"]: link for link in json.loads(_text("ip-d-j-link.json"))}
    assert set(js) == set(text)
    for name, link in js.items():
        info = text[name]
        kinds = link.get("linkinfo", {})
        assert (info.mtu, info.txqueuelen, info.qdisc, info.master, info.kind,
                info.slave_kind, info.flags) == (
                    link["mtu"], link["txqlen"], link["qdisc"], link.get("master"),
                    kinds.get("info_kind"), kinds.get("info_slave_kind"),
                    tuple(link["flags"])), name


def test_oneline_output() -> None:
    links = parse_ip_link(_text("ip-o-link.txt"))
    assert links["v0"].txqueuelen == 5000 and links["v1"].master == "br0"


def test_field_el7_joined_line() -> None:
    link = parse_ip_link(_text("field-el7-ip-link.txt"))["enp1s0f0"]
    assert (link.mtu, link.qdisc, link.txqueuelen, link.state) == (1500, "mq", 10000, "UP")


def test_garbage_gives_nothing() -> None:
    assert parse_ip_link("Device \"x\" does not exist.\n") == {}
