"""Tests for hwmgr.catalog.pciids: libpci and the built-in parser agree with pci.ids and lspci."""

from __future__ import annotations

import ctypes
import gzip
import json
import os
import random
import re
import shutil
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hwmgr.catalog.pciids import DEFAULT_IDS_PATHS, LIBPCI_SONAME, PciNames, default_names
from hwmgr.errors import BadInputError, NotFoundError, UsageError
from hwmgr.host.runner import SubprocessRunner

SYSTEM_IDS = next((p for p in DEFAULT_IDS_PATHS if os.path.isfile(p)), None)


def _have_libpci() -> bool:
    try:
        ctypes.CDLL(LIBPCI_SONAME)
    except OSError:
        return False
    return True


HAVE_LIBPCI = _have_libpci()
needs_ids = pytest.mark.skipif(SYSTEM_IDS is None, reason="no pci.ids on this machine")
needs_libpci = pytest.mark.skipif(not HAVE_LIBPCI, reason=f"{LIBPCI_SONAME} not installed")
BACKENDS = [
    pytest.param("libpci", marks=needs_libpci),
    "pciids",
]

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
    out = {"pciids": PciNames(backend="pciids")}
    if HAVE_LIBPCI:
        out["libpci"] = PciNames(backend="libpci")
    return out


def _run_python(code: str) -> tuple[int, str, str]:
    """Run a snippet in a fresh interpreter (so a libpci exit() or crash cannot hit pytest)."""
    res = SubprocessRunner().run([sys.executable, "-c", code], timeout=60)
    return res.rc, res.stdout, res.stderr


# --- the system database ---------------------------------------------------------------------


@needs_ids
def test_sources_and_path(names: dict[str, PciNames]) -> None:
    assert names["pciids"].source == "pci.ids"
    assert names["pciids"].path == SYSTEM_IDS
    if HAVE_LIBPCI:
        assert names["libpci"].source == "libpci"
        assert PciNames().source == "libpci"  # auto prefers libpci
    else:
        assert PciNames().source == "pci.ids"


@needs_ids
def test_sampled_names_match_file_on_both_backends(ref: RefIds, names: dict[str, PciNames]) -> None:
    rng = random.Random(2026)
    pairs = rng.sample(sorted(ref.devices), 3000)
    subs = rng.sample(sorted(ref.subsystems), 500)
    vendors = rng.sample(sorted(ref.vendors), 300)
    for db in names.values():
        for v, d in pairs:
            assert db.device(v, d) == ref.devices[(v, d)], (db.source, v, d)
        for key in subs:
            assert db.subsystem(*key) == ref.subsystems[key], (db.source, key)
        for v in vendors:
            assert db.vendor(v) == ref.vendors[v], (db.source, v)


