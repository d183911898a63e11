"""PCI names remembered between runs, per pci.ids file.

Loading the name database is most of a small inventory's work: libpci parses the whole
pci.ids (1.3 MB, ~12 ms here; lspci pays the same) before its first answer. The names of the
ID tuples a run met are stored under `cache/pci-names/`, keyed by the pci.ids file's identity
(path, device, inode, size, mtime) and the backend; a run that meets only remembered IDs never
loads the database. Any update of pci.ids (`update-pciids`, a package upgrade) is a new key.
A damaged, foreign or oddly shaped file is a miss, never an error: the database answers.
"""

from __future__ import annotations

import marshal
import os
import zlib
from pathlib import Path

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations stay strings (PEP 563)
if TYPE_CHECKING:
    from typing import Any

FORMAT = b"hwmgr-pci-names 1\n"
MAX_ENTRIES = 4096  # a hostile snapshot with random IDs must not grow the file without bound
KEEP = 4  # files kept: one per pci.ids version seen recently

IdTuple = tuple  # (vendor, device, subsystem vendor, subsystem device, class): hex or None
Names = tuple  # (vendor, device, subsystem, class) names: str or None


class NameMemo:
    """The remembered names for one pci.ids file; `entries` seeds a scan, `save` keeps what
    it added. Built with `for_names`, which answers None when there is nothing to key on."""

    def __init__(self, key: tuple[Any, ...], path: Path) -> None:
        self.key = key
        self.path = path
        self.entries: dict[IdTuple, Names] = {}

    @classmethod
    def for_names(cls, names: Any, cache: Path) -> NameMemo | None:
        """The memo of `names`' pci.ids (a PciNames), loaded; None without a readable file."""
        try:
            ids_path = names.ids_path or next(
                (p for p in names.search_paths if os.path.isfile(p)), None)
            if ids_path is None:
                return None
            st = os.stat(ids_path)
        except (OSError, TypeError, ValueError):
            return None  # PciNames reports a bad explicit path itself when it loads
        key = (names.backend, names.libpci_name, os.path.abspath(ids_path), st.st_dev,
               st.st_ino, st.st_size, st.st_mtime_ns)
        name = f"{zlib.crc32(repr(key).encode()):08x}"
        memo = cls(key, cache / "pci-names" / name)
        memo.entries = memo._read()
        return memo

    def _read(self) -> dict[IdTuple, Names]:
        try:
            with open(self.path, "rb") as fh:
                blob = fh.read()
        except OSError:
            return {}
        head = len(FORMAT)
        if blob[:head] != FORMAT or zlib.crc32(blob[head + 4:]).to_bytes(4, "big") != \
                blob[head:head + 4]:
            return {}
        try:
            key, entries = marshal.loads(blob[head + 4:])
        except (EOFError, ValueError, TypeError):
            return {}
        if key != self.key or not _well_formed(entries):
            return {}
        return entries

    def save(self, seen: dict[IdTuple, Names]) -> None:
        """Store `seen` when it holds tuples the file lacks (and stays under MAX_ENTRIES)."""
        if len(seen) <= len(self.entries) or len(seen) > MAX_ENTRIES or not _well_formed(seen):
            return
        from hwmgr.catalog.index import cache_write

        payload = marshal.dumps((self.key, dict(seen)))
        blob = FORMAT + zlib.crc32(payload).to_bytes(4, "big") + payload
        cache_write(self.path.parent.parent, self.path, blob, keep=KEEP)
        self.entries = dict(seen)


def _well_formed(entries: Any) -> bool:
    """A dict of 5-tuples of str/None to 4-tuples of str/None, and nothing else."""
    if type(entries) is not dict:
        return False
    for ids, names in entries.items():
        if type(ids) is not tuple or len(ids) != 5 or type(names) is not tuple or \
                len(names) != 4:
            return False
        for v in (*ids, *names):
            if v is not None and type(v) is not str:
                return False
    return True
