"""Trusting a vendor package on purpose: `hwmgr catalog trust DRIVER VERSION --file PKG`.

The admin obtained a vendor SRPM or tarball by their own means. hwmgr inspects an SRPM with
rpm (digests, name, version, vendor, build host, payload, signature key), a tarball with the
source checks (members, the version its name says, the vendor's sha512 MANIFEST), refuses one
whose name or version is not the catalog's (via the driver recipe), records its sha256 and
size (and the signing key, when signed) in a site catalog layer: the same JSON an admin could
write by hand, merged over the base catalog by `hwmgr.catalog.layers`; and keeps the file in
the download cache, so the next `upgrade` needs no URL and no network.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from hwmgr.errors import BadInputError, NotFoundError, RefusedError
from hwmgr.host.hashing import sha256_file
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.advice import not_in_catalog
from hwmgr.lifecycle.builds.recipe import Recipe
from hwmgr.lifecycle.builds.srpm import inspect_srpm
from hwmgr.lifecycle.builds.tarball import inspect_tarball, kind_of
from hwmgr.lifecycle.source.cache import CacheFile, copy_verified, verified
from hwmgr.lifecycle.source.fetch import cache_path
from hwmgr.lifecycle.source.signature import RPM_TIMEOUT, header_key_id, same_key, verify_in_keyring

if TYPE_CHECKING:  # annotations only
    from hwmgr.catalog.entry import Source, VersionEntry
    from hwmgr.catalog.load import Catalog

TRUST_FILE = "50-trusted.json"
_EXTRA_QUERY = "%{VENDOR}\\n%{BUILDHOST}\\n"


@dataclass
class PackageFacts:
    """What rpm says about the package, and its checksum."""

    path: Path
    name: str
    version: str
    release: str
    vendor: str | None
    build_host: str | None
    signing_key: str | None
    sha256: str
    size: int
    files: list[str] = field(default_factory=list)
    kind: str = "srpm"  # or "tarball": a vendor's tarball
    manifest: int = 0  # files the tarball's sha512 MANIFEST vouched for

    def as_dict(self) -> dict[str, object]:
        return {"file": str(self.path), "kind": self.kind, "name": self.name,
                "version": self.version, "release": self.release, "vendor": self.vendor,
                "build_host": self.build_host, "signing_key": self.signing_key,
                "sha256": self.sha256, "size": self.size, "files": self.files,
                "manifest_files": self.manifest}


def _none(value: str) -> str | None:
    value = value.strip()
    return None if value in ("", "(none)") else value


def inspect_package(host: Host, pkg: Path, recipe: Recipe) -> PackageFacts:
    """Inspect a source RPM (digest check first: a corrupt one is refused, exit 9) or a vendor
    tarball (members, the version in its name, its MANIFEST: refused naming the member)."""
    if kind_of(Path(pkg)) == "tarball":
        tar = inspect_tarball(Path(pkg), recipe)
        return PackageFacts(Path(pkg), recipe.driver, tar.version, "", None, None, None,
                            sha256_file(pkg), Path(pkg).stat().st_size,
                            [m for m in tar.members if m.count("/") <= 1 and m.strip("/")],
                            kind="tarball", manifest=tar.manifest_checked)
    info = inspect_srpm(host, pkg)
    res = host.run(["rpm", "-qp", "--nosignature", "--qf", _EXTRA_QUERY, str(pkg)],
                   timeout=RPM_TIMEOUT)
    lines = (res.stdout.split("\n") + ["", ""])[:2] if res.ok else ["", ""]
    return PackageFacts(Path(pkg), info.name, info.version, info.release, _none(lines[0]),
                        _none(lines[1]), header_key_id(host, Path(pkg)),
                        sha256_file(pkg), Path(pkg).stat().st_size, [f.name for f in info.files])


def check_match(facts: PackageFacts, driver: str, version: str, package_name: str) -> None:
    """Refuse (exit 9) a package that is not the catalog's driver at the catalog's version."""
    if facts.name != package_name:
        raise RefusedError(f"{facts.path.name}: package name is {facts.name!r}, but the "
                           f"{driver} recipe expects {package_name!r}; not recorded")
    if facts.version != version:
        raise RefusedError(f"{facts.path.name}: package version is {facts.version!r}, not the "
                           f"catalog's {driver} {version}; not recorded")


def check_published(sha256: str | None, size: int | None, facts: PackageFacts) -> None:
    """With --sha256/--size (published elsewhere), the file must match them."""
    if sha256 is not None and sha256.strip().lower() != facts.sha256:
        raise RefusedError(f"{facts.path.name}: sha256 is {facts.sha256}, the published "
                           f"checksum is {sha256.strip().lower()}; not recorded")
    if size is not None and size != facts.size:
        raise RefusedError(f"{facts.path.name}: size is {facts.size} bytes, the published size "
                           f"is {size}; not recorded")


def check_signing(host: Host, facts: PackageFacts, where: str, *, pinned: str | None,
                  pinned_in: str | None, require: bool, state_dir: str,
                  verify: bool = True) -> None:
    """Refuse (exit 9) a package the catalog's pinned key or --require-signature rules out,
    and (with `verify`) a signed one whose signature does not verify with hwmgr's keyring:
    what is recorded is what `fetch`/`upgrade` will check again. With --key the caller
    verifies against a copy of the keyring plus the key instead (`keyfile`)."""
    name, key = facts.path.name, facts.signing_key
    pin = f"{pinned} (pinned for {where} in {pinned_in or 'the catalog'})"
    if pinned and key is None:
        raise RefusedError(f"{name}: not signed, but the catalog requires a signature by key "
                           f"{pin}; not recorded")
    if pinned and key and not same_key(key, pinned):
        raise RefusedError(f"{name}: signed by key {key}, but the catalog requires key {pin}; "
                           "not recorded")
    if require and key is None:
        raise RefusedError(f"{name}: not signed, and --require-signature was given for "
                           f"{where}; not recorded")
    if key is None or not verify:
        return
    try:
        verify_in_keyring(host, facts.path, state_dir, key)
    except RefusedError as exc:
        exc.message = f"{exc.message}; not recorded"
        raise


def site_layer(driver: str, version: str, facts: PackageFacts, source: Mapping[str, object],
               today: str | None = None) -> dict[str, object]:
    """The site-catalog JSON that records this package as the version's trusted source."""
    day = today or datetime.date.today().isoformat()
    if facts.kind == "tarball":
        sums = (f"the sha512 of {facts.manifest} files checked against its MANIFEST"
                if facts.manifest else "no sha512 MANIFEST checked")
        what = f"vendor tarball of {facts.name} {facts.version}, {sums}, unsigned"
    else:
        what = (f"{facts.name}-{facts.version}-{facts.release}, vendor "
                f"{facts.vendor or 'none'}, build host {facts.build_host or 'none'}, "
                + (f"signed by key {facts.signing_key}" if facts.signing_key else "unsigned"))
    note = f"trusted with 'hwmgr catalog trust' on {day} from {facts.path.name}: {what}"
    src: Source = {"sha256": facts.sha256, "size": facts.size, "verified": True,
                   "notes": [note]}
    if facts.signing_key:  # a key the catalog pinned stays as written (it may be longer)
        pinned = source.get("signing_key")
        src["signing_key"] = pinned if isinstance(pinned, str) and pinned else facts.signing_key
    if not source.get("filename") and not str(source.get("url", "")).endswith(facts.path.name):
        src["filename"] = facts.path.name
    return {"drivers": {driver: {"versions": {version: {"source": src}}}}}


