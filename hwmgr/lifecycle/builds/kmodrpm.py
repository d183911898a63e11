"""The kmod RPM of `hwmgr package --binary rpm`: the modules hwmgr built and signed for one
kernel, in /lib/modules/K/extra/<driver>/, built by the real `rpmbuild -bb` from
specs/kmod-driver.spec.in; %post/%postun call weak-modules (RHEL's kABI tracking) when present,
else depmod for K. Installing it on an RPM host through `hwmgr upgrade --package` is not
built yet (docs/rollout.md, "Build once, ship binaries")."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from hwmgr import __version__
from hwmgr.errors import HwmgrError
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.binpkg import Staged, rpm_version
from hwmgr.lifecycle.builds.package import (
    RPMBUILD_TIMEOUT,
    changelog_date,
    render_spec,
    spec_value,
)

TEMPLATE_NAME = "kmod-driver.spec.in"
REPO_SPECS_DIR = Path(__file__).resolve().parents[3] / "specs"
SYSTEM_SPECS_DIR = Path("/usr/share/hwmgr/specs")
QUICK_TIMEOUT = 60.0


def rpm_release(kernel: str, release: str = "1") -> str:
    """`1.k<K>` with K's `-` as `_` (rpm's Release may hold no `-`): one package per kernel."""
    return f"{release}.k{re.sub(r'[^A-Za-z0-9._+~^]', '_', kernel)}"


def find_template(specs_dir: str | None) -> Path:
    """specs_dir (the config's) first, then the checkout, then /usr/share/hwmgr."""
    for d in ([Path(specs_dir)] if specs_dir else []) + [REPO_SPECS_DIR, SYSTEM_SPECS_DIR]:
        if (d / TEMPLATE_NAME).is_file():
            return d / TEMPLATE_NAME
    raise HwmgrError(f"no RPM spec template {TEMPLATE_NAME}")


def describe(s: Staged) -> str:
    mods = ", ".join(f"{m.name}.ko" for m in s.modules)
    text = (f"The {s.driver} kernel driver version {s.version} ({mods}) built by hwmgr "
            f"{__version__} with DKMS for kernel {s.kernel} only, "
            + ("signed with the site's module-signing key. " if s.signed else "unsigned. ")
            + f"Source: {s.source_name} (sha256 {s.source_sha256}), catalog "
            f"{s.catalog_version}.")
    return textwrap.fill(spec_value(text), width=76, break_on_hyphens=False)


def make_kmod_rpm(host: Host, s: Staged, work: str, out: Path, packager: str,
                  specs_dir: str | None = None) -> Path:
    """Render the spec, `rpmbuild -bb` it under `work`; returns the built RPM (in `work`)."""
    if not host.run(["rpmbuild", "--version"], timeout=QUICK_TIMEOUT).available:
        raise HwmgrError("rpmbuild is not installed: install 'rpm-build' ('rpm' on Debian)")
    top = f"{work}/rpmbuild"
    for sub in ("SOURCES", "SPECS"):
        host.makedirs(f"{top}/{sub}")
    dest = f"/lib/modules/{s.kernel}/extra/{s.driver}"
    sources, install, files, paths = [], [], [], []
    for i, m in enumerate(s.modules):
        host.copy_in(m.path, f"{top}/SOURCES/{m.path.name}", mode=0o644)
        sources.append(f"Source{i}:        {m.path.name}")
        install.append(f"install -m 0644 %{{SOURCE{i}}} %{{buildroot}}{dest}/{m.path.name}")
        files.append(f"{dest}/{m.path.name}")
        paths.append(f"{dest}/{m.path.name}")
    version, release = rpm_version(s.version), rpm_release(s.kernel)
    spec_text = render_spec(find_template(specs_dir).read_text(encoding="utf-8"), {
        "@DRIVER@": s.driver, "@KERNEL@": s.kernel, "@VERSION@": version,
        "@RELEASE@": release, "@LICENSE@": spec_value(s.license),
        "@URL@": spec_value(s.url), "@SOURCES@": "\n".join(sources),
        "@DESCRIPTION@": describe(s), "@INSTALL@": "\n".join(install),
        "@MODULE_PATHS@": " ".join(paths), "@FILES@": "\n".join(files),
        "@DATE@": changelog_date(), "@PACKAGER@": spec_value(packager),
        "@CHANGELOG@": spec_value(f"Built by hwmgr {__version__} from {s.source_name} for "
                                  f"kernel {s.kernel} (catalog version {s.version})"),
    })
    if not s.url:
        spec_text = re.sub(r"(?m)^URL:[ \t]*\n", "", spec_text)
    spec = f"{top}/SPECS/kmod-{s.driver}.spec"
    host.write_bytes(spec, spec_text.encode("utf-8"))
    real_top = host.path(top)
    res = host.run(["rpmbuild", "-bb", "--define", f"_topdir {real_top}",
                    "--define", f"packager {spec_value(packager)}", str(host.path(spec))],
                   timeout=RPMBUILD_TIMEOUT, cwd=str(real_top))
    arch = host.run(["rpm", "--eval", "%{_arch}"], timeout=QUICK_TIMEOUT).stdout.strip()
    built = real_top / "RPMS" / arch / f"kmod-{s.driver}-{version}-{release}.{arch}.rpm"
    if not res.ok or not built.is_file():
        raise HwmgrError(f"rpmbuild of kmod-{s.driver} {version} failed: {res.describe()}")
    return built
