"""The journaled steps of an upgrade from a site-built binary package (`hwmgr upgrade DRIVER
--to V --package FILE`): verify-package → inspect → backup → install (dpkg -i, commit) →
initramfs → arm. The backup, initramfs and arm steps are the DKMS upgrade's own; a rollback
removes the package (`dpkg -r`) and restores the backed-up files (steps.rollback_steps).

The package was checked when planned (pkgcheck); here it is copied into the state dir first and
the copy is checked again, so a file changed between plan and install is never installed.
"""

from __future__ import annotations

from typing import Callable, TypedDict

from hwmgr.errors import HwmgrError, RefusedError
from hwmgr.host.hashing import sha256_file
from hwmgr.host.seam import Host
from hwmgr.lifecycle import params as journaled
from hwmgr.lifecycle.builds import kmod
from hwmgr.lifecycle.builds.dkms import Dkms
from hwmgr.lifecycle.builds.kmod import ModuleFiles
from hwmgr.lifecycle.builds.pkgcheck import PackageRecord, inspect_deb
from hwmgr.lifecycle.params import PackageRef, UpgradeParams
from hwmgr.transaction.engine import Ctx, Step

DPKG_TIMEOUT = 600.0
DPKG_ENV = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def kept_path(state_path: str, sha256: str) -> str:
    """Where the state dir keeps a package it installed (a rollback's undo reinstalls it)."""
    return f"{state_path}/packages/{sha256}.deb"


class PackagedFile(TypedDict):
    path: str  # where the package installs it
    sha256: str


class InstallData(TypedDict):
    after: ModuleFiles
    uninstalled: dict[str, list[str]]  # none: a package displaces no DKMS version


def _params(ctx: Ctx) -> UpgradeParams:
    return journaled.upgrade(ctx.params)


def _pkg(ctx: Ctx) -> PackageRecord:
    return _params(ctx).get("package") or {}


def _inspected(ctx: Ctx) -> dict[str, PackagedFile]:
    """The module files the inspect step found in the package (module -> file)."""
    found: dict[str, PackagedFile] = ctx.output("inspect").get("modules", {})
    return found


def _work(ctx: Ctx) -> str:
    return f"{ctx.state.path}/work/{ctx.txn_id}"


def dpkg_installed(host: Host, name: str) -> bool:
    """True when dpkg records `name` as installed (any version)."""
    res = host.run(["dpkg-query", "-W", "-f", "${db:Status-Status}", name],
                   timeout=60.0, env=DPKG_ENV)
    return res.ok and res.stdout.strip() == "installed"


def dpkg_install(host: Host, deb: str, name: str) -> None:
    res = host.run(["dpkg", "-i", str(host.path(deb))], timeout=DPKG_TIMEOUT, env=DPKG_ENV)
    if not res.available:
        raise HwmgrError("dpkg is not installed on this host: it cannot install a .deb")
    if not res.ok:
        raise HwmgrError(f"dpkg -i {name} failed: {res.describe()}")


def dpkg_known(host: Host, name: str) -> bool:
    """True when dpkg has any record of `name` (installed, or its config files left)."""
    res = host.run(["dpkg-query", "-W", "-f", "${db:Status-Status}", name],
                   timeout=60.0, env=DPKG_ENV)
    return res.ok and res.stdout.strip() not in ("", "not-installed")


def dpkg_remove(host: Host, name: str) -> None:
    """`dpkg --purge NAME` (remove, and forget it: the package has no conffiles, and `-r`
    alone would leave a config-files record) when dpkg knows it; repeatable."""
    if not dpkg_known(host, name):
        return
    res = host.run(["dpkg", "--purge", name], timeout=DPKG_TIMEOUT, env=DPKG_ENV)
    if not res.ok:
        raise HwmgrError(f"dpkg --purge {name} failed: {res.describe()}")


# ============================================================================ the steps
def _verify_do(ctx: Ctx) -> dict[str, str]:
    pkg = _pkg(ctx)
    dest = kept_path(ctx.state.path, pkg["sha256"])
    if "created" not in ctx.data:
        ctx.save(created=not ctx.host.exists(dest))
    ctx.host.copy_in(pkg["path"], dest, mode=0o600)
    got = sha256_file(ctx.host.path(dest))
    if got != pkg["sha256"]:
        ctx.host.remove(dest)
        raise RefusedError(f"package {pkg['path']}: sha256 is {got} now, not the {pkg['sha256']} "
                           "the catalog records and the plan checked")
    return {"kept": dest}


def _verify_check(ctx: Ctx) -> bool:
    kept = ctx.data.get("kept")
    if not isinstance(kept, str):
        return False
    real = ctx.host.path(kept)
    return real.is_file() and sha256_file(real) == _pkg(ctx)["sha256"]


def _verify_undo(ctx: Ctx) -> None:
    if ctx.data.get("created"):
        ctx.host.remove(kept_path(ctx.state.path, _pkg(ctx)["sha256"]))


