"""PCI names remembered between runs (hwmgr/catalog/namememo.py): the same names as the
database gives, the database left unloaded when every ID is remembered, and a new pci.ids, a
damaged file or a hostile one never trusted."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from hwmgr.catalog.namememo import FORMAT, MAX_ENTRIES, NameMemo
from hwmgr.catalog.pciids import DEFAULT_IDS_PATHS, PciNames
from hwmgr.host.snapshot import open_host
from hwmgr.inventory.scan import Inventory

REPO = Path(__file__).resolve().parent.parent
HOSTS = REPO / "tests" / "fixtures" / "hosts"
SYSTEM_IDS = next((p for p in DEFAULT_IDS_PATHS if os.path.isfile(p)), None)
pytestmark = pytest.mark.skipif(SYSTEM_IDS is None, reason="no pci.ids on this machine")


def _ids(tmp_path: Path) -> Path:
    """A private copy of the machine's pci.ids (its identity is what the memo keys on)."""
    dest = tmp_path / "pci.ids"
    shutil.copyfile(str(SYSTEM_IDS), dest)
    return dest


def _scan(root: Path, names: PciNames, known: dict | None = None) -> tuple[dict, Inventory]:
    host, _ = open_host(str(root))
    inv = Inventory(host, names=names, known_names=known)
    return inv.scan().to_json(), inv


@pytest.mark.parametrize("fixture", ["seed002-before", "seed000-ustor", "this-machine"])
def test_remembered_names_answer_without_the_database(fixture: str, tmp_path: Path) -> None:
    ids = _ids(tmp_path)
    cache = tmp_path / "cache"
    first = PciNames(ids_path=str(ids))
    memo = NameMemo.for_names(first, cache)
    assert memo is not None and memo.entries == {}
    want, inv = _scan(HOSTS / fixture, first, memo.entries)
    assert first.source is not None  # the first run needed the database
    memo.save(inv.pci_names)
    assert memo.path.is_file() and memo.path.parent == cache / "pci-names"

    second = PciNames(ids_path=str(ids))
    again = NameMemo.for_names(second, cache)
    assert again is not None and again.entries == inv.pci_names
    got, _ = _scan(HOSTS / fixture, second, again.entries)
    assert got == want
    assert any(d["device_name"] for d in got["devices"])
    assert second._loaded is False  # every name came from the memo


def test_a_new_pci_ids_is_a_new_key(tmp_path: Path) -> None:
    ids = _ids(tmp_path)
    cache = tmp_path / "cache"
    names = PciNames(ids_path=str(ids))
    memo = NameMemo.for_names(names, cache)
    assert memo is not None
    _, inv = _scan(HOSTS / "seed002-before", names)
    memo.save(inv.pci_names)
    # update-pciids: same path, new bytes and mtime
    with open(ids, "a") as fh:
        fh.write("# updated\n")
    os.utime(ids, ns=(1, 1))
    fresh = NameMemo.for_names(PciNames(ids_path=str(ids)), cache)
    assert fresh is not None and fresh.entries == {} and fresh.path != memo.path
    # another backend is another key too
    other = NameMemo.for_names(PciNames(ids_path=str(ids), backend="pciids"), cache)
    assert other is not None and other.key != fresh.key


def _blob(payload: bytes) -> bytes:
    return FORMAT + zlib.crc32(payload).to_bytes(4, "big") + payload


@pytest.mark.parametrize("damage", ["flipped", "truncated", "foreign-key", "bad-shape",
                                    "not-marshal", "empty"])
def test_a_damaged_or_hostile_memo_is_a_miss(damage: str, tmp_path: Path) -> None:
    ids = _ids(tmp_path)
    names = PciNames(ids_path=str(ids))
    memo = NameMemo.for_names(names, tmp_path / "cache")
    assert memo is not None
    want, inv = _scan(HOSTS / "seed002-before", names)
    memo.save(inv.pci_names)
    raw = memo.path.read_bytes()
    lie = {k: ("Evil Corp", None, None, None) for k in inv.pci_names}
    blob = {
        "flipped": raw[:-3] + bytes([raw[-3] ^ 0xFF]) + raw[-2:],
        "truncated": raw[: len(raw) // 2],
        "foreign-key": _blob(marshal.dumps((("other",), lie))),
        "bad-shape": _blob(marshal.dumps((memo.key, {k: "Evil Corp" for k in lie}))),
        "not-marshal": _blob(b"\xff\xfe not marshal"),
        "empty": b"",
    }[damage]
    memo.path.write_bytes(blob)
    again = NameMemo.for_names(PciNames(ids_path=str(ids)), tmp_path / "cache")
    assert again is not None and again.entries == {}
    got, _ = _scan(HOSTS / "seed002-before", PciNames(ids_path=str(ids)), again.entries)
    assert got == want


def test_no_unbounded_growth_and_no_error_when_unwritable(tmp_path: Path) -> None:
    ids = _ids(tmp_path)
    memo = NameMemo.for_names(PciNames(ids_path=str(ids)), tmp_path / "cache")
    assert memo is not None
    many = {(f"{i:04x}", "0001", None, None, "0200"): ("v", None, None, None)
            for i in range(MAX_ENTRIES + 1)}
    memo.save(many)
    assert not memo.path.exists()
    # a cache path that cannot be a directory: skipped silently
    (tmp_path / "file").write_text("x")
    blocked = NameMemo.for_names(PciNames(ids_path=str(ids)), tmp_path / "file")
    assert blocked is not None
    blocked.save({("8086", "1528", None, None, "0200"): ("Intel", None, None, None)})
    assert (tmp_path / "file").read_text() == "x"


def test_no_pci_ids_means_no_memo(tmp_path: Path) -> None:
    assert NameMemo.for_names(PciNames(search_paths=(str(tmp_path / "none"),)),
                              tmp_path) is None
    assert NameMemo.for_names(PciNames(ids_path=str(tmp_path / "missing")), tmp_path) is None


def test_cli_second_run_same_json_and_one_file(tmp_path: Path) -> None:
    """The user's view: two runs of `hwmgr inventory --json`, the same output; the memo is one
    small file under the cache directory."""
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    argv = [sys.executable, "-m", "hwmgr", "inventory", "--json", "--no-catalog",
            "--root", str(HOSTS / "seed002-before")]
    runs = [subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO,
                           timeout=120) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    assert runs[0].stdout == runs[1].stdout
    assert any(d["device_name"] for d in json.loads(runs[1].stdout)["data"]["devices"])
    files = list((tmp_path / "cache" / "hwmgr" / "pci-names").iterdir())
    assert len(files) == 1 and files[0].stat().st_size < 64 * 1024
