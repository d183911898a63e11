"""Tests for hwmgr.catalog.pciids: the names agree with pci.ids and with lspci, and only the
blocks of the IDs looked up are parsed, with the same answers as parsing the whole file."""

from __future__ import annotations

import gzip
import os
import random
import re
import shutil
import threading
import time
from pathlib import Path

import pytest

from hwmgr.catalog.pciids import DEFAULT_IDS_PATHS, PciNames, _PciIdsFile, default_names
from hwmgr.errors import BadInputError, NotFoundError
from hwmgr.host.runner import SubprocessRunner

SYSTEM_IDS = next((p for p in DEFAULT_IDS_PATHS if os.path.isfile(p)), None)


needs_ids = pytest.mark.skipif(SYSTEM_IDS is None, reason="no pci.ids on this machine")

# Seed devices from the field notes: (vendor, device, subvendor, subdevice, expected fragment).
SEEDS = [
    ("19a2", "0710", None, None, "be3"),
    ("8086", "1528", None, None, "X540"),
    ("8086", "10fb", None, None, "82599"),
    ("1000", "0079", "1000", "9261", "9260"),
    ("8086", "10d3", None, None, "82574L"),
    ("14e4", "1639", None, None, "BCM5709"),
    ("8086", "1572", None, None, "X710"),
    ("1af4", "1000", None, None, "irtio"),
    ("1af4", "1041", None, None, "irtio"),
]


class RefIds:
    """An independent, strict reading of the system pci.ids (the test's own oracle)."""

    def __init__(self, path: str) -> None:
        self.vendors: dict[str, str] = {}
        self.devices: dict[tuple[str, str], str] = {}
        self.subsystems: dict[tuple[str, str, str, str], str] = {}
        self.classes: dict[str, str] = {}
        vendor = device = None
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        for line in text.split("\n"):
            if line.startswith("C "):
                self.classes[line[2:4]] = line[4:].strip()
                vendor = None
            elif m := re.fullmatch(r"([0-9a-f]{4})\s+(.+)", line):
                vendor, device = m.group(1), None
                self.vendors[vendor] = m.group(2)
            elif vendor and (m := re.fullmatch(r"\t([0-9a-f]{4})\s+(.+)", line)):
                device = m.group(1)
                self.devices[(vendor, device)] = m.group(2)
            elif (
                vendor
                and device
                and (m := re.fullmatch(r"\t\t([0-9a-f]{4}) ([0-9a-f]{4})\s+(.+)", line))
            ):
                self.subsystems[(vendor, device, m.group(1), m.group(2))] = m.group(3)


@pytest.fixture(scope="module")
def ref() -> RefIds:
    if SYSTEM_IDS is None:
        pytest.skip("no pci.ids on this machine")
    return RefIds(SYSTEM_IDS)


@pytest.fixture(scope="module")
def names() -> dict[str, PciNames]:
    if SYSTEM_IDS is None:
        pytest.skip("no pci.ids on this machine")
    return {"pciids": PciNames()}


# --- the system database ---------------------------------------------------------------------


@needs_ids
def test_path(names: dict[str, PciNames]) -> None:
    assert names["pciids"].path == SYSTEM_IDS


@needs_ids
def test_every_entry_matches_the_file(ref: RefIds) -> None:
    db = PciNames()
    diffs = [v for v in ref.vendors if db.vendor(v) != ref.vendors[v]]
    diffs += [k for k in ref.devices if db.device(*k) != ref.devices[k]]
    # libpci never looks up a subsystem under device 0000 (lspci shows none): nor do we
    diffs += [k for k in ref.subsystems if k[1] != "0000" and db.subsystem(*k) != ref.subsystems[k]]
    assert diffs == []


@needs_ids
def test_only_the_vendors_met_are_parsed() -> None:
    """A run that meets Emulex parses Emulex's block, not the 1.3 MB of the others."""
    db = PciNames()
    assert db.device("19a2", "0710") is not None
    parsed = db._file()
    assert parsed is not None
    assert {k >> 16 for k in parsed.devices} == {0x19A2}
    assert {k >> 48 for k in parsed.subsystems} <= {0x19A2}
    assert parsed.classes == {}  # no class looked up yet


def _whole(data: bytes) -> _PciIdsFile:
    """The oracle: the same line rules applied to the whole file in one pass."""
    whole = _PciIdsFile(data)
    whole._parse(whole._data)
    whole._parsed = set(range(0x10000)) | {"C/S"}
    return whole


