"""The compiled catalog: the merged, validated catalog saved once per input, loaded in ms.

Parsing a catalog strictly and checking it (duplicate keys, semantic rules, cross-file
conflicts) costs ~1 s for 50,000 device rules; a run that reads the same files again needs
none of it. After a clean load, `store` writes the merged result (driver entries, the device
index, file facts) as plain tuples, dicts and lists with `marshal`, under
`cache_dir()/catalog-index/KEY`, where KEY hashes every input's path and bytes, the schema,
`CHECKS_VERSION` and this module's format: any change to any input is a different KEY, so a
stale index is never read. The payload carries its own SHA-256; a damaged or foreign file
is a miss (the full loader runs and rewrites it), never an error.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from pathlib import Path
from typing import Any, Sequence

FORMAT = b"hwmgr-catalog-index 1\n"
_DIGEST = 32


def key(files: Sequence[tuple[Path, bytes]], schema: bytes, checks_version: str) -> str:
    """The hash naming an index: every input file (path and bytes), schema, rule version."""
    h = hashlib.sha256(FORMAT)
    h.update(hashlib.sha256(schema).digest())
    h.update(checks_version.encode())
    for path, raw in files:
        h.update(b"\0" + os.fsencode(str(path)) + b"\0")
        h.update(hashlib.sha256(raw).digest())
    return h.hexdigest()


def index_path(cache: Path, name: str) -> Path:
    return cache / "catalog-index" / name


def plain(value: Any) -> Any:
    """The same JSON value built from exact dict/list types only (what marshal accepts)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def store(path: Path, state: tuple[Any, ...]) -> None:
    """Write `state` atomically; silently skipped when the cache is unwritable."""
    try:
        payload = marshal.dumps(state)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        with open(tmp, "wb") as fh:
            fh.write(FORMAT + hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass


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
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        state = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    return state if isinstance(state, tuple) else None


# ----------------------------------------------------------------------------- the load hook
def lookup(files: Sequence[Path]) -> tuple[Any, Path | None]:
    """(the Catalog stored for exactly these files, None) on a hit; (None, where to store it)
    on a miss; (None, None) when an input cannot be read (the full loader says why)."""
    from hwmgr.catalog.load import CHECKS_VERSION, _schema_bytes, cache_dir
    from hwmgr.catalog.validate import read_catalog

    inputs = []
    for p in files:
        raw, _why = read_catalog(p)
        if raw is None:
            return None, None
        inputs.append((p, raw))
    where = index_path(cache_dir(), key(inputs, _schema_bytes(), CHECKS_VERSION))
    state = load(where)
    if state is not None:
        try:
            return _catalog(state), where
        except (TypeError, ValueError, KeyError, IndexError):
            pass
    return None, where


def remember(where: Path | None, cat: Any) -> None:
    """Store a cleanly loaded Catalog for the next run."""
    if where is None:
        return
    files = tuple((str(f.path), f.sha256, f.catalog_version, f.released) for f in cat.files)
    origin = {k: str(v) for k, v in cat.origin.items()}
    store(where, (files, plain(cat.drivers), origin, dict(cat._index)))


def _catalog(state: tuple[Any, ...]) -> Any:
    """A Catalog rebuilt from a stored state (TypeError/ValueError when it is not one)."""
    from hwmgr.catalog.load import Catalog, CatalogFile

    files, drivers, origin, idx = state
    if not (isinstance(drivers, dict) and isinstance(origin, dict) and isinstance(idx, dict)):
        raise TypeError("not a catalog index")
    cat = Catalog()
    cat.files = [CatalogFile(Path(p), sha, ver, rel) for p, sha, ver, rel in files]
    cat.drivers = drivers
    cat.origin = {k: Path(v) for k, v in origin.items()}
    cat._index = idx
    return cat
