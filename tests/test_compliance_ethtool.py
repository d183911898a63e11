"""ethtool text parsers on real outputs: four ethtool eras, six virtual drivers, field notes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwmgr.compliance.ethtool import (
    FEATURE_TABLE,
    canonical_feature,
    parse_channels,
    parse_coalesce,
    parse_features,
    parse_pause,
    parse_rings,
)
from hwmgr.compliance.items import Status

FIX = Path(__file__).parent / "fixtures" / "ethtool"
ERAS = ("ethtool-6", "ethtool-3.5", "ethtool-4.8", "ethtool-6.1")
DRIVERS = ("loopback", "veth", "bridge", "tun", "macvlan", "vxlan")
PARSERS = {"a": parse_pause, "g": parse_rings, "l": parse_channels, "k": parse_features,
           "c": parse_coalesce}


def _read(era: str, driver: str, sub: str) -> tuple[str, int | None]:
    """A recorded output and its exit code (None when the source did not record one)."""
    d = FIX / era / driver
    rcs = {}
    if (d / "rc.txt").exists():
        rcs = dict(line.split() for line in (d / "rc.txt").read_text().splitlines())
    rc = rcs.get(sub)
    return (d / f"{sub}.txt").read_text(encoding="utf-8"), None if rc is None else int(rc)


def _parse(era: str, driver: str, sub: str):
    text, rc = _read(era, driver, sub)
    return PARSERS[sub](text, rc)


def test_every_recorded_era_and_driver_is_present() -> None:
    for era in ERAS:
        for driver in DRIVERS:
            for sub in "aglkci":
                assert (FIX / era / driver / f"{sub}.txt").is_file(), (era, driver, sub)


@pytest.mark.parametrize("era", ERAS)
def test_veth_reads_the_same_in_every_era(era: str) -> None:
    """record.sh set v0 to tso off, gro on, channels rx 2 tx 2: every era must say so."""
    feats = _parse(era, "veth", "k")
    assert feats.status is Status.OK
    assert feats.values["tcp-segmentation-offload"] is False
    assert feats.values["rx-checksumming"] is True
    assert feats.values["scatter-gather"] is True
    if era != "ethtool-6":  # 2007's ethtool knew nothing of GRO
        assert feats.values["generic-receive-offload"] is True
        assert "large-receive-offload" in feats.fixed
    else:
        assert "generic-receive-offload" not in feats.values
    pause = _parse(era, "veth", "a")
    assert pause.status is Status.UNSUPPORTED and pause.values == {}
    assert "not supported" in (pause.reason or "").lower()
    assert _parse(era, "veth", "g").status is Status.UNSUPPORTED
    chans = _parse(era, "veth", "l")
    assert chans.rejected is (era == "ethtool-6")
    assert _parse(era, "veth", "g").rejected is False  # "not supported" is the driver's
    if era == "ethtool-6":  # no -l yet: it printed its usage text and exited 0
        assert chans.status is Status.UNKNOWN
    else:
        assert chans.status is Status.OK
        assert chans.values == {"rx": 2, "tx": 2, "other": None, "combined": None}
        assert chans.maxima == {"rx": 2, "tx": 2, "other": None, "combined": None}


@pytest.mark.parametrize("era", ERAS[1:])
def test_tun_channels_and_coalesce(era: str) -> None:
    chans = _parse(era, "tun", "l")
    assert chans.values["combined"] == 0 and chans.maxima["combined"] == 1
    assert chans.values["rx"] is None  # max 0 (ioctl) and n/a (netlink) mean the same
    co = _parse(era, "tun", "c")
    assert co.status is Status.OK
    assert co.values["rx-frames"] == 0
    if era == "ethtool-6.1":
        assert co.values["rx-usecs"] is None and co.values["adaptive-rx"] is None
        assert co.values["cqe-mode-tx"] is None
    else:
        assert co.values["rx-usecs"] == 0 and co.values["adaptive-rx"] is False
        assert co.values["tx-frame-high"] == 0


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("driver", ("loopback", "bridge", "macvlan", "vxlan"))
def test_unsupported_sub_commands(era: str, driver: str) -> None:
    for sub in "agc":
        assert _parse(era, driver, sub).status is Status.UNSUPPORTED, sub
    want = Status.UNKNOWN if era == "ethtool-6" else Status.UNSUPPORTED
    assert _parse(era, driver, "l").status is want


def test_old_eras_mark_udp_fragmentation_unsupported_not_off() -> None:
    """Old ethtool prints a default 'off' after "Cannot get device … settings"."""
    for era in ("ethtool-6", "ethtool-3.5", "ethtool-4.8"):
        feats = _parse(era, "loopback", "k")
        assert "udp-fragmentation-offload" in feats.unsupported
        assert "udp-fragmentation-offload" not in feats.values
        assert feats.values["tcp-segmentation-offload"] is True


def test_bridge_rx_checksumming_fixed_off() -> None:
    for era in ("ethtool-3.5", "ethtool-4.8", "ethtool-6.1"):
        feats = _parse(era, "bridge", "k")
        assert feats.values["rx-checksumming"] is False
        assert "rx-checksumming" in feats.fixed
        assert "tx-checksumming" not in feats.fixed


def test_field_el6_be2net_offload_parameters() -> None:
    feats = _parse("field-el6", "be2net", "k")
    assert feats.values == {
        "rx-checksumming": True, "tx-checksumming": True, "scatter-gather": True,
        "tcp-segmentation-offload": True, "udp-fragmentation-offload": False,
        "generic-segmentation-offload": True, "generic-receive-offload": False,
        "large-receive-offload": False,
    }
    assert feats.fixed == frozenset()


def test_field_el5_spaced_names_and_annotations() -> None:
    before = parse_features((FIX / "field-el5/unknown/k.txt").read_text(encoding="utf-8"))
    after = parse_features((FIX / "field-el5/unknown/k-tso-off.txt").read_text(encoding="utf-8"))
    assert before.values["tcp-segmentation-offload"] is True
    assert after.values["tcp-segmentation-offload"] is False
    assert before.values["generic-segmentation-offload"] is False
    assert before.unsupported == {"udp-fragmentation-offload"}


def test_field_el7_ixgbe_joined_copies() -> None:
    pause = _parse("field-el7", "ixgbe", "a")
    assert pause.values == {"autoneg": True, "rx": True, "tx": True}
    rings = _parse("field-el7", "ixgbe", "g")
    assert rings.values["rx"] == 256 and rings.values["tx"] == 256
    assert rings.maxima["rx"] == 4096 and rings.maxima["tx"] == 4096
    assert rings.maxima["rx-mini"] is None and rings.values["rx-jumbo"] is None
    chans = _parse("field-el7", "ixgbe", "l")
    assert chans.values == {"rx": None, "tx": None, "other": 1, "combined": 8}
    assert chans.maxima["combined"] == 63
    feats = _parse("field-el7", "ixgbe", "k")
    assert feats.values["generic-receive-offload"] is True
    assert feats.values["large-receive-offload"] is False
    assert feats.values["ntuple-filters"] is False
    assert feats.values["tx-checksum-fcoe-crc"] is True and "tx-checksum-fcoe-crc" in feats.fixed
    assert feats.values["rx-udp_tunnel-port-offload"] is True
    assert len(feats.values) == 50


def test_alias_table_maps_every_spelling() -> None:
    assert canonical_feature("gro") == "generic-receive-offload"
    assert canonical_feature("TSO") == "tcp-segmentation-offload"
    assert canonical_feature("tcp segmentation offload") == "tcp-segmentation-offload"
    assert canonical_feature("udp large send offload") == "udp-fragmentation-offload"
    assert canonical_feature("rx") == "rx-checksumming"
    assert canonical_feature("rx-gro") == "generic-receive-offload"
    assert canonical_feature("ntuple") == "ntuple-filters"
    assert canonical_feature("rxhash") == "receive-hashing"
    assert canonical_feature("highdma") == "highdma"  # not aliased: already canonical
    assert canonical_feature("some new feature") == "some-new-feature"
    longs = [long for _, long, _ in FEATURE_TABLE]
    assert all(canonical_feature(long) == long for long in longs)
    assert len(set(longs)) == len(longs) == 12


def test_rc_95_without_text_is_unsupported_and_empty_is_unknown() -> None:
    assert parse_rings("", 95).status is Status.UNSUPPORTED
    assert parse_rings("", 0).status is Status.UNKNOWN
    assert parse_features("no offload info available\n", 0).status is Status.UNSUPPORTED
    gone = parse_pause("Cannot get device settings: No such device\n", 71)
    assert gone.status is Status.UNKNOWN and gone.reason is not None


def test_rings_without_section_headers_newest_layout() -> None:
    """Hand-written variant (not a recording): the headerless -g shape the notes describe."""
    text = "Ring parameters for eth9:\nRX:\t\t4096\nTX:\t\t4096\nRX:\t\t1024\nTX:\t\t512\n" \
           "TX push:\toff\nHDS thresh:\tn/a\n"
    rings = parse_rings(text)
    assert rings.maxima == {"rx": 4096, "tx": 4096}
    assert rings.values == {"rx": 1024, "tx": 512, "tx-push": False, "hds-thresh": None}


def test_requested_marker_and_pause_negotiated() -> None:
    """Hand-written variants of two documented shapes: `[requested on]` and autoneg pause."""
    feats = parse_features("Features for bond0:\ngeneric-segmentation-offload: off "
                           "[requested on]\n")
    assert feats.values["generic-segmentation-offload"] is False
    assert feats.requested == {"generic-segmentation-offload": True}
    pause = parse_pause("Pause parameters for eth0:\nAutonegotiate:\ton\nRX:\t\ton\n"
                        "TX:\t\toff\nRX negotiated:\ton\nTX negotiated:\toff\n")
    assert pause.values == {"autoneg": True, "rx": True, "tx": False,
                            "rx-negotiated": True, "tx-negotiated": False}


def test_hostile_long_lines_parse_in_linear_time() -> None:
    """A damaged snapshot's 200 kB lines must not send a regex into quadratic backtracking."""
    for text in ("a" + " " * 200_000 + "b", "x " * 100_000, "Features for x: " + "a-" * 100_000):
        assert parse_features(text).status is Status.UNKNOWN
        assert parse_coalesce(text).status is Status.UNKNOWN
        assert parse_rings(text).status is Status.UNKNOWN