@needs_ids
@needs_libpci
def test_backends_identical_on_every_entry(ref: RefIds, names: dict[str, PciNames]) -> None:
    lib, py = names["libpci"], names["pciids"]
    diffs = [v for v in ref.vendors if lib.vendor(v) != py.vendor(v)]
    diffs += [k for k in ref.devices if lib.device(*k) != py.device(*k)]
    diffs += [k for k in ref.subsystems if lib.subsystem(*k) != py.subsystem(*k)]
    classes = [f"{c:04x}" for c in range(0x10000)]
    diffs += [c for c in classes if lib.class_name(c) != py.class_name(c)]
    progifs = [f"{c:04x}{p:02x}" for c in (0x0101, 0x0106, 0x0108, 0x0C03) for p in range(256)]
    diffs += [c for c in progifs if lib.prog_if(c) != py.prog_if(c)]
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
@pytest.mark.parametrize("backend", BACKENDS)
def test_class_names(backend: str, ref: RefIds) -> None:
    db = PciNames(backend=backend)
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
@pytest.mark.parametrize("backend", BACKENDS)
def test_unknown_ids_are_none(backend: str, ref: RefIds) -> None:
    db = PciNames(backend=backend)
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
            assert got[: len(keys)] == want, (db.source, v, d, sv, sd)
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_custom_ids_file(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "pci.ids"
    path.write_bytes(CUSTOM.encode("utf-8") + b"dcba  Bad \xff byte\n")
    db = PciNames(str(path), backend=backend)
    assert db.source == ("libpci" if backend == "libpci" else "pci.ids")
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_gzipped_ids_file(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "pci.ids.gz"
    path.write_bytes(gzip.compress(b"abcd  Acme Widgets\n\t0001  Widget NIC\n"))
    db = PciNames(str(path), backend=backend)
    assert db.device("abcd", "0001") == "Widget NIC"


GARBAGE = (
    "abcd  Good vendor\n\t0001  Good device\nthis line is garbage\n\t0002  Orphan\nabce  After\n"
)


def test_garbage_file_tolerated_by_parser(tmp_path: Path) -> None:
    path = tmp_path / "pci.ids"
    path.write_text(GARBAGE)
    db = PciNames(str(path), backend="pciids")
    assert db.device("abcd", "0001") == "Good device"
    assert db.device("abcd", "0002") is None  # nested under the garbage line: skipped
    assert db.vendor("abce") == "After"
    rnd = tmp_path / "random.ids"
    rnd.write_bytes(random.Random(3).randbytes(200_000))
    junk = PciNames(str(rnd), backend="pciids")
    assert junk.source == "pci.ids"
    assert junk.vendor("8086") is None


@needs_libpci
def test_garbage_file_with_libpci(tmp_path: Path) -> None:
    path = tmp_path / "pci.ids"
    path.write_text(GARBAGE)
    auto = PciNames(str(path))
    assert auto.source == "pci.ids"  # libpci rejected it; the parser took over
    assert auto.fallback_reason and "line 3" in auto.fallback_reason
    assert auto.vendor("abce") == "After"
    with pytest.raises(BadInputError, match=r"pci\.ids.*line 3"):
        PciNames(str(path), backend="libpci").vendor("abcd")


@needs_libpci
def test_libpci_bad_files_do_not_end_the_process(tmp_path: Path) -> None:
    (tmp_path / "garbage.ids").write_text(GARBAGE)
    (tmp_path / "random.ids").write_bytes(random.Random(5).randbytes(100_000))
    (tmp_path / "long.ids").write_text("abcd  " + "x" * 5000 + "\n")
    (tmp_path / "bad.ids.gz").write_bytes(b"\x1f\x8b\x08\x00garbage-not-gzip" * 10)
    code = textwrap.dedent(
        f"""
        import json
        from hwmgr.catalog.libpci import LibPci
        out = {{}}
        for name in ("missing.ids", "garbage.ids", "random.ids", "long.ids", "bad.ids.gz"):
            lib = LibPci({str(tmp_path)!r} + "/" + name, "libpci.so.3")
            out[name] = [lib.loaded, lib.errors, lib.lookup(1, 0xabcd), lib.lookup(1, 0x8086)]
            lib.close()
        print(json.dumps(out))
        """
    )
    rc, stdout, stderr = _run_python(code)
    assert rc == 0, stderr
    out = json.loads(stdout)
    assert out["missing.ids"] == [False, [], None, None]  # missing file: NULL, never exit()
    for name in ("garbage.ids", "random.ids", "long.ids"):
        loaded, errors, _abcd, intel = out[name]
        assert loaded is False and errors and name in errors[0], (name, errors)
        assert intel is None
    assert "pcilib" not in stderr  # libpci's default handlers never ran


def test_libpci_missing(tmp_path: Path) -> None:
    path = tmp_path / "pci.ids"
    path.write_text("abcd  Acme\n")
    auto = PciNames(str(path), libpci_name="libpci.so.0-hwmgr-test-missing")
    assert auto.source == "pci.ids"
    assert auto.vendor("abcd") == "Acme"
    assert auto.fallback_reason and auto.fallback_reason.startswith("libpci not available")
    strict = PciNames(str(path), backend="libpci", libpci_name="libpci.so.0-hwmgr-test-missing")
    with pytest.raises(NotFoundError, match="libpci not available.*libpci.so.0-hwmgr-test-missing"):
        strict.load()


@pytest.mark.parametrize("backend", ["auto", "pciids", pytest.param("libpci", marks=needs_libpci)])
def test_missing_path_and_no_database(tmp_path: Path, backend: str) -> None:
    with pytest.raises(NotFoundError, match="nope.ids' not found"):
        PciNames(str(tmp_path / "nope.ids"), backend=backend).vendor("8086")
    empty = PciNames(backend=backend, search_paths=(str(tmp_path / "nope.ids"),))
    assert empty.source is None and empty.path is None
    assert empty.vendor("8086") is None and empty.class_name("0200") is None


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "pci.ids"
    path.write_text("abcd  Acme\n")
    db = PciNames(str(path), backend="pciids")
    for bad in ("zz", "12345", "", "0x", "ab cd"):
        with pytest.raises(BadInputError, match="invalid PCI vendor ID"):
            db.vendor(bad)
    with pytest.raises(BadInputError, match="expected 4 or 6 hex digits"):
        db.class_name("020")
    with pytest.raises(UsageError, match="unknown PCI names backend"):
        PciNames(backend="lspci")
    assert db.vendor("0xABCD") == "Acme"


def test_default_names_is_cached() -> None:
    first = default_names()
    assert default_names() is first
    assert first.source in ("libpci", "pci.ids", None)


@needs_ids
@needs_libpci
def test_libpci_threads(ref: RefIds) -> None:
    db = PciNames(backend="libpci")
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
@pytest.mark.parametrize("backend", BACKENDS)
def test_load_and_lookup_cost(backend: str, ref: RefIds) -> None:
    pairs = random.Random(11).sample(sorted(ref.devices), 1024)
    db = PciNames(backend=backend)
    start = time.perf_counter()
    db.load()
    loaded = time.perf_counter()
    found = sum(db.device(v, d) is not None for v, d in pairs)
    done = time.perf_counter()
    assert found == 1024
    # Generous bounds for a loaded CI box; typical here: libpci 6 ms load, pciids 40 ms.
    assert loaded - start < 0.5
    assert done - loaded < 0.25
