"""The compiled catalog index (catalog/index.py): a hit gives the same catalog and verdicts as
the full loader, any change to an input is a miss, a damaged index is a miss, never an error."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from hwmgr.catalog import index
from hwmgr.catalog import load as catmod
from hwmgr.catalog.load import load_catalog
from hwmgr.catalog.pciids import PciNames
from hwmgr.errors import BadInputError
from hwmgr.host.snapshot import open_host
from hwmgr.inventory.scan import Inventory

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "catalogs" / "hwmgr-catalog.json"
MINI = REPO / "tests/fixtures/catalogs/good/mini.json"
HOSTS = sorted(p for p in (REPO / "tests/fixtures/hosts").iterdir()
               if p.is_dir() and p.name != "broken")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(catmod.ENV_DIR, raising=False)


def _indexes() -> list[Path]:
    d = catmod.cache_dir() / "catalog-index"
    return sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []


def _devices() -> list[tuple[dict[str, Any], str | None]]:
    """Every device of every fixture host, plus variants that reach each verdict branch."""
    out = []
    for root in HOSTS:
        host, _ = open_host(str(root))
        scan = Inventory(host, names=PciNames(backend="pciids")).scan()
        for d in scan.devices:
            out.append((d, scan.kernel))
            for ver in ("0.1", "99.9", None, "2.6.32-279.el6.x86_64"):
                out.append(({**d, "driver_version": ver}, scan.kernel))
    return out


@pytest.mark.parametrize("files", [[SHIPPED], [MINI], [SHIPPED, MINI]], ids=["shipped", "mini",
                                                                              "both"])
def test_index_hit_gives_the_full_loaders_verdicts(files: list[Path]) -> None:
    try:
        full = load_catalog(files)  # a miss: the full loader, which stores the index
    except BadInputError:  # shipped + mini define the same drivers: an error, never stored
        assert not _indexes()
        return
    assert len(_indexes()) == 1
    hit, _where = catmod.index_lookup(files)
    assert hit is not None and hit is not full
    assert hit.drivers == full.drivers and hit._index == full._index
    assert hit.files == full.files and hit.origin == full.origin
    assert hit.version == full.version and hit.names() == full.names()
    cases = _devices()
    assert len(cases) > 50
    for dev, kernel in cases:
        assert hit.verdict(dev, kernel) == full.verdict(dev, kernel), dev["address"]
        assert hit.recommended(dev, kernel) == full.recommended(dev, kernel)


def test_any_changed_input_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.json"
    shutil.copy(MINI, f)
    load_catalog([f])
    data = json.loads(f.read_text())
    data["drivers"]["be2net"]["versions"]["4.1.307r"]["status"] = "deprecated"
    f.write_text(json.dumps(data))
    assert catmod.index_lookup([f])[0] is None
    cat = load_catalog([f])
    assert cat.drivers["be2net"]["versions"]["4.1.307r"]["status"] == "deprecated"
    assert len(_indexes()) == 2
    # the same bytes under another name are another catalog (error messages name the file)
    g = tmp_path / "d.json"
    shutil.copy(f, g)
    assert catmod.index_lookup([g])[0] is None
    # the schema and the rules version are part of the key
    monkeypatch.setattr(catmod, "CHECKS_VERSION", catmod.CHECKS_VERSION + "-next")
    assert catmod.index_lookup([f])[0] is None


def test_damaged_or_foreign_index_is_a_miss() -> None:
    load_catalog([MINI])
    (path,) = _indexes()
    blob = path.read_bytes()
    for bad in (b"", blob[:-1], blob[:40], blob[:-5] + b"XXXXX", b"junk" + blob,
                index.FORMAT + b"\0" * 4 + b"\x00"):
        path.write_bytes(bad)
        assert catmod.index_lookup([MINI])[0] is None
        assert len(load_catalog([MINI]).names()) == 6  # the full loader, which rewrites it
        assert catmod.index_lookup([MINI])[0] is not None
    # a well-formed payload of the wrong shape
    payload = __import__("marshal").dumps(("not", "a", "catalog"))
    digest = __import__("zlib").crc32(payload).to_bytes(4, "big")
    path.write_bytes(index.FORMAT + digest + payload)
    assert catmod.index_lookup([MINI])[0] is None


def test_bad_catalog_is_never_indexed(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_text('{"schema_version": 1}')
    for _ in range(2):
        with pytest.raises(BadInputError):
            load_catalog([f])
    assert not _indexes()


def test_unreadable_input_is_the_full_loaders_error(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert catmod.index_lookup([fifo]) == (None, None)  # never opened, never blocks
    with pytest.raises(BadInputError, match="is a FIFO, not a catalog file"):
        load_catalog([fifo])


def test_rules_are_decoded_per_vendor_on_first_use() -> None:
    load_catalog([SHIPPED])
    hit, _ = catmod.index_lookup([SHIPPED])
    lazy = hit._index
    vendors = set(lazy._buckets)
    assert len(vendors) > 2
    dev = {"vendor_id": "8086", "device_id": "1528", "class": "0200", "driver": "ixgbe",
           "pci_driver": "ixgbe", "driver_version": "5.1.0-k-rh7.6"}
    assert hit.verdict(dev, "3.10.0-957.5.1.el7.x86_64")["entry"] == "ixgbe"
    assert "8086" not in lazy._buckets and len(lazy._buckets) == len(vendors) - 1
    assert dict(lazy.items()) and not lazy._buckets  # a whole-index view decodes the rest


def test_a_tampered_bucket_is_a_one_line_error() -> None:
    load_catalog([SHIPPED])
    hit, _ = catmod.index_lookup([SHIPPED])
    hit._index._buckets["8086"] = b"\x00garbage"
    with pytest.raises(BadInputError, match="compiled catalog index in the cache is damaged"):
        hit.match({"vendor_id": "8086", "device_id": "1528"})


def test_old_indexes_are_pruned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each edited layer is a new key: only the newest KEEP indexes stay, the current among
    them, and it still hits."""
    monkeypatch.setattr(index, "KEEP", 3)
    f = tmp_path / "c.json"
    data = json.loads(MINI.read_text())
    for n in range(6):
        data["description"] = f"edit {n}"
        f.write_text(json.dumps(data))
        os.utime(f, ns=(n * 10**9, n * 10**9))
        load_catalog([f])
    assert len(_indexes()) == 3
    assert catmod.index_lookup([f])[0] is not None
    markers = catmod.cache_dir() / "catalog-valid"
    assert len(list(markers.iterdir())) == 3