def _mutants(data: bytes, count: int) -> list[bytes]:
    """pci.ids damaged in the ways libpci's rules care about (blank, comment, CR and garbage
    lines, lost or extra tabs, repeated lines), from the start and the class section."""
    rng = random.Random(5)
    lines = data.split(b"\n")
    out = []
    for _ in range(count):
        ls = lines[:3000] + lines[-800:]
        for _ in range(300):
            i, op = rng.randrange(len(ls)), rng.randrange(6)
            if op == 0:
                ls[i] = b" " + ls[i]
            elif op == 1:
                ls[i] += b"\r"
            elif op == 2:
                ls.insert(i, rng.choice([b"", b"   ", b"# c", b"  # x", b"garbage", b"\r",
                                         b"\t\t\tdeep", b"C zz bad", b"S 8086"]))
            elif op == 3:
                ls[i] = ls[i].lstrip(b"\t")
            elif op == 4:
                ls.insert(i, ls[rng.randrange(len(ls))])
            else:
                ls[i] = b"\t" + ls[i]
        out.append(b"\n".join(ls))
    return out


@needs_ids
def test_block_parsing_gives_the_whole_file_answers() -> None:
    assert SYSTEM_IDS is not None
    data = Path(SYSTEM_IDS).read_bytes()
    for text in [data, *_mutants(data, 8)]:
        whole, lazy = _whole(text), _PciIdsFile(text)
        vendors = set(whole.vendors) | {k >> 16 for k in whole.devices} | {0x1234}
        diffs: list[object] = [v for v in vendors if lazy.vendor(v) != whole.vendor(v)]
        diffs += [k for k in whole.devices if lazy.device(k >> 16, k & 0xFFFF) != whole.devices[k]]
        for k in whole.subsystems:
            ids = (k >> 48, k >> 32 & 0xFFFF, k >> 16 & 0xFFFF, k & 0xFFFF)
            diffs += [ids] if lazy.subsystem(*ids) != whole.subsystem(*ids) else []
        for k in whole.gen_subsystems:
            ids = (0x1111, 0x2222, k >> 16, k & 0xFFFF)
            diffs += [ids] if lazy.subsystem(*ids) != whole.subsystem(*ids) else []
        classes = list(whole.subclasses) + [c << 8 for c in whole.classes] + [0xFF77]
        diffs += [c for c in classes if lazy.class_name(c) != whole.class_name(c)]
        diffs += [k for k in whole.progifs if lazy.prog_if(k >> 8, k & 0xFF) != whole.progifs[k]]
        assert diffs == []


@needs_ids
@pytest.mark.parametrize(("vendor", "device", "subvendor", "subdevice", "fragment"), SEEDS)
def test_seed_devices(
    ref: RefIds,
    names: dict[str, PciNames],
    vendor: str,
    device: str,
    subvendor: str | None,
    subdevice: str | None,
    fragment: str,
) -> None:
    for db in names.values():
        assert db.vendor(vendor) == ref.vendors[vendor]
        dev = db.device(vendor, device)
        assert dev == ref.devices[(vendor, device)]
        if subvendor and subdevice:
            sub = db.subsystem(vendor, device, subvendor, subdevice)
            assert sub == ref.subsystems[(vendor, device, subvendor, subdevice)]
            assert fragment in sub
        else:
            assert fragment in dev
    assert len({db.device(vendor, device) for db in names.values()}) == 1


@needs_ids
def test_class_names(ref: RefIds) -> None:
    db = PciNames()
    assert db.class_name("0200") == "Ethernet controller"
    assert db.class_name("0104") == "RAID bus controller"
    assert db.class_name("020000") == "Ethernet controller"  # prog-if is accepted and ignored
    assert db.class_name("0x0200") == "Ethernet controller"
    assert db.class_name("02fe") == ref.classes["02"]  # unknown subclass: the base class name
    absent = next(f"{c:02x}" for c in range(0xFE, 0, -1) if f"{c:02x}" not in ref.classes)
    assert db.class_name(absent + "00") is None
    assert db.prog_if("010802") == "NVM Express"
    assert db.prog_if("0108ee") is None


@needs_ids
def test_unknown_ids_are_none(ref: RefIds) -> None:
    db = PciNames()
    absent_vendor = next(f"{v:04x}" for v in range(0xFFFE, 0, -1) if f"{v:04x}" not in ref.vendors)
    absent_dev = next(
        f"{d:04x}" for d in range(0xFFFE, 0, -1) if ("19a2", f"{d:04x}") not in ref.devices
    )
    assert db.vendor(absent_vendor) is None
    assert db.device(absent_vendor, "0001") is None
    assert db.device("19a2", absent_dev) is None
    assert db.subsystem("19a2", "0710", "19a2", "e70b") is None
    assert db.subsystem("19a2", "0710", absent_vendor, "0001") is None
    # subsystem == device and no entry: libpci (and so lspci) shows the device name
    assert db.subsystem("19a2", "0710", "19a2", "0710") == ref.devices[("19a2", "0710")]
    assert db.vendor(None) is None and db.device("19a2", None) is None
    assert db.class_name(None) is None


