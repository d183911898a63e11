"""The compiled catalog: the merged, validated catalog saved once per input, loaded in ms.

Parsing a catalog strictly and checking it (duplicate keys, semantic rules, cross-file
conflicts) costs ~1 s for 50,000 device rules; a run that reads the same files again needs
none of it. After a clean load, `store` writes the merged result (the merged document with
its rules, the device index, file facts, which layer set each value) as plain tuples, dicts
and lists with `marshal`, under
`cache_dir()/catalog-index/KEY`, where KEY hashes every input's path and bytes, the schema,
`CHECKS_VERSION` and this module's format: any change to any input is a different KEY, so a
stale index is never read. The payload carries its own CRC-32; a damaged or foreign file
is a miss (the full loader runs and rewrites it), never an error.

Reading and hashing the inputs is itself most of a hit's cost for a big catalog (7.5 MB for
50,000 rules). So a hit also records, under `catalog-index/by-stat/`, which KEY the inputs'
identities (path, device, inode, size, mtime, ctime) had; the next run with the same
identities skips to that KEY. Git's rule against racy timestamps applies: the record is
written only when every input is older than `SETTLED_NS`, so any later write changes the
ctime (which no user can set back) and with it the identity.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import stat
import sys
import time
import zlib
from pathlib import Path

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations stay strings (PEP 563)
if TYPE_CHECKING:
    from typing import Any, Sequence

FORMAT = b"hwmgr-catalog-index 3\n"
_DIGEST = 4  # CRC-32 of the payload: catches damage; whoever can write the cache is trusted
_INTERN_MAX = 64
KEEP = 16  # compiled indexes (and validation markers) kept per cache directory
SETTLED_NS = 2 * 10**9  # inputs this much older than now can be known by their identities
_BY_STAT = b"hwmgr-catalog-by-stat 1\n"


def key(files: Sequence[tuple[Path, bytes]], schema: bytes, checks_version: str) -> str:
    """The hash naming an index: every input file (path and bytes), schema, rule version."""
    import hashlib  # OpenSSL's load costs ~3 ms: only runs that hash pay it

    h = hashlib.sha256(FORMAT)
    h.update(hashlib.sha256(schema).digest())
    h.update(checks_version.encode())
    for path, raw in files:
        h.update(b"\0" + os.fsencode(str(path)) + b"\0")
        h.update(hashlib.sha256(raw).digest())
    return h.hexdigest()


def _crc(payload: bytes) -> bytes:
    return zlib.crc32(payload).to_bytes(4, "big")


def index_path(cache: Path, name: str) -> Path:
    return cache / "catalog-index" / name


def plain(value: Any) -> Any:
    """The same JSON value built from exact dict/list types only (what marshal accepts), with
    keys and short strings interned: marshal then writes each once (half the load time)."""
    if isinstance(value, dict):
        return {sys.intern(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, str) and len(value) <= _INTERN_MAX:
        return sys.intern(value)
    return value


def cache_write(cache: Path, path: Path, data: bytes, keep: int | None = None) -> None:
    """Write one file of the analysing machine's catalog cache atomically, through a Host
    that may write only `cache`, keeping the `keep` (default KEEP) newest of its directory;
    silently skipped when the cache is unwritable."""
    from hwmgr.errors import HwmgrError
    from hwmgr.host.runner import SubprocessRunner
    from hwmgr.host.seam import Host

    cache_host = Host("/", SubprocessRunner(), writable=[str(cache)])
    with contextlib.suppress(OSError, HwmgrError):
        cache_host.write_bytes(str(path), data)
        _prune(cache_host, path, keep=KEEP if keep is None else keep)


def _prune(host: Any, newest: Path, keep: int) -> None:
    """Keep `newest` and the `keep - 1` most recent other files of its cache directory: every
    edit of a catalog layer makes a new key, and nothing else would ever delete the old ones."""
    entries = []
    for entry in os.scandir(newest.parent):
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False) and entry.name != newest.name:
                entries.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.path))
    for _mtime, stale in sorted(entries, reverse=True)[max(keep - 1, 0):]:
        host.remove(stale)


def store(cache: Path, path: Path, state: tuple[Any, ...]) -> None:
    """Write `state` atomically under `cache`; silently skipped when it cannot be."""
    try:
        payload = marshal.dumps(state)
    except ValueError:
        return
    cache_write(cache, path, FORMAT + _crc(payload) + payload)


def load(path: Path) -> tuple[Any, ...] | None:
    """The stored state, or None when missing, damaged or not ours."""
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError:
        return None
    head = len(FORMAT)
    if blob[:head] != FORMAT or len(blob) < head + _DIGEST:
        return None
    digest, payload = blob[head:head + _DIGEST], blob[head + _DIGEST:]
    if _crc(payload) != digest:
        return None
    enabled = gc.isenabled()
    gc.disable()  # ~100k new containers, none cyclic: collections would only repeat work
    try:
        state = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    finally:
        if enabled:
            gc.enable()
    return state if isinstance(state, tuple) else None


# ----------------------------------------------------------------------------- the load hook
class Slot:
    """Where the Catalog for these inputs is (or is to be) stored, and the identity record
    (`by-stat`) that names it, written with it when the inputs are settled."""

    __slots__ = ("path", "by_stat", "ident")

    def __init__(self, path: Path, by_stat: Path | None, ident: tuple[Any, ...] | None) -> None:
        self.path, self.by_stat, self.ident = path, by_stat, ident

    def record(self, cache: Path) -> None:
        """Write the identity record naming `path`, unless it already does."""
        if self.by_stat is not None and self.ident is not None and \
                _by_stat_read(self.by_stat, self.ident) != self.path.name:
            cache_write(cache, self.by_stat, _BY_STAT + marshal.dumps((self.ident,
                                                                        self.path.name)))


def lookup(files: Sequence[Path], *, schema: bytes, checks_version: str, cache: Path,
           types: tuple[Any, Any]) -> tuple[Any, Slot | None]:
    """(the Catalog stored for exactly these files, its slot) on a hit; (None, where to store
    it) on a miss; (None, None) when an input cannot be read (the full loader says why). The
    loader passes what the key and the rebuilt object need (`types`: Catalog, CatalogFile),
    so this module never imports it back."""
    ident = _identities(files, schema, checks_version)
    by_stat = _by_stat_path(cache, ident) if ident is not None else None
    name = _by_stat_read(by_stat, ident) if by_stat is not None else None
    if name is not None:
        cat = _rebuilt(index_path(cache, name), types)
        if cat is not None:
            return cat, Slot(index_path(cache, name), by_stat, ident)
    from hwmgr.catalog.validate import read_catalog  # a miss: the hit above needs no validator

    inputs = []
    for p in files:
        raw, _why = read_catalog(p)
        if raw is None:
            return None, None
        inputs.append((p, raw))
    slot = Slot(index_path(cache, key(inputs, schema, checks_version)), by_stat, ident)
    cat = _rebuilt(slot.path, types)
    if cat is not None:
        slot.record(cache)
    return cat, slot


def _rebuilt(where: Path, types: tuple[Any, Any]) -> Any:
    """The Catalog stored at `where`, or None when missing, damaged or not one."""
    state = load(where)
    if state is None:
        return None
    try:
        return _catalog(state, *types)
    except (TypeError, ValueError, KeyError, IndexError):
        return None


def _identities(files: Sequence[Path], schema: bytes,
                checks_version: str) -> tuple[Any, ...] | None:
    """What identifies these inputs without reading them; None when one is not a settled
    regular file (then the contents decide)."""
    out: list[Any] = [FORMAT, zlib.crc32(schema), len(schema), checks_version]
    settled = time.time_ns() - SETTLED_NS
    for p in files:
        try:
            st = os.stat(p)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or max(st.st_mtime_ns, st.st_ctime_ns) >= settled:
            return None
        out.append((os.fsencode(str(p)), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                    st.st_ctime_ns))
    return tuple(out)


def _by_stat_path(cache: Path, ident: tuple[Any, ...]) -> Path:
    """Where the record for `ident` lives (a CRC names it; the record holds `ident` itself)."""
    return cache / "catalog-index" / "by-stat" / f"{zlib.crc32(marshal.dumps(ident)):08x}"


def _by_stat_read(path: Path, ident: tuple[Any, ...]) -> str | None:
    """The KEY recorded for exactly these identities, or None."""
    try:
        with open(path, "rb") as fh:
            blob = fh.read(64 * 1024)
        got, name = marshal.loads(blob[len(_BY_STAT):]) if blob.startswith(_BY_STAT) else (
            None, None)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if got != ident or not isinstance(name, str) or len(name) != 64 or \
            name.strip("0123456789abcdef"):
        return None
    return name


def remember(slot: Slot | None, cat: Any) -> None:
    """Store a cleanly loaded Catalog for the next run (and its identity record)."""
    if slot is None:
        return
    where = slot.path
    files = tuple((str(f.path), f.sha256, f.catalog_version, f.released) for f in cat.files)
    origin = {k: str(v) for k, v in cat.origin.items()}
    buckets: dict[str | None, dict[tuple[str | None, ...], tuple[str, int]]] = {}
    for k, (n, i) in cat._index.items():
        buckets.setdefault(k[1], {})[tuple(plain(k))] = (sys.intern(n), i)
    packed = {v: marshal.dumps(b) for v, b in buckets.items()}
    prov = [(list(k), str(v)) for k, v in cat.provenance._by.items()]
    # each driver entry on its own: a run decodes only the entries it looks at (a big catalog
    # is mostly one vendor's device rules that a host never matches)
    doc = {k: (None if k == "drivers" else plain(v)) for k, v in cat.doc.items()}
    drivers = {sys.intern(n): marshal.dumps(plain(e)) for n, e in cat.drivers.items()}
    store(where.parent.parent, where,
          (files, doc, origin, packed, prov, drivers, dict(cat._netdevs)))
    if os.path.isfile(where):  # stored (an unreadable cache dir is simply no record)
        slot.record(where.parent.parent)


def _catalog(state: tuple[Any, ...], catalog_cls: Any, file_cls: Any) -> Any:
    """A Catalog rebuilt from a stored state (TypeError/ValueError when it is not one)."""
    Catalog, CatalogFile = catalog_cls, file_cls  # noqa: N806 - the loader's classes

    files, doc, origin, idx, prov, drivers, netdevs = state
    if not (isinstance(doc, dict) and isinstance(origin, dict) and isinstance(idx, dict)
            and isinstance(netdevs, dict)):
        raise TypeError("not a catalog index")
    cat = Catalog()
    cat.files = [CatalogFile(Path(p), sha, ver, rel) for p, sha, ver, rel in files]
    cat.add_rules({**doc, "drivers": {}})
    cat._netdevs = dict(netdevs)  # what add_rules reads from every entry, kept at store time
    cat.drivers = _LazyDrivers(drivers)
    if "drivers" in doc:
        doc["drivers"] = cat.drivers  # same key order as the merged document
    cat.doc = doc  # the merged layers: driver entries and the schema 2 rules
    cat.provenance._by = {tuple(k): Path(v) for k, v in prov}
    cat.origin = {k: Path(v) for k, v in origin.items()}
    cat._index = _LazyIndex(idx)
    return cat


class _LazyDict(dict):  # type: ignore[type-arg]
    """A dict from a compiled index whose parts (marshal blobs) are decoded on first use.
    Every whole-dict operation decodes the rest first, so it acts as the full dict."""

    def __init__(self, buckets: dict[Any, bytes]) -> None:
        super().__init__()
        if not all(isinstance(b, bytes) for b in buckets.values()):
            raise TypeError("not a catalog index")
        self._buckets = dict(buckets)

    def _merge(self, bucket: Any, part: Any) -> None:
        raise NotImplementedError

    def _bucket(self, key: Any) -> Any:
        raise NotImplementedError

    def _fill(self, bucket: Any) -> None:
        blob = self._buckets.pop(bucket, None)
        if blob is None:
            return
        try:
            part = marshal.loads(blob)
        except (EOFError, ValueError, TypeError):
            part = None
        if not isinstance(part, dict):
            from hwmgr.errors import BadInputError

            raise BadInputError("the compiled catalog index in the cache is damaged; "
                                "remove ~/.cache/hwmgr/catalog-index and rerun")
        self._merge(bucket, part)

    def _fill_all(self) -> None:
        for bucket in list(self._buckets):
            self._fill(bucket)

    def _fill_for(self, key: Any) -> None:
        if self._buckets:
            self._fill(self._bucket(key))

    def get(self, key: Any, default: Any = None) -> Any:
        self._fill_for(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self._fill_for(key)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        self._fill_for(key)
        return super().__contains__(key)

    def __eq__(self, other: Any) -> bool:
        self._fill_all()
        return dict(self) == other

    __hash__ = None  # type: ignore[assignment]

    def __iter__(self) -> Any:
        self._fill_all()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill_all()
        return super().__len__()

    def keys(self) -> Any:
        self._fill_all()
        return super().keys()

    def values(self) -> Any:
        self._fill_all()
        return super().values()

    def items(self) -> Any:
        self._fill_all()
        return super().items()

    def copy(self) -> dict[Any, Any]:
        self._fill_all()
        return dict(super().items())


class _LazyIndex(_LazyDict):
    """Catalog._index from a compiled index: one vendor's rules are decoded when a device of
    that vendor is first looked up (a host has a few vendors; a big catalog has thousands of
    rules)."""

    def _bucket(self, key: Any) -> Any:
        return key[1] if isinstance(key, tuple) and len(key) > 1 else None

    def _merge(self, bucket: Any, part: Any) -> None:
        self.update(part)


class _LazyDrivers(_LazyDict):
    """Catalog.drivers from a compiled index: an entry is decoded when it is first read; once
    all are, they are in the merged document's order again."""

    def __init__(self, buckets: dict[Any, bytes]) -> None:
        super().__init__(buckets)
        self._order = list(buckets)

    def _bucket(self, key: Any) -> Any:
        return key

    def _merge(self, bucket: Any, part: Any) -> None:
        dict.__setitem__(self, bucket, part)
        if not self._buckets:
            ordered = [(k, dict.__getitem__(self, k)) for k in self._order]
            dict.clear(self)
            dict.update(self, ordered)