@pytest.mark.parametrize("files", [[SHIPPED], [SHIPPED, MINI]], ids=["shipped", "both"])
def test_entries_are_decoded_on_first_use_in_the_documents_order(files: list[Path]) -> None:
    full = load_catalog(files)
    hit, _where = catmod.index_lookup(files)
    assert hit is not None
    assert dict.__len__(hit.drivers) == 0  # nothing decoded before anyone asks
    first = next(iter(full.drivers))
    assert hit.drivers[first] == full.drivers[first]
    assert dict.__len__(hit.drivers) == 1
    assert json.dumps(hit.doc) == json.dumps(full.doc)  # every entry, in the same order
    assert list(hit.drivers) == list(full.drivers) and hit.doc["drivers"] is hit.drivers
    assert hit._netdevs == full._netdevs


def test_a_damaged_entry_is_a_one_line_error(tmp_path: Path) -> None:
    load_catalog([SHIPPED])
    (where,) = _indexes()
    state = index.load(where)
    assert state is not None
    drivers = dict(state[5])
    drivers["ixgbe"] = b"\x00garbage"
    index.store(where.parent.parent, where, (*state[:5], drivers, state[6]))
    hit, _ = catmod.index_lookup([SHIPPED])
    with pytest.raises(BadInputError, match="compiled catalog index in the cache is damaged"):
        hit.drivers["ixgbe"]


# ----------------------------------------------------------------------------- by identity
def _by_stat() -> list[Path]:
    d = catmod.cache_dir() / "catalog-index" / "by-stat"
    return sorted(d.iterdir()) if d.is_dir() else []


def _unread(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record every catalog file the index reads (the contents path)."""
    import hwmgr.catalog.validate as validate

    seen: list[Path] = []
    real = validate.read_catalog

    def spy(path: Path) -> Any:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(validate, "read_catalog", spy)
    return seen


def test_settled_inputs_are_known_by_identity_until_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A settled catalog's hit skips reading it; a same-size edit changes its ctime, so the
    next run reads the contents and sees the edit."""
    monkeypatch.setattr(index, "SETTLED_NS", 0)  # the files below count as settled at once
    f = tmp_path / "c.json"
    data = json.loads(MINI.read_text())
    data["description"] = "edit A"
    f.write_text(json.dumps(data))
    load_catalog([f])  # miss: full loader; the index and its identity record are stored
    assert len(_by_stat()) == 1
    seen = _unread(monkeypatch)
    hit = load_catalog([f])
    assert seen == [] and hit.doc["description"] == "edit A"  # not read at all
    time.sleep(0.05)  # past the coarse clock's tick, as any real edit is (SETTLED_NS)
    data["description"] = "edit B"  # same length: same size
    f.write_text(json.dumps(data))
    got = load_catalog([f])
    assert got.doc["description"] == "edit B" and f in seen


def test_fresh_inputs_are_never_known_by_identity(tmp_path: Path) -> None:
    """A file written within SETTLED_NS could change again in the same clock tick: no record."""
    f = tmp_path / "c.json"
    shutil.copyfile(MINI, f)
    for _ in range(3):
        load_catalog([f])
    assert _indexes() and not _by_stat()


@pytest.mark.parametrize("damage", ["garbage", "other-ident", "bad-name", "unknown-key"])
def test_a_bad_identity_record_falls_back_to_the_contents(
        damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import marshal

    monkeypatch.setattr(index, "SETTLED_NS", 0)
    f = tmp_path / "c.json"
    shutil.copyfile(MINI, f)
    want = load_catalog([f]).doc
    (rec,) = _by_stat()
    head = index._BY_STAT
    ident, name = marshal.loads(rec.read_bytes()[len(head):])
    rec.write_bytes({
        "garbage": b"\x00" * 40,
        "other-ident": head + marshal.dumps((("x",), name)),
        "bad-name": head + marshal.dumps((ident, "../../etc/passwd")),
        "unknown-key": head + marshal.dumps((ident, "0" * 64)),
    }[damage])
    seen = _unread(monkeypatch)
    assert load_catalog([f]).doc == want
    assert seen == [f]  # the contents decided


def test_a_hit_imports_no_validator(tmp_path: Path) -> None:
    """A run answered from the index neither validates nor merges: the validator, the schema
    gate and `copy` (layering) are not imported at all (start-up, issue 15)."""
    import subprocess
    import sys

    code = ("import sys; from hwmgr.catalog.load import load_catalog; "
            f"cat = load_catalog([{str(SHIPPED)!r}]); "
            "print(len(cat.names()), *sorted(m for m in ('hwmgr.catalog.validate', "
            "'hwmgr.catalog.fastvalidate', 'copy', 'jsonschema') if m in sys.modules))")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr + runs[1].stderr
    miss, hit = (r.stdout.split() for r in runs)
    assert "hwmgr.catalog.validate" in miss  # the first run built the index
    assert hit == [miss[0]] and int(hit[0]) > 0, (miss, hit)