# --- lspci as an independent oracle (a synthetic config-space dump, read with lspci -F) --------


def _dump_entry(slot: int, v: str, d: str, sv: str, sd: str, cls: str) -> str:
    cfg = bytearray(64)
    cfg[0:2] = int(v, 16).to_bytes(2, "little")
    cfg[2:4] = int(d, 16).to_bytes(2, "little")
    cfg[10], cfg[11] = int(cls[2:4], 16), int(cls[0:2], 16)
    cfg[0x2C:0x2E] = int(sv, 16).to_bytes(2, "little")
    cfg[0x2E:0x30] = int(sd, 16).to_bytes(2, "little")
    rows = [f"{o:02x}: " + " ".join(f"{b:02x}" for b in cfg[o : o + 16]) for o in range(0, 64, 16)]
    return f"{slot >> 8:02x}:{(slot >> 3) & 0x1F:02x}.{slot & 7} x\n" + "\n".join(rows) + "\n\n"


@needs_ids
@pytest.mark.skipif(shutil.which("lspci") is None, reason="lspci not installed")
def test_matches_lspci(tmp_path: Path, ref: RefIds, names: dict[str, PciNames]) -> None:
    rng = random.Random(7)
    cases = [(v, d, sv or v, sd or d, "0200") for v, d, sv, sd, _ in SEEDS]
    cases += [(*k, "0104") for k in rng.sample(sorted(ref.subsystems), 150)]
    cases += [(v, d, "dead", "beef", "02fe") for v, d in rng.sample(sorted(ref.devices), 100)]
    cases += [("19a2", "0710", "19a2", "e70b", "fe00"), ("0001", "0002", "0003", "0004", "ff00")]
    dump = tmp_path / "lspci.dump"
    dump.write_text("".join(_dump_entry(i + 8, *c) for i, c in enumerate(cases)))
    argv = ["lspci", "-F", str(dump), "-i", SYSTEM_IDS, "-O", "hwdb.disable=1", "-vmmnn"]
    res = SubprocessRunner().run(argv)
    assert res.rc == 0, res.describe()
    blocks = [r for r in res.stdout.split("\n\n") if r.strip()]
    records = [dict(f.split(":\t", 1) for f in r.splitlines()) for r in blocks]
    assert len(records) == len(cases)
    numeric_labels = {"Device", "Vendor", "Unknown vendor", "Class"}

    def name_of(field: str) -> str | None:
        m = re.fullmatch(r"(.*) \[[0-9a-f]{4}\]", field)
        assert m, field
        return None if m.group(1) in numeric_labels else m.group(1)

    for rec, (v, d, sv, sd, cls) in zip(records, cases):
        # lspci shows no subsystem for subvendor 0000/ffff
        assert ("SVendor" in rec) == (sv not in ("0000", "ffff")), rec
        keys = [k for k in ("Vendor", "Device", "SVendor", "SDevice") if k in rec]
        want = tuple(name_of(rec[k]) for k in keys)
        for db in names.values():
            got = (db.vendor(v), db.device(v, d), db.vendor(sv), db.subsystem(v, d, sv, sd))
            assert got[: len(keys)] == want, (v, d, sv, sd)
            assert db.class_name(cls) == name_of(rec["Class"])


# --- custom files ----------------------------------------------------------------------------

CUSTOM = (
    "# a tiny pci.ids\r\n"
    "\r\n"
    "abcd  Acme Widgets \r\n"  # CRLF and one trailing blank
    "\t0001  Widget NIC\r\n"
    "\t\tabcd 1000\tWidget NIC dual-port\r\n"
    "\t# a comment inside a block\r\n"
    "\t0002\tWidget HBA \u00e9t\u00e9\r\n"
    "ABCE  Upper Case Ltd\r\n"
    "\t00FF  Shouty Device\r\n"
    "S abcd\r\n"
    "\t2000  Generic Widget board\r\n"
    "X unknown block\r\n"
    "\t0003  ignored\r\n"
    "C 02  Network controller\r\n"
    "\t00  Ethernet controller\r\n"
    "\t\t01  Fancy prog-if\r\n"
    "C 0c  Serial bus controller\r\n"
    "\t\t07  Prog-if right under the class\r\n"
)


