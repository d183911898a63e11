"""Build once, ship binaries: build one catalog driver version for one kernel in private DKMS
trees, sign the modules with the site key, and package them as a binary .deb (or kmod RPM,
hwmgr.lifecycle.builds.kmodrpm) plus a catalog layer fragment that pins the package's sha256.

The sources take the same checked path as `hwmgr package` and an upgrade (catalog source →
verified fetch → safe unpack); DKMS runs with --sourcetree/--dkmstree/--installtree under a
temp dir, so the build host's /usr/src, /var/lib/dkms and /lib/modules are never written
(DKMS only reads the headers of the target kernel).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from hwmgr import __version__
from hwmgr.config import Config
from hwmgr.errors import BadInputError, HwmgrError
from hwmgr.host.hashing import sha256_file
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.buildlog import BuildUI, activity
from hwmgr.lifecycle.builds.dkms import Dkms, render_dkms_conf
from hwmgr.lifecycle.builds.package import (
    DEFAULT_PACKAGER,
    catalog_source,
    output_dir,
    srpm_tags,
)
from hwmgr.lifecycle.builds.recipe import Recipe, check_kernel, check_version, load_recipe
from hwmgr.lifecycle.builds.tarball import kind_of, unpack_source
from hwmgr.lifecycle.source.fetch import Source
from hwmgr.lifecycle.source.mirror import fetch_mirrored, source_mirrors
from hwmgr.lifecycle.source.signature import check_signature

if TYPE_CHECKING:  # annotations only
    from hwmgr.catalog.load import Catalog

FORMATS = ("deb", "rpm")
DEB_SUBDIR = "updates/hwmgr"  # below /lib/modules/K: hwmgr-verify expects /updates/hwmgr/
QUICK_TIMEOUT = 60.0
MAX_MODULE_BYTES = 256 << 20  # read whole to check the signature (igb.ko: ~0.6 MiB)
# DKMS signs when its sign-file exists; a path that never does keeps an unsigned build
# unsigned (without a key, DKMS would otherwise make and use a throwaway one)
NO_SIGN_FILE = "/nonexistent/hwmgr-unsigned-build"
_DEB_NAME_RE = re.compile(r"[a-z0-9][a-z0-9+.-]+")
_MODULE_SIG_MAGIC = b"~Module signature appended~\n"


@dataclass
class BuiltModule:
    """One module DKMS built for the kernel, read back from the private tree."""

    name: str
    path: Path
    version: str
    signer: str


@dataclass
class BinaryResult:
    """The binary package `hwmgr package --binary` wrote, and its catalog fragment."""

    path: Path
    format: str
    name: str
    driver: str
    version: str  # the catalog's V
    package_version: str  # V mapped to the format's rules
    kernel: str
    sha256: str
    size: int
    signed: bool
    modules: list[dict[str, str]]  # name, version, signer, sha256
    layer: Path
    source_sha256: str
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """The JSON `data` of `hwmgr package --binary`."""
        return {
            "path": str(self.path), "format": self.format, "name": self.name,
            "driver": self.driver, "version": self.version,
            "package_version": self.package_version, "kernel": self.kernel,
            "sha256": self.sha256, "size": self.size, "signed": self.signed,
            "modules": self.modules, "layer": str(self.layer),
            "source": {"sha256": self.source_sha256},
            "seconds": round(self.seconds, 3), "warnings": list(self.warnings),
        }


@dataclass
class Staged:
    """What a packager gets: the modules built and signed, and the facts for its headers."""

    recipe: Recipe
    driver: str
    version: str
    kernel: str
    modules: list[BuiltModule]
    signed: bool
    license: str
    url: str
    source_name: str
    source_sha256: str
    catalog_version: str


# ============================================================================ names
def deb_name(driver: str, kernel: str) -> str:
    """`<driver-with-dashes>-modules-<K>`, lower case; BadInputError when Debian refuses it."""
    name = f"{driver.replace('_', '-')}-modules-{kernel}".lower()
    if not _DEB_NAME_RE.fullmatch(name):
        raise BadInputError(f"kernel release {kernel!r} cannot be part of a Debian package "
                            f"name ({name!r}: a-z, 0-9, + . - only)")
    return name


def deb_version(version: str, revision: str = "1") -> str:
    """A Debian version for catalog version V: `_` and other characters Debian forbids
    become `+`, a leading non-digit gets `0+`, and `-<revision>` follows (so a `-` in V stays
    legal): `3.8.9_lab_broken` → `3.8.9+lab+broken-1`."""
    up = re.sub(r"[^A-Za-z0-9.+~-]", "+", version)
    if not up[:1].isdigit():
        up = "0+" + up
    return f"{up}-{revision}"


def rpm_version(version: str) -> str:
    """An RPM Version for V: `-` (it separates Version from Release) becomes `_`."""
    return version.replace("-", "_")


def layer_fragment(driver: str, version: str, kernel: str, fmt: str, file_name: str,
                   sha256: str, size: int, signed: bool) -> dict[str, object]:
    """The catalog layer that records this package for `driver` `version` on `kernel`
    (docs/rollout.md, "Build once, ship binaries"); layers merge it by kernel and format."""
    return {
        "schema_version": 3,
        "description": f"hwmgr {__version__}: the {fmt} package of {driver} {version} built "
                       f"for kernel {kernel} (hwmgr package --binary {fmt})",
        "drivers": {driver: {"versions": {version: {"packages": {kernel: {fmt: {
            "file": file_name, "sha256": sha256, "size": size, "signed": signed}}}}}}},
    }


# ============================================================================ the build
def _signing_pair(key: str | None, cert: str | None) -> tuple[str, str] | None:
    """The site key and certificate (both real files), None for an unsigned build."""
    if not key and not cert:
        return None
    if not (key and cert):
        raise BadInputError("signing needs both a key and a certificate (--sign-key and "
                            "--sign-cert, or HWMGR_SIGN_KEY and HWMGR_SIGN_CERT)")
    for what, p in (("signing key", key), ("signing certificate", cert)):
        if not os.path.isfile(p):
            raise BadInputError(f"{what} {p} is not a readable file")
    return os.path.abspath(key), os.path.abspath(cert)


def has_signature(data: bytes) -> bool:
    """True when a module file's bytes end with the kernel's appended-signature magic."""
    return data.endswith(_MODULE_SIG_MAGIC)


def build_modules(
    host: Host, catalog: Catalog, driver: str, version: str, kernel: str, *,
    settings: Config, work: str, sign_key: str | None = None, sign_cert: str | None = None,
    ui: BuildUI | None = None,
) -> Staged:
    """Fetch and unpack `driver` `version` as an upgrade does, then dkms add + build for
    `kernel` in scratch trees under `work`; each module is checked (modinfo version V,
    vermagic K, signed when a key is given)."""
    version = check_version(version)
    kernel = check_kernel(kernel)
    source, _warnings = catalog_source(catalog, driver, version)
    recipe = load_recipe(driver, settings.drivers_dir)
    if not recipe.supports_kernel(kernel):
        raise BadInputError(f"the {driver} recipe does not support kernel {kernel}")
    Dkms(host).check_headers(kernel)  # one line naming K and its headers package
    pair = _signing_pair(sign_key, sign_cert)
    src = Source.from_catalog(source)
    got = fetch_mirrored(host, src, settings.cache_dir, offline=settings.offline,
                         mirror=settings.mirror, per_source=source_mirrors(source),
                         progress=ui.download(src.name(), src.size) if ui else None,
                         on_retry=ui.retry if ui else None, who=f"{driver} {version}")
    if source.get("signing_key"):
        check_signature(host, got.path, settings.state_dir, source["signing_key"])
    with activity(ui, f"unpacking {got.path.name}"):
        tree = unpack_source(host, got.path, f"{work}/unpack", recipe, version)
    dk = Dkms(host, scratch=f"{work}/dkms", mok_key=pair[0] if pair else None,
              mok_cert=pair[1] if pair else None, build_timeout=settings.build_timeout)
    if pair is None:
        dk.env["sign_file"] = NO_SIGN_FILE
    dk.add(tree, driver, version, dkms_conf=render_dkms_conf(recipe, version))
    with activity(ui, f"dkms build {driver}/{version} for {kernel} (private trees)"):
        kos = dk.build(driver, version, kernel, modules=recipe.module_names)
    modules = []
    for m, ko in kos.items():
        signer = host.run(["modinfo", "-F", "signer", str(ko)], timeout=QUICK_TIMEOUT)
        signed = has_signature(host.read_bytes(str(ko), limit=MAX_MODULE_BYTES) or b"")
        if pair and not signed:
            raise HwmgrError(f"{m}.ko for {kernel} was built but not signed with "
                             f"{pair[0]} (is the kernel's sign-file installed?)")
        if not pair and signed:
            raise HwmgrError(f"{m}.ko for {kernel} carries a signature but no key was given")
        modules.append(BuiltModule(m, ko, version, signer.stdout.strip() if signed else ""))
    tags = (srpm_tags(host, got.path) if kind_of(got.path) == "srpm"
            else {"license": "", "url": ""})
    return Staged(recipe, driver, version, kernel, modules, pair is not None,
                  tags["license"] or "Unknown", tags["url"] or str(source.get("url") or ""),
                  got.path.name, got.sha256, str(catalog.version or "unversioned"))


# (host, staged modules, work dir, out dir, packager) -> the built package in the work dir:
# debpkg.make_deb, kmodrpm.make_kmod_rpm (the command picks one: they import this module)
Packager = Callable[[Host, Staged, str, Path, str], Path]


def build_binary(
    host: Host, catalog: Catalog, driver: str, version: str, *, fmt: str, kernel: str,
    make: Packager, settings: Config, out_dir: str | os.PathLike[str],
    sign_key: str | None = None, sign_cert: str | None = None,
    packager: str = DEFAULT_PACKAGER, ui: BuildUI | None = None,
) -> BinaryResult:
    """`hwmgr package DRIVER --version V --binary FMT --kernel K --out DIR`: the package
    `make` builds and its catalog layer fragment (`<package file>.catalog.json`) in
    `out_dir`."""
    started = time.monotonic()
    if fmt not in FORMATS:
        raise BadInputError(f"--binary {fmt!r}: one of {', '.join(FORMATS)}")
    if "\n" in packager or not packager.strip():
        raise BadInputError(f"packager {packager!r} must be one line like 'Name <email>'")
    if fmt == "deb":
        deb_name(driver, check_kernel(kernel))  # refuse an unusable name before building
    out_host, out = output_dir(host, out_dir)  # the one directory the user named
    work = host.make_temp_dir(f"{settings.cache_dir}/package", prefix=f"{driver}-{version}.")
    try:
        staged = build_modules(host, catalog, driver, version, kernel, settings=settings,
                               work=work, sign_key=sign_key, sign_cert=sign_cert, ui=ui)
        with activity(ui, f"packaging {driver} {version} for {kernel} as {fmt}"):
            built = make(host, staged, work, out, packager)
        dest = out / built.name
        try:
            out_host.copy_in(built, str(dest), mode=0o644)
        except OSError as exc:
            raise HwmgrError(f"cannot write {dest}: {exc.strerror}") from None
        digest, size = sha256_file(dest), dest.stat().st_size
        layer = out / f"{built.name}.catalog.json"
        doc = layer_fragment(driver, version, kernel, fmt, built.name, digest, size,
                             staged.signed)
        out_host.write_bytes(str(layer), (json.dumps(doc, indent=1) + "\n").encode())
        pkg_version = deb_version(version) if fmt == "deb" else rpm_version(version)
        return BinaryResult(
            path=dest, format=fmt,
            name=deb_name(driver, kernel) if fmt == "deb" else f"kmod-{driver}",
            driver=driver, version=version, package_version=pkg_version, kernel=kernel,
            sha256=digest, size=size, signed=staged.signed,
            modules=[{"name": m.name, "version": m.version, "signer": m.signer,
                      "sha256": sha256_file(m.path)} for m in staged.modules],
            layer=layer, source_sha256=staged.source_sha256,
            seconds=time.monotonic() - started)
    finally:
        with contextlib.suppress(OSError):
            host.remove_tree(work)

