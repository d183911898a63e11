"""The driver catalog: load and validate catalog files, match PCI devices, give verdicts.

Catalog files are hwmgr's own data (not the analysed host's), so they are read directly,
but as untrusted input: `catalog.validate` reads only regular files of bounded size, parses
strictly and checks the facts the schema cannot express; `catalog.schema` applies the JSON
Schema, whose passed verdict is remembered by content hash so everyday commands never import
jsonschema. The verdict covers the per-value checks and the semantic rules too; JSON syntax,
the merge and the device index are redone on every load.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, cast

from hwmgr.catalog import kbuild, layers, versions
from hwmgr.catalog.discover import ENV_DIR, PathLike, catalog_files, discover
from hwmgr.catalog.entry import DeviceRule, DriverEntry, KernelBuilds, VersionEntry, as_catalog
from hwmgr.catalog.kbuild import KernelBuild
from hwmgr.catalog.model import Knowledge
from hwmgr.catalog.refs import (
    JsonPath,
    class4,
    driver_key,
    hex4,
    json_path,
    parse_json_path,
    ref_hits,
)
from hwmgr.catalog.rules import RuleData
from hwmgr.catalog.schema import VerdictCache, findings
from hwmgr.catalog.support import Support
from hwmgr.catalog.validate import parse, read_catalog, semantic_errors, v3_errors
from hwmgr.catalog.verdict import Verdict, _kernel_ok, decide
from hwmgr.config import Config
from hwmgr.errors import BadInputError, NotFoundError, VersionError
from hwmgr.output import printable

__all__ = ["ENV_DIR", "Catalog", "CatalogFile", "Match", "discover", "json_path",
           "load_catalog"]

STATUSES = ("recommended", "known-good", "known-bad", "deprecated")
VERDICTS = ("ok", "outdated", "known-bad", "uncatalogued", "unknown")
LEVELS = ("subsystem", "device", "driver", "class")  # most specific first

# ("subsystem", v, d, sv, sd) | ("device", v, d) | ("class", v|None, c)
RuleKey = tuple[Optional[str], ...]


# ----------------------------------------------------------------------------- small helpers
def _schema_errors(data: object, partial: bool = False) -> list[tuple[str, str]]:
    """Schema findings as (JSON path, message)."""
    return [(json_path(p), m) for p, m in findings(data, partial)]


# ----------------------------------------------------------------------------- semantic checks
def _rule_key(rule: DeviceRule) -> RuleKey:
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
    rule: DeviceRule
    entry: DriverEntry

    @property
    def name(self) -> str:
        """The catalog's name for the matched device rule."""
        return str(self.rule.get("name"))


@dataclass
class _Check:
    """One file on its way in: where it is, its bytes' SHA-256, its document, its errors."""

    path: Path
    partial: bool = False  # layered over earlier files: its own shape only (required relaxed)
    digest: str = ""
    raw: bytes | None = None  # read, not parsed yet
    data: object = None
    errors: list[str] = field(default_factory=list)

    def fail(self, found: Sequence[tuple[str, str]]) -> None:
        """Record (JSON path, message) findings; the document is then not used."""
        if found:
            self.data = None
            self.errors += [f"{self.path}: {p}: {m}" for p, m in found]


def _read_file(path: Path) -> _Check:
    """Read one file and take its bytes' SHA-256 (the remembered verdicts' key)."""
    chk = _Check(path)
    raw, why = read_catalog(path)
    if raw is None:
        chk.errors.append(f"{path}: {why}")
        return chk
    chk.digest, chk.raw = hashlib.sha256(raw).hexdigest(), raw
    return chk


def _parse_file(chk: _Check, values: bool) -> None:
    """Parse the bytes read: always as strict JSON; with `values` (no remembered verdict for
    these very bytes) every value is checked too (duplicate keys, numbers, text, depth)."""
    if chk.raw is not None:
        chk.data, errs = parse(chk.raw, values=values)
        chk.raw = None
        chk.fail(errs)