def test_custom_ids_file(tmp_path: Path) -> None:
    path = tmp_path / "pci.ids"
    path.write_bytes(CUSTOM.encode("utf-8") + b"dcba  Bad \xff byte\n")
    db = PciNames(str(path))
    assert db.path == str(path)
    assert db.vendor("abcd") == "Acme Widgets"
    assert db.device("abcd", "0001") == "Widget NIC"
    assert db.device("abcd", "0002") == "Widget HBA \u00e9t\u00e9"
    assert db.subsystem("abcd", "0001", "abcd", "1000") == "Widget NIC dual-port"
    assert db.subsystem("abcd", "0002", "abcd", "2000") == "Generic Widget board"  # S block
    assert db.subsystem("abcd", "0002", "abcd", "2001") is None
    assert db.vendor("abce") == "Upper Case Ltd"
    assert db.device("abce", "00ff") == "Shouty Device"
    assert db.device("abcd", "0003") is None
    assert db.vendor("dcba") == "Bad \ufffd byte"
    assert db.class_name("0200") == "Ethernet controller"
    assert db.class_name("0201") == "Network controller"
    assert db.prog_if("020001") == "Fancy prog-if"
    assert db.prog_if("0c0007") == "Prog-if right under the class"
    assert db.prog_if("01018a") == "Master SecP PriP"  # libpci's synthesized IDE prog-if
    assert db.prog_if("010100") is None
    assert db.vendor("8086") is None  # only this file is consulted


def test_gzipped_ids_file(tmp_path: Path) -> None:
    path = tmp_path / "pci.ids.gz"
    path.write_bytes(gzip.compress(b"abcd  Acme Widgets\n\t0001  Widget NIC\n"))
    db = PciNames(str(path))
    assert db.device("abcd", "0001") == "Widget NIC"


GARBAGE = (
    "abcd  Good vendor\n\t0001  Good device\nthis line is garbage\n\t0002  Orphan\nabce  After\n"
)


def test_garbage_file_tolerated_by_parser(tmp_path: Path) -> None:
    path = tmp_path / "pci.ids"
    path.write_text(GARBAGE)
    db = PciNames(str(path))
    assert db.device("abcd", "0001") == "Good device"
    assert db.device("abcd", "0002") is None  # nested under the garbage line: skipped
    assert db.vendor("abce") == "After"
    rnd = tmp_path / "random.ids"
    rnd.write_bytes(random.Random(3).randbytes(200_000))
    junk = PciNames(str(rnd))
    assert junk.path == str(rnd)
    assert junk.vendor("8086") is None


def test_missing_path_and_no_database(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="nope.ids' not found"):
        PciNames(str(tmp_path / "nope.ids")).vendor("8086")
    empty = PciNames(search_paths=(str(tmp_path / "nope.ids"),))
    assert empty.path is None
    assert empty.vendor("8086") is None and empty.class_name("0200") is None


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "pci.ids"
    path.write_text("abcd  Acme\n")
    db = PciNames(str(path))
    for bad in ("zz", "12345", "", "0x", "ab cd"):
        with pytest.raises(BadInputError, match="invalid PCI vendor ID"):
            db.vendor(bad)
    with pytest.raises(BadInputError, match="expected 4 or 6 hex digits"):
        db.class_name("020")
    assert db.vendor("0xABCD") == "Acme"


def test_default_names_is_cached() -> None:
    first = default_names()
    assert default_names() is first
    assert first.path == SYSTEM_IDS


@needs_ids
def test_threads(ref: RefIds) -> None:
    """Lookups from several threads parse each block once and all get the file's names."""
    db = PciNames()
    pairs = sorted(ref.devices)[:2000]
    errors: list[tuple[str, str]] = []

    def work() -> None:
        errors.extend(k for k in pairs if db.device(*k) != ref.devices[k])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@needs_ids
def test_lookup_cost(ref: RefIds) -> None:
    """The worst case an inventory can meet: 1,024 random devices (hundreds of vendors)."""
    pairs = random.Random(11).sample(sorted(ref.devices), 1024)
    db = PciNames()
    start = time.perf_counter()
    found = sum(db.device(v, d) is not None for v, d in pairs)
    assert db.class_name("0200") == "Ethernet controller"
    assert found == 1024
    # Generous bound for a loaded CI box (typical here: ~0.1 s for most of the file's vendors).
    assert time.perf_counter() - start < 1.0
