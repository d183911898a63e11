"""`ip link` text and JSON parsers on recorded outputs: both must agree link by link."""

from __future__ import annotations

from pathlib import Path

from hwmgr.compliance.iplink import parse_ip_link, parse_ip_link_json

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


def test_json_agrees_with_text() -> None:
    text = parse_ip_link(_text("ip-d-link.txt"))
    js = parse_ip_link_json(_text("ip-d-j-link.json"))
    assert set(js) == set(text)
    for name, info in js.items():
        other = text[name]
        assert (info.mtu, info.txqueuelen, info.qdisc, info.master, info.kind,
                info.slave_kind, info.flags) == (other.mtu, other.txqueuelen, other.qdisc,
                                                 other.master, other.kind, other.slave_kind,
                                                 other.flags), name


def test_oneline_output() -> None:
    links = parse_ip_link(_text("ip-o-link.txt"))
    assert links["v0"].txqueuelen == 5000 and links["v1"].master == "br0"


def test_field_el7_joined_line() -> None:
    link = parse_ip_link(_text("field-el7-ip-link.txt"))["enp1s0f0"]
    assert (link.mtu, link.qdisc, link.txqueuelen, link.state) == (1500, "mq", 10000, "UP")


def test_garbage_gives_nothing() -> None:
    assert parse_ip_link_json("not json") == {}
    assert parse_ip_link_json('{"ifname": "x"}') == {}
    assert parse_ip_link_json('[{"ifname": 3}, {"ifname": "a", "mtu": "big"}]')["a"].mtu is None
    assert parse_ip_link("Device \"x\" does not exist.\n") == {}