def _check_file(chk: _Check, schema: bool) -> None:
    """The schema (unless its verdict is known) and, for a complete file, the semantic rules."""
    if chk.errors:  # unreadable or not strict JSON (a JSON null is data, and meets the schema)
        return
    if chk.partial and not isinstance(chk.data, dict):
        chk.fail([("$", "a catalog layer must be a JSON object")])
        return
    if schema:
        chk.fail(_schema_errors(layers.without_nulls(chk.data) if chk.partial else chk.data,
                                chk.partial))
    if schema and not chk.errors:  # a remembered verdict covers the per-file rules too
        chk.fail(v3_errors(chk.data))
    if schema and not chk.errors and chk.partial:  # a complete file: semantic_errors says it
        chk.fail([(json_path(p), m) for p, m in layers.repeated(chk.data)])
    if schema and not chk.errors and not chk.partial:  # nothing to take out, then the rules
        chk.fail([(json_path(p), "a complete catalog takes nothing out (remove, or "
                                 "{KEY: null}, is for a layer over another catalog)")
                  for p in layers.removals(chk.data)])
    if schema and not chk.errors and not chk.partial:
        chk.fail(semantic_errors(as_catalog(chk.data)))


class Catalog(RuleData):
    """Merged catalog entries with a device index; answers match() and verdict()."""

    def __init__(self) -> None:
        super().__init__()
        self.files: list[CatalogFile] = []
        self.entries: dict[str, DriverEntry] = {}  # name -> merged entry, validated
        self.origin: dict[str, Path] = {}
        self.doc: dict[str, object] = {}  # the merged JSON; as_catalog(self.doc) reads it
        self.provenance = layers.Provenance()
        # rule key -> (driver, rule index) of every entry claiming it: several drivers may
        # drive one device (mpt2sas/mpt3sas, r8168/r8169, mlx4_core/mlx4_en)
        self._index: dict[tuple[str | None, ...], list[tuple[str, int]]] = {}
        self._knowledge: dict[str, Knowledge] = {}  # typed known issues, built on first use
        self._builds: dict[tuple[str | None, ...], KernelBuild] = {}
        self._support: Support | None = None
        self._placing: dict[str, Any] | None = None  # kbuild.identify's tables, read once

    # ---------------------------------------------------------------- building
    def _layer(self, chk: _Check, take: bool = False) -> None:
        """Merge one checked file over the layers before it (later layers win); with `take`
        the file's document is merged without a copy (nobody reads it afterwards)."""
        data = chk.data if isinstance(chk.data, dict) else {}  # (checked: an object)
        if not self.files:
            self.doc = json.loads(json.dumps(data))
            for key in data:
                self.provenance.record((key,), chk.path)
            for name in data.get("drivers", {}):
                self.provenance.record(("drivers", name), chk.path)
        else:
            merged = as_catalog(self.doc)
            merged.setdefault("drivers", {})
            for name in data.get("drivers") or {}:
                if name not in merged["drivers"]:
                    self.provenance.record(("drivers", name), chk.path)
            schema = max(merged.get("schema_version", 1), data.get("schema_version", 1))
            layers.merge(self.doc, data, chk.path, self.provenance, take)
            self.doc["schema_version"] = schema  # a v1 site layer keeps the base's v2 rules
        self.files.append(CatalogFile(chk.path, chk.digest, str(data.get("catalog_version", "")),
                                      str(data.get("released", ""))))

    def _merged_errors(self) -> list[str]:
        """The merged result of two or more layers against the full schema."""
        if len(self.files) < 2:
            return []
        found = findings(layers.without_whole_lists(self.doc))
        if not found:
            return []
        order = [f.path for f in self.files]

        def named(p: JsonPath) -> str:
            files = self.provenance.files_under(layers.keyed_path(self.doc, p)) or {
                self.files[0].path}
            return ", ".join(str(f) for f in order if f in files)

        return [f"merged catalog: {json_path(p)}: {m} (layers: {named(p)})" for p, m in found]

    def _index_all(self) -> list[str]:
        """Build the device index of the merged drivers; a rule claimed twice is an error."""
        errors: list[str] = []
        for name, drv in as_catalog(self.doc).get("drivers", {}).items():
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
            self.entries[name] = drv
            self.origin[name] = where or self.files[0].path
        self.add_rules(as_catalog(self.doc))
        return errors

    @staticmethod
    def build(paths: Sequence[PathLike], *,
              verdicts: VerdictCache | None = None) -> tuple[Catalog, list[str]]:
        """Layer these files in order (the first complete, later ones possibly partial) and
        return the catalog with every error, one line each: 'FILE: $.json.path: message'.
        With `verdicts`, the schema check is skipped for layers that passed it before."""
        cat, errors, _docs = Catalog._assemble(paths, verdicts, keep_docs=False)
        return cat, errors

    @staticmethod
    def _assemble(paths: Sequence[PathLike], verdicts: VerdictCache | None,
                  keep_docs: bool = True) -> tuple[Catalog, list[str], list[object]]:
        """`build`, plus each file's parsed document as read (None where it has errors);
        without `keep_docs` the documents are merged without copies and not returned."""
        chks = [_read_file(Path(p)) for p in paths]
        readable = verdicts is not None and not any(c.errors for c in chks)
        key = verdicts.key([c.digest for c in chks]) if verdicts and readable else None
        file_keys = verdicts.file_keys([c.digest for c in chks]) if verdicts and readable \
            else [""] * len(chks)
        # a remembered verdict: these exact bytes passed every check below before, under the
        # same schema and CHECKS_VERSION (the key), so only what the catalog needs is redone;
        # a file's own remembered verdict spares its own checks (a new layer over a base
        # checked before costs that layer's and the merged check)
        seen = verdicts.remembered() if verdicts and readable else set()
        known = key is not None and key in seen
        own = [known or k in seen for k in file_keys]
        for chk, done in zip(chks, own):
            _parse_file(chk, values=not done)
        cat = Catalog()
        errors: list[str] = []
        for chk, done in zip(chks, own):
            chk.partial = bool(cat.files)  # a layer over a base that loaded
            _check_file(chk, schema=not done)
            version = chk.data.get("schema_version", 1) if isinstance(chk.data, dict) else 1
            if not chk.errors and (version not in (1, 2, 3) or isinstance(version, bool)):
                # a partial layer's schema check leaves it open; the merge compares it
                chk.errors.append(f"{printable(chk.path)}: $.schema_version: "
                                  f"{printable(json.dumps(version))[:40]} is not one of [1, 2, 3]")
            errors += chk.errors
            if not errors:
                cat._layer(chk, take=not keep_docs)
        docs = [c.data for c in chks] if keep_docs else []
        if errors or not cat.files:
            return cat, errors, docs
        errors = cat._finish(schema=not known)
        if not errors and key is not None and verdicts is not None and not known:
            verdicts.remember(*[k for k, done in zip(file_keys, own) if not done], key)
        return cat, errors, docs

    def _finish(self, schema: bool) -> list[str]:
        """The checks of the layered whole: merged schema, cross-layer rules, the index."""
        errors = self._merged_errors() if schema else []
        if schema and not errors and len(self.files) > 1:
            order = [f.path for f in self.files]
            errors = [f"merged catalog: "
                      f"{layers.blame(self.doc, self.provenance, order, parts, m)}"
                      if (parts := parse_json_path(p)) is not None else
                      f"merged catalog: {p}: {m}"
                      for p, m in semantic_errors(as_catalog(self.doc))]
        if not errors:
            errors = self._index_all()
        return errors

    @staticmethod
    def check_files(paths: Sequence[PathLike]) -> tuple[list[str], list[object]]:
        """Every error of these files layered in order (full schema validation, no remembered
        verdict), and each file's parsed document (None where it has errors), so a caller
        that reports on the files need not parse them again (`hwmgr catalog validate`)."""
        _cat, errors, docs = Catalog._assemble(paths, None)
        return errors, docs

    @staticmethod
    def check_layers(paths: Sequence[PathLike]) -> tuple[list[str], list[object]]:
        """`check_files` of layers on their own: each file's shape as a layer (the relaxed
        schema and a layer's rules), with no base beneath (`hwmgr catalog validate --alone`)."""
        chks = [_read_file(Path(p)) for p in paths]
        for chk in chks:
            _parse_file(chk, values=True)
            chk.partial = True
            _check_file(chk, schema=True)
        return [e for c in chks for e in c.errors], [c.data for c in chks]

    def effective(self, name: str) -> list[dict[str, object]]:
        """Every value of one merged driver entry with the file it came from."""
        entry = self.entry(name)
        return [{"path": json_path(p), "value": v, "file": str(self.provenance.of(p))}
                for p, v in layers.leaves(entry, ("drivers", name))]

    # ---------------------------------------------------------------- queries
    @property
    def drivers(self) -> dict[str, dict[str, Any]]:
        """The entries as plain JSON objects, for readers not yet on `entries` / `entry()`
        (compliance.check): the same dict, not a copy."""
        return cast("dict[str, dict[str, Any]]", self.entries)

    def names(self) -> list[str]:
        """Driver entry names, sorted."""
        return sorted(self.entries)

    def entry(self, name: str) -> DriverEntry:
        """One driver entry; NotFoundError naming the known ones."""
        if name not in self.entries:
            known = ", ".join(self.names()) or "none"
            raise NotFoundError(f"catalog has no driver {name!r} (known: {known})")
        return self.entries[name]

    @property
    def version(self) -> str | None:
        """catalog_version of the loaded file(s), joined with '+' when several."""
        return "+".join(f.catalog_version for f in self.files if f.catalog_version) or None

    def match(self, dev: Mapping[str, object]) -> Match | None:
        """The most specific entry for an inventory device: 4-tuple, vendor:device, then the
        entry of the driver bound to it (by a class rule of its own, else as the bound driver:
        a driver's version verdicts hold for every device it drives), then any class rule."""
        v, d = hex4(dev.get("vendor_id")), hex4(dev.get("device_id"))
        sv, sd = hex4(dev.get("subsystem_vendor_id")), hex4(dev.get("subsystem_device_id"))
        cls = class4(dev.get("class"))
        ids: list[tuple[str | None, ...]] = []
        if v and d and sv and sd:
            ids.append(("subsystem", v, d, sv, sd))
        if v and d:
            ids.append(("device", v, d))
        classes: list[tuple[str | None, ...]] = [("class", v, cls), ("class", None, cls)] if (
            cls) else []
        bound = [b for b in (driver_key(dev.get(k)) for k in ("driver", "pci_driver")) if b]
        own = next((n for b in bound for n in self.entries if driver_key(n) == b), None)
        for key in ids:
            hit = self._claim(key, cls, bound)
            if hit:
                return hit
        if own is not None:
            for key in classes:
                hit = self._claim(key, cls, [driver_key(own) or own])
                if hit and hit.driver == own:
                    return hit
            return Match(own, "driver", {"name": f"a device {own} drives"}, self.entries[own])
        for key in classes:
            hit = self._claim(key, cls, bound)
            if hit:
                return hit
        return None

    def _claim(self, key: tuple[str | None, ...], cls: str | None,
               bound: list[str]) -> Match | None:
        """The entry claiming this rule key: the bound driver's when it is among the claims
        (several drivers may claim one device), else the first."""
        hits = [(n, i) for n, i in self._index.get(key, ())
                if "class" not in self.entries[n]["devices"][i]
                or self.entries[n]["devices"][i]["class"] == cls]
        if not hits:
            return None
        name, i = next((h for b in bound for h in hits if driver_key(h[0]) == b), hits[0])
        return Match(name, str(key[0]), self.entries[name]["devices"][i], self.entries[name])

    def applicable(self, m: Match, dev: Mapping[str, object],
                   kernel: str | None) -> dict[str, VersionEntry]:
        """The versions of the matched entry that apply to this device and kernel."""
        ids = tuple(hex4(dev.get(k)) for k in
                    ("vendor_id", "device_id", "subsystem_vendor_id", "subsystem_device_id"))
        out = {}
        for ver, ve in m.entry["versions"].items():
            if "applies_to" in ve and not any(ref_hits(r, ids) for r in ve["applies_to"]):
                continue
            if _kernel_ok(ve.get("kernels"), kernel):
                out[ver] = ve
        return out

    def recommended(self, dev: Mapping[str, object],
                    kernel: str | None = None) -> tuple[str, VersionEntry] | None:
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

    def knowledge(self, name: str) -> Knowledge:
        """The typed known issues and firmware requirements of one driver entry."""
        know = self._knowledge.get(name)
        if know is None:
            know = self._knowledge[name] = Knowledge.from_entry(name, self.entries.get(name, {}))
        return know

    def kernel_builds(self) -> KernelBuilds:
        """The merged `kernel_builds` tables (distribution ABIs, EL streams)."""
        return as_catalog(self.doc).get("kernel_builds", {})

    def support(self) -> Support:
        """The lifecycle table (support.Support), read once."""
        if self._support is None:
            self._support = Support.from_table(self.kernel_builds().get("lifecycle"))
        return self._support

    def kernel_build(self, kernel: str | None, proc_version: str | None = None,
                     signature: str | None = None) -> KernelBuild:
        """The host's kernel build placed on a line (kbuild.identify with the catalog's
        ABI tables), once per distinct input."""
        key = (kernel, proc_version, signature)
        hit = self._builds.get(key)
        if hit is None:
            hit = self._builds[key] = kbuild.identify(kernel, proc_version=proc_version,
                                                      signature=signature, **self._tables())
        return hit

    def _tables(self) -> dict[str, Any]:
        """kbuild.identify's tables from `kernel_builds`, derived once: the Debian and Ubuntu
        ABI tables, the Ubuntu lines' uploads, the Proxmox releases on them, the cloud ABIs."""
        if self._placing is None:
            builds = self.kernel_builds()
            ubuntu = builds.get("ubuntu_lines", {})
            self._placing = {
                "builds": {"debian": builds.get("debian", {}).get("abi", {}),
                           "ubuntu": builds.get("ubuntu", {}).get("abi", {})},
                "lines": {line: t.get("abis", []) for line, t in ubuntu.items()},
                "proxmox": {rel: (line, abi) for line, t in ubuntu.items()
                            for rel, abi in t.get("proxmox", {}).items()},
                "flavours": builds.get("ubuntu_flavours", {}).get("map", {})}
        return self._placing

    def distribution(self, build: KernelBuild) -> str | None:
        """The distribution release a kernel build belongs to (`rhel-7.9`, `debian-12`,
        `ubuntu-22.04`) by the catalog's `kernel_builds` tables, or None."""
        tables = self.kernel_builds()
        rel = build.release or ""
        if build.family == "rhel" and build.line:
            minor = kbuild.el_minor(rel) or tables.get("el", {}).get("streams", {}).get(
                build.line, {}).get(kbuild.stream(build.line, rel))
            return f"rhel-{minor}" if minor else None
        fam = {"Debian": "debian", "Ubuntu": "ubuntu"}.get(build.family or "")
        if fam is None:
            return None
        own = kbuild.debian_release(rel) if fam == "debian" else None
        if own:  # 6.12.33+deb13-amd64 names its release
            return f"debian-{own}"
        base = ".".join(rel.split(".")[:2])
        distro = tables.get("debian", {}) if fam == "debian" else tables.get("ubuntu", {})
        release = distro.get("releases", {}).get(base)
        return f"{fam}-{release}" if release else None

    def verdict(self, dev: Mapping[str, object], kernel: str | None = None,
                proc_version: str | None = None,
                signature: str | None = None) -> Verdict | None:
        """{entry, status, recommended_version, reason, ...} for an inventory device, or None
        when no entry matches. status: one of VERDICTS. `proc_version` and `signature` (the
        host's /proc/version and /proc/version_signature) place a distribution kernel."""
        m = self.match(dev)
        if m is None:
            return None
        return decide(self, m, dev, kernel, self.kernel_build(kernel, proc_version, signature))


# ----------------------------------------------------------------------------- loading
def load_catalog(paths: Sequence[PathLike] | None = None, *, config: Config) -> Catalog:
    """Load, validate and layer catalog files: `paths` in order when given; else the base
    catalog then the site layers (`discover.catalog_files`). NotFoundError when there is no
    catalog at all; BadInputError on any error, naming the file and JSON path of the first."""
    files = catalog_files(paths, config)
    verdicts = VerdictCache(config.user_cache_dir) if config.user_cache_dir else None
    cat, errors = Catalog.build(files, verdicts=verdicts)
    if errors:
        more = f" (and {len(errors) - 1} more; run 'hwmgr catalog validate')" if len(
            errors) > 1 else ""
        raise BadInputError(f"bad catalog: {errors[0]}{more}")
    return cat
