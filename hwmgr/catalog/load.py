"""The driver catalog: load and validate catalog files, match PCI devices, give verdicts.

Catalog files are hwmgr's own data (not the analysed host's), so they are read directly,
but as untrusted input: `hwmgr.catalog_check` reads only regular files of bounded size,
parses strictly and checks the facts the schema cannot express. Schema validation needs
jsonschema (slow to import); its verdict is cached by content hash so everyday commands
never import it. The strict parse and the semantic checks (cheap) run on every load.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from hwmgr.catalog import layers, versions
from hwmgr.catalog.discover import (  # noqa: F401 - ENV_DIR, discover: public here too
    ENV_DIR,
    base_files,
    discover,
    site_files,
)
from hwmgr.catalog.refs import json_path, ref_hits  # json_path: public here too
from hwmgr.catalog.rules import RuleData
from hwmgr.catalog.verdict import _kernel_ok, decide
from hwmgr.config import current
from hwmgr.errors import BadInputError, NotFoundError, VersionError

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations stay strings (PEP 563)
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

    from hwmgr.catalog.discover import PathLike

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "catalog.schema.json"
# Bump when the validation rules change (here or in catalog_check): invalidates every cached
# verdict.
CHECKS_VERSION = "5"

STATUSES = ("recommended", "known-good", "known-bad", "deprecated")
VERDICTS = ("ok", "outdated", "known-bad", "unknown")
LEVELS = ("subsystem", "device", "class")  # most specific first

_HEX4 = re.compile(r"^[0-9a-f]{4}$")


# ----------------------------------------------------------------------------- small helpers
def _one_line(msg: str, limit: int = 240) -> str:
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def _hex4(value: Any) -> str | None:
    """Normalise an ID ('0x19A2', '19a2') to 4 lowercase hex digits, else None."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower()
    v = v[2:] if v.startswith("0x") else v
    return v if _HEX4.match(v) else None


def _driver_key(name: Any) -> str | None:
    """A driver name as module names compare (ethtool says 'r8169', modules 'r8169')."""
    return name.strip().replace("-", "_") if isinstance(name, str) and name.strip() else None


def _class4(value: Any) -> str | None:
    """Base class + subclass from '0200', '020000' or '0x020000'."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower()
    v = v[2:] if v.startswith("0x") else v
    return _hex4(v[:4]) if len(v) in (4, 6) else None


# ----------------------------------------------------------------------------- cache
def cache_dir(config: Any = None) -> Path:
    """$XDG_CACHE_HOME/hwmgr, else ~/.cache/hwmgr (as `config` read it)."""
    return Path(current(config).user_cache_dir)


def _schema_bytes() -> bytes:
    try:
        return SCHEMA_PATH.read_bytes()
    except OSError as exc:
        raise BadInputError(f"catalog schema {SCHEMA_PATH} is unreadable: {exc}") from None


def _sha256(data: bytes) -> str:
    """Hex SHA-256; hashlib (OpenSSL, ~3 ms to load) is imported by the runs that hash."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _marker(digest: str) -> Path:
    schema = _sha256(_schema_bytes())
    key = _sha256(f"{digest}:{schema}:{CHECKS_VERSION}".encode())
    return cache_dir() / "catalog-valid" / key


def _cached_ok(digest: str) -> bool:
    try:
        return _marker(digest).is_file()
    except OSError:
        return False


def _remember_ok(digest: str, path: Path) -> None:
    """Record a passed schema validation; silently skipped when the cache is unwritable."""
    from hwmgr.catalog.index import cache_write

    data = (json.dumps({"file": str(path), "sha256": digest}) + "\n").encode()
    cache_write(cache_dir(), _marker(digest), data)


# ----------------------------------------------------------------------------- parsing + schema
_VALIDATORS: dict[bool, Any] = {}


def _schema_findings(data: Any, partial: bool = False) -> list[tuple[tuple[Any, ...], str]]:
    """(path parts, message) against the shipped schema, or its relaxed form for a partial
    layer; a compiled gate accepts a whole valid file in ms, and only what it rejects meets
    jsonschema (imported then), so users see jsonschema's messages."""
    if not partial:
        from hwmgr.catalog.fastvalidate import gate_for

        gate = gate_for(_schema_bytes())
        if gate is not None and gate(data):
            return []
    import jsonschema
    from jsonschema.exceptions import best_match

    if partial not in _VALIDATORS:
        schema = json.loads(_schema_bytes())
        _VALIDATORS[partial] = jsonschema.Draft202012Validator(
            layers.relaxed_schema(schema) if partial else schema)
    out: list[tuple[tuple[Any, ...], str]] = []
    try:
        for err in _VALIDATORS[partial].iter_errors(data):
            if err.validator in ("anyOf", "oneOf") and err.context and isinstance(
                    err.instance, (dict, list)):
                err = best_match(err.context)  # a short, specific message for containers
            out.append((tuple(err.absolute_path), _one_line(err.message)))
    except RecursionError:
        out.append(((), "structure is nested too deeply"))
    return sorted(set(out), key=lambda f: (json_path(f[0]), f[1]))