def cached_name(facts: PackageFacts, source: Mapping[str, object]) -> str:
    """The name `fetch` looks the file up by once the layer is recorded (`site_layer`)."""
    return str(source.get("filename") or facts.path.name)


def keep_in_cache(host: Host, cache_dir: str, facts: PackageFacts,
                  source: Mapping[str, object]) -> Path:
    """Copy the trusted file into the download cache where `fetch` looks first, verified
    again after the copy; returns its path there."""
    final = CacheFile(host, str(cache_path(Path(cache_dir), facts.sha256,
                                           cached_name(facts, source))))
    if verified(final.real, facts.sha256, facts.size):
        return final.real
    host.makedirs(str(Path(final.logical).parent))
    if not copy_verified(facts.path, final, facts.sha256, facts.size):
        raise RefusedError(f"{facts.path.name}: changed while it was copied into the cache "
                           f"{cache_dir}; not recorded")
    return final.real


def _deep(dst: dict[str, object], src: Mapping[str, object]) -> None:
    for k, v in src.items():
        have = dst.get(k)
        if isinstance(v, dict) and isinstance(have, dict):
            _deep(have, v)
        else:
            dst[k] = v


def record(local_host: Host, site_dir: Path, layer: Mapping[str, object],
           name: str = TRUST_FILE) -> Path:
    """Merge `layer` into `site_dir/name` (created if absent) atomically; returns its path."""
    target = site_dir / name
    raw = local_host.read_bytes(str(target))
    doc: dict[str, object] = {"schema_version": 1,
                              "description": "vendor packages trusted at this site "
                                             "(hwmgr catalog trust); safe to edit by hand"}
    if raw is not None:
        try:
            old = json.loads(raw)
        except ValueError as exc:
            raise BadInputError(f"{target}: not JSON ({exc}); fix or remove it first") from None
        if not isinstance(old, dict):
            raise BadInputError(f"{target}: expected a JSON object; fix or remove it first")
        doc = old
    elif local_host.exists(str(target)):
        raise BadInputError(f"{target}: exists but is not readable")
    _deep(doc, json.loads(json.dumps(layer)))
    local_host.write_bytes(str(target), (json.dumps(doc, indent=2) + "\n").encode())
    return target


def version_entry(catalog: Catalog, driver: str, version: str) -> VersionEntry:
    """The catalog's version entry (NotFoundError naming the known versions)."""
    entry = catalog.entry(driver)
    info = entry.get("versions", {}).get(version)
    if info is None:
        raise NotFoundError(not_in_catalog(driver, version, entry.get("versions", {})))
    if not info.get("source"):
        raise NotFoundError(f"{driver} {version} has no source (url) in the catalog; add one in "
                            f"a site catalog file first")
    return info
