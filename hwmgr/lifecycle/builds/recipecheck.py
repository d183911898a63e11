"""`hwmgr recipe check`: build a vendor source (SRPM or tarball) with a driver's recipe in
scratch DKMS trees.

A recipe is proven before anything is installed: the source is unpacked exactly as an upgrade
does it, then `dkms add` / `dkms build -k KVER` run with private source, DKMS and install
trees in a scratch dir under the state dir (DKMS still reads the real kernel headers), and
each built module is read back with `modinfo`. /usr/src, /var/lib/dkms and /lib/modules are
never written; the scratch dir is removed afterwards, and a failed build's make.log is kept
under the state dir's logs/ (docs/recipes.md).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from hwmgr.config import DEFAULT_BUILD_TIMEOUT
from hwmgr.errors import HwmgrError, NotFoundError, NotPermittedError
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.advice import RECIPE_DOC
from hwmgr.lifecycle.builds.buildlog import BuildFailed, keep_log
from hwmgr.lifecycle.builds.dkms import Dkms, render_dkms_conf
from hwmgr.lifecycle.builds.headers import headers_package, kernels_with_headers
from hwmgr.lifecycle.builds.recipe import RECIPE_FILE, Recipe, check_kernel, check_version
from hwmgr.lifecycle.builds.tarball import source_version, unpack_source
from hwmgr.transaction.state import StateDir

QUICK_TIMEOUT = 60.0
MODINFO_FIELDS = ("version", "vermagic", "srcversion")


@dataclass
class KernelResult:
    """One kernel's build: the modules built, or why it failed."""

    kernel: str
    ok: bool = False
    modules: list[dict[str, str]] = field(default_factory=list)  # name, file, modinfo fields
    problems: list[str] = field(default_factory=list)
    failure: dict[str, object] | None = None  # BuildFailed.as_dict() plus the kept log
    seconds: float = 0.0


@dataclass
class CheckReport:
    """What `recipe check` found, per kernel."""

    driver: str
    version: str
    srpm: str
    recipe: str
    kernels: list[KernelResult]

    @property
    def ok(self) -> bool:
        return bool(self.kernels) and all(k.ok for k in self.kernels)

    def as_dict(self) -> dict[str, object]:
        return {"driver": self.driver, "version": self.version, "srpm": self.srpm,
                "recipe": self.recipe, "ok": self.ok,
                "kernels": [vars(k) for k in self.kernels]}


def target_kernels(host: Host, requested: list[str] | None) -> list[str]:
    """`--kernel` values, else every kernel with headers (never `uname -r` by itself)."""
    if requested:
        return [check_kernel(k) for k in dict.fromkeys(requested)]
    found = kernels_with_headers(host)
    if not found:
        running = host.read_attr("/proc/sys/kernel/osrelease") or "KVER"
        raise NotFoundError(
            f"no kernel has headers under /lib/modules/*/build: install "
            f"{headers_package(host, running)} (or pass --kernel for another installed one)")
    return found


def _modinfo(host: Host, ko: Path) -> dict[str, str]:
    out = {}
    for name in MODINFO_FIELDS:
        res = host.run(["modinfo", "-F", name, str(ko)], timeout=QUICK_TIMEOUT)
        out[name] = res.stdout.strip() if res.ok else ""
    return out


def _build_one(host: Host, dkms: Dkms, recipe: Recipe, version: str, kver: str,
               logs_dir: str) -> KernelResult:
    """Build for one kernel and read each module back; a failure keeps its make.log."""
    kr = KernelResult(kver)
    if not recipe.supports_kernel(kver):
        kr.problems.append(f"the {recipe.driver} recipe excludes kernel {kver} "
                           f"(kernels.include {list(recipe.kernels_include)}, "
                           f"exclude {list(recipe.kernels_exclude)})")
        return kr
    t0 = time.monotonic()
    try:
        kos = dkms.build(recipe.driver, version, kver, verify=False)
    except BuildFailed as exc:
        kept = keep_log(host, exc, f"{logs_dir}/recipe-check-{recipe.driver}-{version}-"
                                   f"{kver}.make.log")
        failed = exc.kept_at(kept) if kept else exc
        kr.failure = {**exc.as_dict(), "error": str(failed), "log": kept}
        kr.problems.append(str(failed))
        return kr
    except HwmgrError as exc:
        kr.problems.append(str(exc))
        return kr
    finally:
        kr.seconds = round(time.monotonic() - t0, 1)
    for module, ko in kos.items():
        info = _modinfo(host, ko)
        magic_kernel = (info["vermagic"].split() or [""])[0]
        kr.modules.append({"name": module, "file": ko.name, **info})
        if info["version"] != version:
            kr.problems.append(f"{module}.ko reports version {info['version'] or 'none'!r}, "
                               f"not {version!r}: an upgrade would refuse it")
        if magic_kernel != kver:
            kr.problems.append(f"{module}.ko was built for kernel {magic_kernel or '?'!r}, "
                               f"not {kver!r}: the recipe ignores the target kernel "
                               f"(pass BUILD_KERNEL/KSRC=${{kernel_source_dir}}; {RECIPE_DOC})")
    kr.ok = not kr.problems
    return kr


def check_recipe(host: Host, recipe: Recipe, srpm: str | os.PathLike[str], *,
                 state_dir: str, kernels: list[str] | None = None,
                 version: str | None = None,
                 build_timeout: float = DEFAULT_BUILD_TIMEOUT) -> CheckReport:
    """Build `srpm` with `recipe` for each target kernel in a scratch DKMS tree and report."""
    srpm = Path(srpm)
    if version is not None:
        check_version(version, "--version")
    for kver in kernels or []:
        check_kernel(kver)
    named = source_version(host, recipe, srpm)  # an SRPM's Version, a tarball's name
    version = check_version(version or named)
    targets = target_kernels(host, kernels)
    dkms = Dkms(host)
    for kver in targets:  # all missing headers named before anything is built
        dkms.check_headers(kver)
    state = StateDir(host, state_dir)  # on this machine, the state dir becomes writable
    try:
        work = host.make_temp_dir(f"{state.path}/work", f"recipe-check-{recipe.driver}-")
    except PermissionError as exc:
        raise NotPermittedError(f"{state.path}/work: cannot make the scratch DKMS trees "
                                f"({exc.strerror}): run as root, or pass --state-dir DIR "
                                "you can write") from None
    try:
        tree = unpack_source(host, srpm, f"{work}/unpack", recipe, version)
        dkms = Dkms(host, scratch=f"{work}/dkms", build_timeout=build_timeout)
        dkms.add(tree, recipe.driver, version, dkms_conf=render_dkms_conf(recipe, version))
        results = [_build_one(host, dkms, recipe, version, kver, f"{state.path}/logs")
                   for kver in targets]
    finally:
        host.remove_tree(work)
    return CheckReport(recipe.driver, version, str(srpm),
                       str(recipe.directory / RECIPE_FILE), results)