def _schema_errors(data: Any, partial: bool = False) -> list[tuple[str, str]]:
    """Schema findings as (JSON path, message)."""
    return [(json_path(p), m) for p, m in _schema_findings(data, partial)]


# ----------------------------------------------------------------------------- semantic checks
def _rule_key(rule: Mapping[str, Any]) -> tuple[str | None, ...]:
    if "device" in rule:
        if "subvendor" in rule:
            return ("subsystem", rule["vendor"], rule["device"], rule["subvendor"],
                    rule["subdevice"])
        return ("device", rule["vendor"], rule["device"])
    return ("class", rule.get("vendor"), rule["class"])


# ----------------------------------------------------------------------------- the catalog
@dataclass(frozen=True)
class CatalogFile:
    """One loaded catalog file."""

    path: Path
    sha256: str
    catalog_version: str
    released: str


@dataclass(frozen=True)
class Match:
    """A device matched to a catalog entry, at a specificity level (subsystem/device/class)."""

    driver: str
    level: str
    rule: Mapping[str, Any]
    entry: Mapping[str, Any]

    @property
    def name(self) -> str:
        """The catalog's name for the matched device rule."""
        return str(self.rule.get("name"))


@dataclass
class _Check:
    path: Path
    digest: str = ""
    data: Any = None
    errors: list[str] = field(default_factory=list)


def _check_file(path: Path, *, use_cache: bool, partial: bool = False) -> _Check:
    """Read, parse, schema-validate (cached) and semantically check one file. A `partial`
    layer is checked for its own shape only (no required keys; the merge is checked later)."""
    from hwmgr.catalog.validate import parse, read_catalog, semantic_errors  # index misses only

    chk = _Check(path)
    raw, why = read_catalog(path)
    if raw is None:
        chk.errors.append(f"{path}: {why}")
        return chk
    chk.digest = _sha256(raw)
    data, errs = parse(raw)
    key = f"layer:{chk.digest}" if partial else chk.digest
    if not errs and partial and not isinstance(data, dict):
        errs = [("$", "a catalog layer must be a JSON object")]
    if not errs:
        if not (use_cache and _cached_ok(key)):
            errs = _schema_errors(layers.without_nulls(data) if partial else data, partial)
            if not errs:
                _remember_ok(key, path)
        if not errs and not partial:
            errs = semantic_errors(data)
    chk.data = data if not errs else None
    chk.errors += [f"{path}: {p}: {m}" for p, m in errs]
    return chk


