"""Wrap one catalog driver version as a noarch `<driver>-dkms` RPM, for fleets that install
packages instead of building on every host.

The sources take the same checked path as an upgrade (catalog source → verified fetch → safe
SRPM unpack → rendered dkms.conf), but the prepared tree goes into an RPM built with
`rpmbuild -bb` from `specs/driver-dkms.spec.in` instead of into this host's DKMS: nothing
changes on the host except the download cache and the output file.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tarfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hwmgr import __version__
from hwmgr.catalog.verdict import source_refusal
from hwmgr.config import Config
from hwmgr.errors import BadInputError, HwmgrError, NotFoundError, RefusedError
from hwmgr.host.hashing import sha256_file
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.advice import not_in_catalog
from hwmgr.lifecycle.builds.buildlog import BuildUI, activity
from hwmgr.lifecycle.builds.dkms import render_dkms_conf
from hwmgr.lifecycle.builds.recipe import Recipe, check_version, load_recipe
from hwmgr.lifecycle.builds.tarball import kind_of, unpack_source
from hwmgr.lifecycle.source.fetch import Source
from hwmgr.lifecycle.source.mirror import fetch_mirrored, source_mirrors
from hwmgr.lifecycle.source.signature import check_signature

if TYPE_CHECKING:  # annotations only
    from hwmgr.catalog.entry import Source as CatalogSource
    from hwmgr.catalog.load import Catalog

TEMPLATE_NAME = "driver-dkms.spec.in"
REPO_SPECS_DIR = Path(__file__).resolve().parents[3] / "specs"
SYSTEM_SPECS_DIR = Path("/usr/share/hwmgr/specs")
DEFAULT_PACKAGER = "hwmgr <root@localhost>"
RELEASE = "1"
RPMBUILD_TIMEOUT = 600.0
QUERY_TIMEOUT = 60.0
_PLACEHOLDER_RE = re.compile(r"@[A-Z_]+@")
# rpm Version: no '-' (it separates Version from Release)
_RPM_VERSION_RE = re.compile(r"[A-Za-z0-9._+~^]+")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass
class PackageResult:
    """The RPM `hwmgr package` wrote, and where its sources came from."""

    path: Path
    name: str
    driver: str
    version: str
    release: str
    sha256: str
    size: int
    srpm: Path
    source_sha256: str
    source_origin: str
    license: str
    spec_text: str
    spec_path: Path | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """The JSON `data` of `hwmgr package`."""
        return {
            "path": str(self.path), "sha256": self.sha256, "size": self.size,
            "name": self.name, "driver": self.driver, "version": self.version,
            "release": self.release, "license": self.license,
            "source": {"srpm": str(self.srpm), "sha256": self.source_sha256,
                       "origin": self.source_origin},
            "spec": str(self.spec_path) if self.spec_path else None,
            "seconds": round(self.seconds, 3), "warnings": list(self.warnings),
        }


# ============================================================================ the spec
def find_template(specs_dir: str | os.PathLike[str] | None = None) -> Path:
    """The DKMS spec template: `specs_dir` (the config's: $HWMGR_SPECS_DIR) first, then the
    checkout, then /usr/share/hwmgr."""
    dirs = ([Path(specs_dir)] if specs_dir else []) + [REPO_SPECS_DIR, SYSTEM_SPECS_DIR]
    for d in dirs:
        if (d / TEMPLATE_NAME).is_file():
            return d / TEMPLATE_NAME
    raise NotFoundError(
        f"no RPM spec template {TEMPLATE_NAME} (looked in {', '.join(map(str, dirs))})")


def spec_value(text: str) -> str:
    """One spec-safe line: whitespace collapsed, rpm's `%` escaped as `%%`."""
    return " ".join(str(text).split()).replace("%", "%%")


def changelog_date(epoch: float | None = None) -> str:
    """rpm's %changelog date (`Thu Jan 01 1970` for epoch 0), in English whatever the locale."""
    t = time.gmtime(epoch)
    return f"{_DAYS[t.tm_wday]} {_MONTHS[t.tm_mon - 1]} {t.tm_mday:02d} {t.tm_year}"


def describe(recipe: Recipe, version: str, srpm_name: str, source_sha256: str) -> str:
    """The %description: what the package holds and what installing it does (<= 76 cols)."""
    paras = [
        f"The {recipe.driver} kernel driver, version {version}, as a DKMS source tree: "
        f"the vendor sources from {srpm_name} (sha256 {source_sha256}) with the dkms.conf "
        f"from hwmgr's {recipe.driver} recipe.",
        "Installing this package registers the sources with DKMS and builds and installs "
        "the module for the running kernel; removing it removes the module from every "
        "kernel.",
    ]
    if recipe.description:
        paras.append(recipe.description.rstrip(".") + ".")
    return "\n\n".join(
        textwrap.fill(spec_value(p), width=76, break_on_hyphens=False) for p in paras)


def render_spec(template: str, values: dict[str, str]) -> str:
    """Fill the `@NAME@` placeholders; an unknown or unfilled placeholder is an error."""
    out = _PLACEHOLDER_RE.sub(lambda mo: values.get(mo.group(0), mo.group(0)), template)
    left = sorted(set(_PLACEHOLDER_RE.findall(template)) - set(values))
    if left:
        raise BadInputError(f"{TEMPLATE_NAME}: unknown placeholder(s) {', '.join(left)}")
    return out


def srpm_tags(host: Host, srpm: Path) -> dict[str, str]:
    """License and URL from the vendor SRPM's header ('' when it has none)."""
    res = host.run(["rpm", "-qp", "--nosignature", "--qf", "%{LICENSE}\\n%{URL}\\n",
                    str(srpm)], timeout=QUERY_TIMEOUT)
    if not res.ok:
        raise HwmgrError(f"{srpm}: cannot read the package header ({res.describe()})")
    lines = (res.stdout.split("\n") + ["", ""])[:2]
    lic, url = (ln.strip() for ln in lines)
    return {"license": "" if lic == "(none)" else lic, "url": "" if url == "(none)" else url}


# ============================================================================ the sources
def _mode(path: Path, ti: tarfile.TarInfo) -> int:
    """0755 for dirs and `#!` scripts, 0644 for every other file (rpmlint-clean sources)."""
    if ti.isdir():
        return 0o755
    if ti.isfile():
        with open(path, "rb") as fh:
            return 0o755 if fh.read(2) == b"#!" else 0o644
    return ti.mode


def make_tarball(host: Host, tree: Path, dkms_conf: str, dest: str, top: str) -> list[str]:
    """Write `tree` (its dkms.conf replaced by `dkms_conf`) as host file `dest`, top dir `top`.

    Members are sorted and owned by root; returns their names below `top`.
    """
    tree = Path(tree)
    names: list[str] = []
    with host.open_atomic(dest) as fh, tarfile.open(
            fileobj=fh, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:

        def add(path: Path, arc: str) -> None:
            ti = tar.gettarinfo(str(path), arcname=arc)
            if ti is None:  # a socket: the source checks never let one through
                raise RefusedError(f"{path}: not a file, directory or link")
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            ti.mode = _mode(path, ti)
            if ti.isfile():
                with open(path, "rb") as fh:
                    tar.addfile(ti, fh)
            else:
                tar.addfile(ti)

        add(tree, top)
        for dirpath, dirnames, filenames in os.walk(tree):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, tree)
            for name in sorted(dirnames + filenames):
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if rel == "dkms.conf":
                    continue
                add(Path(dirpath, name), f"{top}/{rel}")
                names.append(rel)
        data = dkms_conf.encode("utf-8")
        ti = tarfile.TarInfo(f"{top}/dkms.conf")
        ti.size, ti.mode, ti.mtime = len(data), 0o644, int(time.time())
        ti.uname = ti.gname = "root"
        tar.addfile(ti, io.BytesIO(data))
        names.append("dkms.conf")
    return sorted(names)


# ============================================================================ the build
def _rpmbuild_available(host: Host) -> None:
    res = host.run(["rpmbuild", "--version"], timeout=QUERY_TIMEOUT)
    if not res.available:
        raise HwmgrError("rpmbuild is not installed: install 'rpm-build' "
                         "('rpm' on Debian/Ubuntu)")


def catalog_source(catalog: Catalog, driver: str, version: str
                   ) -> tuple[CatalogSource, list[str]]:
    """The version's verified source entry, or the refusal lifecycle would give."""
    versions = catalog.entry(driver).get("versions", {})
    info = versions.get(version)
    if info is None:
        raise NotFoundError(not_in_catalog(driver, version, versions))
    if info.get("status") == "known-bad":
        reason = info.get("reason", "")
        raise RefusedError(f"{driver} {version} is known-bad: {reason}".strip())
    warnings = []
    if info.get("status") == "deprecated":
        warnings.append(f"{driver} {version} is deprecated in the catalog")
    why = source_refusal(info.get("source"))
    if why:
        raise RefusedError(f"{driver} {version}: {why}")
    return info["source"], warnings


def build_dkms_rpm(
    host: Host,
    catalog: Catalog,
    driver: str,
    version: str,
    *,
    settings: Config,
    out_dir: str | os.PathLike[str],
    keep_spec: bool = False,
    packager: str = DEFAULT_PACKAGER,
    ui: BuildUI | None = None,
) -> PackageResult:
    """Fetch, unpack and wrap `driver` `version` as `<driver>-dkms-<version>-1.noarch.rpm`.

    The RPM is written to `out_dir` (created if needed) on this machine, through a local Host
    that may write only there; with `keep_spec` the generated spec goes beside it. Work files
    live in a temp dir under the cache dir and are removed. `ui` (a ProgressUI) shows the
    download, its retries, the unpack and the rpmbuild as they run.
    """
    started = time.monotonic()
    version = check_version(version)
    if not _RPM_VERSION_RE.fullmatch(version):
        raise BadInputError(f"driver version {version!r} cannot be an RPM Version (no '-')")
    if "\n" in packager or not packager.strip():
        raise BadInputError(f"packager {packager!r} must be one line like 'Name <email>'")
    source, warnings = catalog_source(catalog, driver, version)
    recipe = load_recipe(driver, settings.drivers_dir)
    template = find_template(settings.specs_dir)
    _rpmbuild_available(host)
    local, out = output_dir(host, out_dir)

    # the same fetch as an upgrade's: settings.mirror (--mirror, else the site config's: a
    # directory or an HTTP base), then the source's own mirrors, the vendor URL last
    src = Source.from_catalog(source)
    got = fetch_mirrored(host, src, settings.cache_dir,
                         offline=settings.offline, mirror=settings.mirror,
                         per_source=source_mirrors(source),
                         progress=ui.download(src.name(), src.size) if ui else None,
                         on_retry=ui.retry if ui else None, who=f"{driver} {version}")
    if source.get("signing_key"):
        check_signature(host, got.path, settings.state_dir, source["signing_key"])
    name = f"{driver}-dkms"
    work = host.make_temp_dir(f"{settings.cache_dir}/package", prefix=f"{name}-{version}.")
    try:
        with activity(ui, f"unpacking {got.path.name}"):
            tree = unpack_source(host, got.path, f"{work}/unpack", recipe, version)
        conf = render_dkms_conf(recipe, version)
        top = host.makedirs(f"{work}/rpmbuild")
        for sub in ("SOURCES", "SPECS"):
            host.makedirs(f"{work}/rpmbuild/{sub}")
        make_tarball(host, tree, conf, f"{work}/rpmbuild/SOURCES/{driver}-{version}.tar.gz",
                     f"{driver}-{version}")
        tags = (srpm_tags(host, got.path) if kind_of(got.path) == "srpm"
                else {"license": "", "url": ""})  # a tarball has no header to ask
        spec_text = render_spec(template.read_text(encoding="utf-8"), {
            "@DRIVER@": driver,
            "@VERSION@": version,
            "@LICENSE@": spec_value(tags["license"] or "Unknown"),
            "@URL@": spec_value(tags["url"] or source.get("url") or ""),
            "@DESCRIPTION@": describe(recipe, version, got.path.name, got.sha256),
            "@DATE@": changelog_date(),
            "@PACKAGER@": spec_value(packager),
            "@CHANGELOG@": spec_value(
                f"Wrapped by hwmgr {__version__} from {got.path.name} "
                f"(catalog {catalog.version or 'unversioned'})"),
        })
        if not (tags["url"] or source.get("url")):  # a file obtained by hand: rpm refuses
            spec_text = re.sub(r"(?m)^URL:[ \t]*\n", "", spec_text)  # an empty URL tag
        spec = top / "SPECS" / f"{name}.spec"
        host.write_bytes(f"{work}/rpmbuild/SPECS/{name}.spec", spec_text.encode("utf-8"))
        with activity(ui, f"rpmbuild {name}-{version}"):
            res = host.run(["rpmbuild", "-bb", "--define", f"_topdir {top}",
                            "--define", f"packager {spec_value(packager)}", str(spec)],
                           timeout=RPMBUILD_TIMEOUT, cwd=str(top))
        rpm_name = f"{name}-{version}-{RELEASE}.noarch.rpm"
        built = top / "RPMS" / "noarch" / rpm_name
        if not res.ok or not built.is_file():
            raise HwmgrError(f"rpmbuild of {name} {version} failed: {res.describe()}")
        dest = out / rpm_name
        _publish(local, built, dest)
        spec_path = None
        if keep_spec:
            spec_path = out / f"{name}-{version}.spec"
            _publish(local, spec, spec_path)
        return PackageResult(
            path=dest.resolve(), name=name, driver=driver, version=version, release=RELEASE,
            sha256=sha256_file(dest), size=dest.stat().st_size, srpm=got.path,
            source_sha256=got.sha256, source_origin=got.origin,
            license=tags["license"] or "Unknown", spec_text=spec_text,
            spec_path=spec_path.resolve() if spec_path else None,
            seconds=time.monotonic() - started, warnings=warnings,
        )
    finally:
        with contextlib.suppress(OSError):
            host.remove_tree(work)


def output_dir(host: Host, out_dir: str | os.PathLike[str]) -> tuple[Host, Path]:
    """The directory the user named for a built package, created: a local Host that may
    write there and nowhere else, and its absolute path."""
    out = Path(os.path.abspath(out_dir))
    local = Host("/", host.runner, writable=[out])
    try:
        local.makedirs(str(out))
    except OSError as exc:
        raise HwmgrError(f"cannot create output dir {out}: {exc.strerror}") from None
    return local, out


def _publish(local: Host, src: Path, dest: Path) -> None:
    """Copy atomically: a reader never sees a half-written RPM under the final name."""
    try:
        local.copy_in(src, str(dest), mode=0o644)
    except OSError as exc:
        raise HwmgrError(f"cannot write {dest}: {exc.strerror}") from None