def _inspect_do(ctx: Ctx) -> dict[str, dict[str, PackagedFile]]:
    pkg, p = _pkg(ctx), _params(ctx)
    kept = str(ctx.host.path(ctx.output("verify-package")["kept"]))
    name, files = inspect_deb(ctx.host, kept, p["driver"], p["version"], pkg["kernel"],
                              p["modules"])
    if name != pkg["name"] or files != pkg["modules"]:
        raise RefusedError(f"package {pkg['path']}: contents differ from the planned ones")
    x = f"{_work(ctx)}/x"
    ctx.host.remove_tree(x)
    ctx.host.makedirs(x)
    res = ctx.host.run(["dpkg-deb", "-x", kept, str(ctx.host.path(x))], timeout=DPKG_TIMEOUT)
    if not res.ok:
        raise RefusedError(f"package {pkg['path']}: dpkg-deb -x failed ({res.describe()})")
    out: dict[str, PackagedFile] = {}
    for m, path in files.items():
        ko = ctx.host.path(f"{x}{path}")
        Dkms(ctx.host).verify_ko(ko, p["version"], pkg["kernel"])  # modinfo: V and K
        out[m] = {"path": path, "sha256": sha256_file(ko)}
    ctx.host.remove_tree(x)
    return {"modules": out}


def _inspect_undo(ctx: Ctx) -> None:
    ctx.host.remove_tree(_work(ctx))


def _shadows(path: str, kernel: str, ours: str) -> bool:
    """A module file outside the kernel's own tree that depmod could prefer over ours."""
    return path != ours and not path.startswith(f"/lib/modules/{kernel}/kernel/")


def _install_do(ctx: Ctx) -> InstallData:
    pkg, p = _pkg(ctx), _params(ctx)
    kernel, want = pkg["kernel"], _inspected(ctx)
    saved: ModuleFiles = ctx.output("backup").get("saved", {})
    if "displaced" not in ctx.data:
        # an earlier DKMS or vendor module under updates/ or extra/ would compete with ours:
        # its bytes are in the backup, a rollback puts it back
        ctx.save(displaced=[path for m, rec in saved.get(kernel, {}).items()
                            if (path := rec.get("path")) and not rec.get("builtin")
                            and _shadows(path, kernel, want[m]["path"])])
    for path in ctx.data["displaced"]:
        ctx.host.remove(path)
    dpkg_install(ctx.host, ctx.output("verify-package")["kept"], pkg["name"])
    kmod.depmod(ctx.host, kernel)
    after: ModuleFiles = {kernel: {}}
    for m in p["modules"]:
        got = kmod.resolve(ctx.host, m, kernel)
        if (got.path, got.sha256, got.version) != (want[m]["path"], want[m]["sha256"],
                                                    p["version"]):
            raise HwmgrError(f"after dpkg -i {pkg['name']}, {m} for {kernel} resolves to "
                             f"{got.describe()}, not {want[m]['path']} {p['version']}")
        after[kernel][m] = got.as_dict()
    return {"after": after, "uninstalled": {}}


def _install_check(ctx: Ctx) -> bool:
    want = _inspected(ctx)
    kernel = _pkg(ctx)["kernel"]
    return bool(want) and dpkg_installed(ctx.host, _pkg(ctx)["name"]) and all(
        (r.path, r.sha256) == (want[m]["path"], want[m]["sha256"])
        for m in _params(ctx)["modules"] for r in [kmod.resolve(ctx.host, m, kernel)])


def _install_undo_with(
        restore: Callable[[Ctx, ModuleFiles], None]) -> Callable[[Ctx], None]:
    def undo(ctx: Ctx) -> None:
        dpkg_remove(ctx.host, _pkg(ctx)["name"])
        restore(ctx, ctx.output("backup").get("saved", {}))

    return undo


def remove_packages(ctx: Ctx, packages: list[PackageRef]) -> None:
    """A rollback's first act: `dpkg -r` the packages of the upgrades it undoes."""
    for rec in packages:
        dpkg_remove(ctx.host, rec["name"])


def reinstall_packages(ctx: Ctx, packages: list[PackageRef]) -> None:
    """A failed rollback's undo: install the removed packages again from the state dir."""
    for rec in packages:
        kept = kept_path(ctx.state.path, rec["sha256"])
        if not dpkg_installed(ctx.host, rec["name"]) and ctx.host.exists(kept):
            dpkg_install(ctx.host, kept, rec["name"])


def package_steps(params: UpgradeParams, pkg: PackageRecord, *, backup: Step, image: Step,
                  arm: Step, restore: Callable[[Ctx, ModuleFiles], None]) -> list[Step]:
    """verify-package → inspect → backup → install (commit) → initramfs → arm, for the
    package `pkg` (params["package"]); the backup, initramfs and arm steps and the file
    restore are the DKMS upgrade's (steps.py passes them: it imports this module)."""
    return [
        Step("verify-package", _verify_do, _verify_undo, _verify_check,
             description=f"copy {pkg['path']} into the state dir, check its sha256 against "
                         "the catalog's again"),
        Step("inspect", _inspect_do, _inspect_undo, lambda c: "modules" in c.data,
             description=f"dpkg-deb -c/-f/-x: only {', '.join(params['modules'])} module "
                         f"files for {pkg.get('kernel', 'its kernel')}, modinfo version "
                         f"{params['version']}"),
        backup,
        Step("install", _install_do, _install_undo_with(restore), _install_check,
             commit_point=True,
             description=f"dpkg -i {pkg.get('name', 'the package')} + depmod"),
        image,
        arm,
    ]