class Catalog(RuleData):
    """Merged catalog entries with a device index; answers match() and verdict()."""

    def __init__(self) -> None:
        super().__init__()
        self.files: list[CatalogFile] = []
        self.drivers: dict[str, dict[str, Any]] = {}
        self.origin: dict[str, Path] = {}
        self.doc: dict[str, Any] = {}
        self.provenance = layers.Provenance()
        # rule key -> (driver, rule index) of every entry claiming it: several drivers may
        # drive one device (mpt2sas/mpt3sas, r8168/r8169, mlx4_core/mlx4_en)
        self._index: dict[tuple[str | None, ...], list[tuple[str, int]]] = {}

    # ---------------------------------------------------------------- building
    def _layer(self, chk: _Check) -> None:
        """Merge one checked file over the layers before it (later layers win)."""
        data = chk.data
        if not self.files:
            self.doc = json.loads(json.dumps(data))
            for key in data:
                self.provenance.set((key,), chk.path)
            for name in data.get("drivers", {}):
                self.provenance.set(("drivers", name), chk.path)
        else:
            self.doc.setdefault("drivers", {})
            for name in data.get("drivers") or {}:
                if name not in self.doc["drivers"]:
                    self.provenance.set(("drivers", name), chk.path)
            schema = max(self.doc.get("schema_version", 1), data.get("schema_version", 1))
            layers.merge(self.doc, data, chk.path, self.provenance)
            self.doc["schema_version"] = schema  # a v1 site layer keeps the base's v2 rules
        self.files.append(CatalogFile(chk.path, chk.digest, str(data.get("catalog_version", "")),
                                      str(data.get("released", ""))))

    def _merged_errors(self, use_cache: bool) -> list[str]:
        """Check the merged result of two or more layers: full schema, semantic rules."""
        if len(self.files) < 2:
            return []
        digest = _sha256(json.dumps(self.doc, sort_keys=True).encode())
        key = f"merged:{digest}"
        found: list[tuple[tuple[Any, ...], str]] = []
        if not (use_cache and _cached_ok(key)):
            found = _schema_findings(self.doc)
            if not found:
                _remember_ok(key, self.files[-1].path)
        if not found:
            return []
        order = [f.path for f in self.files]

        def named(p: tuple[Any, ...]) -> str:
            files = self.provenance.files_under(p) or {self.files[0].path}
            return ", ".join(str(f) for f in order if f in files)

        return [f"merged catalog: {json_path(p)}: {m} (layers: {named(p)})" for p, m in found]

    def _index_all(self) -> list[str]:
        """Build the device index of the merged drivers; a rule claimed twice is an error."""
        errors: list[str] = []
        for name, drv in self.doc.get("drivers", {}).items():
            where = self.provenance.of(("drivers", name))
            for i, rule in enumerate(drv["devices"]):
                key = _rule_key(rule)
                claims = self._index.setdefault(key, [])
                same = [j for other, j in claims if other == name]
                if same:
                    mine = self.provenance.of(("drivers", name, "devices")) or where
                    errors.append(
                        f"{mine}: {json_path(['drivers', name, 'devices', i])}: device rule "
                        f"{':'.join(k or '*' for k in key[1:])} ({key[0]}) is already defined at "
                        f"{json_path(['drivers', name, 'devices', same[0]])}")
                else:
                    claims.append((name, i))
            self.drivers[name] = drv
            self.origin[name] = where or self.files[0].path
        self.add_rules(self.doc)
        return errors

    @staticmethod
    def build(paths: Sequence[PathLike], *, use_cache: bool = True) -> tuple[Catalog, list[str]]:
        """Layer these files in order (the first complete, later ones possibly partial) and
        return the catalog with every error, one line each: 'FILE: $.json.path: message'."""
        cat = Catalog()
        errors: list[str] = []
        for p in paths:
            chk = _check_file(Path(p), use_cache=use_cache, partial=bool(cat.files))
            errors += chk.errors
            if chk.data is not None and not errors:
                cat._layer(chk)
        if errors or not cat.files:
            return cat, errors
        return cat, cat._finish(use_cache)

    def _finish(self, use_cache: bool) -> list[str]:
        """The checks of the layered whole: merged schema, cross-layer rules, the index."""
        from hwmgr.catalog.validate import semantic_errors

        errors = self._merged_errors(use_cache)
        if not errors:
            errors = [f"merged catalog: {p}: {m}" for p, m in semantic_errors(self.doc)] if len(
                self.files) > 1 else []
        if not errors:
            errors = self._index_all()
        return errors

    @staticmethod
    def validate_files(paths: Sequence[PathLike]) -> list[str]:
        """Every error of these files layered in order (full schema validation, no cache)."""
        return Catalog.check_files(paths)[0]

    @staticmethod
    def check_files(paths: Sequence[PathLike]) -> tuple[list[str], list[Any]]:
        """`validate_files`, plus each file's parsed document (None where it has errors), so
        a caller that reports on the files need not parse them again."""
        cat = Catalog()
        errors: list[str] = []
        docs: list[Any] = []
        for p in paths:
            chk = _check_file(Path(p), use_cache=False, partial=bool(cat.files))
            errors += chk.errors
            docs.append(chk.data)
            if chk.data is not None:
                cat._layer(chk)
        if errors or not cat.files:
            return errors, docs
        return cat._finish(use_cache=False), docs  # the files are checked: not a second time

    def effective(self, name: str) -> list[dict[str, Any]]:
        """Every value of one merged driver entry with the file it came from."""
        entry = self.entry(name)
        return [{"path": json_path(["drivers", name, *p]), "value": v,
                 "file": str(self.provenance.of(("drivers", name, *p)))}
                for p, v in layers.leaves(entry)]

    # ---------------------------------------------------------------- queries
    def names(self) -> list[str]:
        """Driver entry names, sorted."""
        return sorted(self.drivers)

    def entry(self, name: str) -> dict[str, Any]:
        """One driver entry; NotFoundError naming the known ones."""
        if name not in self.drivers:
            known = ", ".join(self.names()) or "none"
            raise NotFoundError(f"catalog has no driver {name!r} (known: {known})")
        return self.drivers[name]

    @property
    def version(self) -> str | None:
        """catalog_version of the loaded file(s), joined with '+' when several."""
        return "+".join(f.catalog_version for f in self.files) or None

    def match(self, dev: Mapping[str, Any]) -> Match | None:
        """The most specific entry for an inventory device: 4-tuple, vendor:device, class."""
        v, d = _hex4(dev.get("vendor_id")), _hex4(dev.get("device_id"))
        sv, sd = _hex4(dev.get("subsystem_vendor_id")), _hex4(dev.get("subsystem_device_id"))
        cls = _class4(dev.get("class"))
        keys: list[tuple[str | None, ...]] = []
        if v and d and sv and sd:
            keys.append(("subsystem", v, d, sv, sd))
        if v and d:
            keys.append(("device", v, d))
        if cls:
            keys += [("class", v, cls), ("class", None, cls)]
        bound = [_driver_key(dev.get(k)) for k in ("driver", "pci_driver")]
        for key in keys:
            hits = [(n, i) for n, i in self._index.get(key, ())
                    if "class" not in self.drivers[n]["devices"][i]
                    or self.drivers[n]["devices"][i]["class"] == cls]
            if not hits:
                continue
            # the entry of the driver actually bound (netdev, then PCI), else the first claim
            name, i = next((h for b in bound for h in hits if b and _driver_key(h[0]) == b),
                           hits[0])
            return Match(name, str(key[0]), self.drivers[name]["devices"][i], self.drivers[name])
        return None

    def applicable(self, m: Match, dev: Mapping[str, Any],
                   kernel: str | None) -> dict[str, dict[str, Any]]:
        """The versions of the matched entry that apply to this device and kernel."""
        ids = tuple(_hex4(dev.get(k)) for k in
                    ("vendor_id", "device_id", "subsystem_vendor_id", "subsystem_device_id"))
        out = {}
        for ver, ve in m.entry["versions"].items():
            if "applies_to" in ve and not any(ref_hits(r, ids) for r in ve["applies_to"]):
                continue
            if _kernel_ok(ve.get("kernels"), kernel):
                out[ver] = ve
        return out

    def recommended(self, dev: Mapping[str, Any],
                    kernel: str | None = None) -> tuple[str, dict[str, Any]] | None:
        """(version, version entry) recommended for this device on this kernel, if any."""
        m = self.match(dev)
        if m is None:
            return None
        recs = [v for v, ve in self.applicable(m, dev, kernel).items()
                if ve["status"] == "recommended"]
        if not recs:
            return None
        scheme = m.entry["version_scheme"]
        try:
            best = versions.newest(recs, scheme, kernel=kernel)
        except VersionError:
            best = sorted(recs)[-1]
        return best, m.entry["versions"][best]

    def verdict(self, dev: Mapping[str, Any], kernel: str | None = None) -> dict[str, Any] | None:
        """{entry, status, recommended_version, reason, ...} for an inventory device, or None
        when no entry matches. status: ok, outdated, known-bad or unknown."""
        m = self.match(dev)
        if m is None:
            return None
        return decide(self, m, dev, kernel)


# ----------------------------------------------------------------------------- loading
def load_catalog(paths: Sequence[PathLike] | None = None, *,
                 config: Any = None) -> Catalog:
    """Load, validate and layer catalog files: `paths` in order when given; else the base
    catalog (see `base_files`) then the site layers (`site_files`). BadInputError on any
    error, naming the file and JSON path of the first one."""
    from hwmgr.catalog import index

    files = discover(paths) if paths else base_files(config) + site_files(config)
    hit, slot = index_lookup(files)  # compiled once per content hash (catalog/index.py)
    if hit is not None:
        return hit
    cat, errors = Catalog.build(files)
    if errors:
        more = f" (and {len(errors) - 1} more; run 'hwmgr catalog validate')" if len(
            errors) > 1 else ""
        raise BadInputError(f"bad catalog: {errors[0]}{more}")
    index.remember(slot, cat)
    return cat


def index_lookup(files: Sequence[Path]) -> tuple[Catalog | None, Any]:
    """The compiled index's answer for exactly these files (see catalog/index.py)."""
    from hwmgr.catalog import index

    return index.lookup(files, schema=_schema_bytes(), checks_version=CHECKS_VERSION,
                        cache=cache_dir(), types=(Catalog, CatalogFile))
