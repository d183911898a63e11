"""DKMS driving for driver upgrades: place a source tree, add/build/install/remove, and check.

DKMS 3.0 (Debian 12) can exit 0 without doing the work: `build` says "already built ... skip"
and reuses a stale build, and `install` skips a module whose version is not newer than the one
in the kernel tree yet still reports success. So every step is checked afterwards: the .ko must
exist where DKMS keeps it, and `modinfo` must report the expected version and kernel.
DKMS reads a kernel's headers from /lib/modules/KVER/build whatever its trees are, so a
scratch set of trees (`Dkms(scratch=...)`, for `hwmgr recipe check`) builds for real kernels
without touching /usr/src, /var/lib/dkms or /lib/modules.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from hwmgr.config import DEFAULT_BUILD_TIMEOUT
from hwmgr.errors import BadInputError, HwmgrError, NotFoundError, RefusedError
from hwmgr.host.hashing import sha256_file
from hwmgr.host.runner import RC_TIMEOUT, Result
from hwmgr.host.seam import Host
from hwmgr.lifecycle import INSTALL_TREE
from hwmgr.lifecycle.builds.buildlog import BuildFailed, log_facts, make_command
from hwmgr.lifecycle.builds.headers import headers_package, os_ids
from hwmgr.lifecycle.builds.recipe import Recipe, check_kernel, check_name, check_version
from hwmgr.numtext import to_int

SOURCE_TREE = "/usr/src"
DKMS_TREE = "/var/lib/dkms"
INSTALL_TIMEOUT = 600.0
QUICK_TIMEOUT = 120.0
KO_SUFFIXES = (".ko", ".ko.xz", ".ko.gz", ".ko.zst")
# DEST_MODULE_LOCATION as DKMS 3.0 overrides it per distribution
# (override_dest_module_location in /usr/sbin/dkms)
_DISTRO_DEST = {
    "debian": "/updates/dkms",
    "ubuntu": "/updates/dkms",
    "arch": "/updates/dkms",
    "fedora": "/extra",
    "rhel": "/extra",
    "ovm": "/extra",
    "sles": "/updates",
    "suse": "/updates",
    "opensuse": "/updates",
}
_STATUS_RE = re.compile(
    r"^(?P<name>[^/,:\s]+)[/,]\s*(?P<version>[^,:\s]+)"
    r"(?:,\s*(?P<kernel>[^,:\s]+),\s*(?P<arch>[^,:\s]+))?"
    r":\s*(?P<state>[A-Za-z-]+)\s*(?P<note>.*)$"
)
_PLACEHOLDER_RE = re.compile(r"@[A-Z_]+@")
_DEST_LOCATION = re.compile(r'\s*DEST_MODULE_LOCATION\[\d+\]="?(/[A-Za-z0-9_./+-]+?)"?\s*$')


@dataclass(frozen=True)
class DkmsEntry:
    """One line of `dkms status`: a module version and its state on one kernel (if any)."""

    name: str
    version: str
    kernel: str | None
    arch: str | None
    state: str
    note: str = ""


def render_dkms_conf(recipe: Recipe, version: str) -> str:
    """Fill `drivers/<driver>/dkms.conf.in` from the recipe for one driver version."""
    version = check_version(version)
    template = recipe.dkms_template
    try:
        text = template.read_text(encoding="utf-8")
    except OSError as exc:
        raise NotFoundError(f"{template}: cannot read DKMS template ({exc.strerror})") from None
    lines = []
    for i, m in enumerate(recipe.modules):
        lines.append(f'BUILT_MODULE_NAME[{i}]="{m.name}"')
        if m.built_location:
            lines.append(f'BUILT_MODULE_LOCATION[{i}]="{m.built_location}/"')
        if m.dest_name:
            lines.append(f'DEST_MODULE_NAME[{i}]="{m.dest_name}"')
        lines.append(f'DEST_MODULE_LOCATION[{i}]="{m.dest_location}"')
    values = {
        "@PACKAGE_NAME@": recipe.driver,
        "@PACKAGE_VERSION@": version,
        "@MAKE@": recipe.make,
        "@CLEAN@": recipe.clean,
        "@MODULES@": "\n".join(lines),
    }
    out = _PLACEHOLDER_RE.sub(lambda mo: values.get(mo.group(0), mo.group(0)), text)
    left = sorted(set(_PLACEHOLDER_RE.findall(out)) - set(values.values()))
    if left:
        raise BadInputError(f"{template}: unknown placeholder(s) {', '.join(left)}")
    for needed in ("@PACKAGE_NAME@", "@PACKAGE_VERSION@", "@MAKE@"):
        if needed not in text:
            raise BadInputError(f"{template}: missing placeholder {needed}")
    return out if out.endswith("\n") else out + "\n"


def parse_status(text: str) -> list[DkmsEntry]:
    """Parse `dkms status` output: 3.0 `n/v, kver, arch: state` and 2.x `n, v, kver, arch: state`.

    Lines that are not status lines (warnings) are skipped. Lines end at newlines only: a
    \r in a vendor's version string cannot start a forged status line.
    """
    entries = []
    for line in text.split("\n"):
        mo = _STATUS_RE.match(line.strip())
        if mo is None:
            continue
        entries.append(
            DkmsEntry(
                mo.group("name"),
                mo.group("version"),
                mo.group("kernel"),
                mo.group("arch"),
                mo.group("state"),
                mo.group("note").strip(),
            )
        )
    return entries


def _tail(res: Result, pattern: str = r"(?i)error|warning|not newer|matches|skip") -> str:
    """The most telling line of a DKMS run, for one-line error messages."""
    lines = [ln.strip() for ln in (res.stdout + "\n" + res.stderr).splitlines() if ln.strip()]
    hits = [ln for ln in lines if re.search(pattern, ln)]
    return (hits or lines or [f"exit {res.rc}"])[-1]


class Dkms:
    """DKMS on one host: every call goes through `host.run`, every result is checked.

    `mok_key`/`mok_cert` (real paths) make DKMS sign with, or generate, a key there instead
    of /var/lib/dkms/mok.key|pub (tests use a temp dir; production leaves them None).
    `scratch` (a host dir) holds private source, DKMS and install trees and, unless a key is
    given, the signing key: nothing outside it changes.
    """

    def __init__(
        self,
        host: Host,
        *,
        mok_key: str | os.PathLike[str] | None = None,
        mok_cert: str | os.PathLike[str] | None = None,
        scratch: str | None = None,
        build_timeout: float = DEFAULT_BUILD_TIMEOUT,
    ) -> None:
        self.host = host
        self.build_timeout = build_timeout
        self.scratch = scratch.rstrip("/") if scratch else None
        top = self.scratch or ""
        self.source_tree, self.dkms_tree = top + SOURCE_TREE, top + DKMS_TREE
        self.install_tree = top + INSTALL_TREE
        if self.scratch and mok_key is None:
            mok_key = host.writable_path(f"{self.scratch}/mok.key")
            mok_cert = host.writable_path(f"{self.scratch}/mok.pub")
        self.env: dict[str, str] = {}
        if mok_key is not None:
            self.env["mok_signing_key"] = str(mok_key)
        if mok_cert is not None:
            self.env["mok_certificate"] = str(mok_cert)
        self._arch: str | None = None

    # ---------------------------------------------------------------- helpers
    @property
    def arch(self) -> str:
        """The machine architecture DKMS files builds under (`uname -m`)."""
        if self._arch is None:
            res = self.host.run(["uname", "-m"], timeout=QUICK_TIMEOUT)
            arch = res.stdout.strip()
            if not res.ok or not re.fullmatch(r"[A-Za-z0-9_]+", arch):
                raise HwmgrError(f"cannot tell the machine architecture ({res.describe()})")
            self._arch = arch
        return self._arch

    def _tree_args(self) -> list[str]:
        if self.host.live and not self.scratch:
            return []
        self.host.makedirs(self.dkms_tree)  # dkms refuses a missing tree ("No write access")
        return [
            "--sourcetree", str(self.host.writable_path(self.source_tree)),
            "--dkmstree", str(self.host.writable_path(self.dkms_tree)),
            "--installtree", str(self.host.writable_path(self.install_tree)),
        ]

    def _dkms(self, action: str, *args: str, timeout: float = QUICK_TIMEOUT) -> Result:
        res = self.host.run(
            ["dkms", action, *args, *self._tree_args()], timeout=timeout, env=self.env or None
        )
        if not res.available:
            raise HwmgrError("dkms is not installed: install the 'dkms' package")
        return res

    @staticmethod
    def source_dir(name: str, version: str) -> str:
        """Logical path of a module version's source tree (/usr/src/NAME-VERSION)."""
        return f"{SOURCE_TREE}/{check_name(name)}-{check_version(version)}"

    def _source(self, name: str, version: str) -> str:
        """`source_dir` in this instance's source tree (a scratch one, or /usr/src)."""
        return f"{self.source_tree}/{check_name(name)}-{check_version(version)}"

    def base_dir(self, name: str, version: str, kver: str) -> str:
        """Logical path of DKMS's per-kernel build results for a module version."""
        return f"{self.dkms_tree}/{name}/{version}/{kver}/{self.arch}"

    def build_log(self, name: str, version: str) -> str:
        """Logical path of the make.log DKMS leaves behind when a build fails."""
        return f"{self.dkms_tree}/{name}/{version}/build/make.log"

    def modules_of(self, name: str, version: str) -> list[str]:
        """Module names the version's dkms.conf installs (DEST_ or BUILT_MODULE_NAME)."""
        text = self.host.read_text(f"{self._source(name, version)}/dkms.conf") or ""
        found: dict[int, str] = {}
        for key in ("BUILT_MODULE_NAME", "DEST_MODULE_NAME"):
            # line by line: `^\s*` under re.M crossed blank lines, quadratic on many of them
            pattern = re.compile(rf'\s*{key}\[(\d+)\]="?([A-Za-z0-9_-]+)"?')
            for line in text.split("\n"):
                mo = pattern.match(line)
                index = to_int(mo.group(1)) if mo else None
                if mo and index is not None:
                    found[index] = mo.group(2)
        return [found[i] for i in sorted(found)] or [name]

    def _find_ko(self, directory: str, module: str) -> Path | None:
        for suffix in KO_SUFFIXES:
            logical = f"{directory}/{module}{suffix}"
            if self.host.exists(logical):
                return self.host.path(logical)
        return None

    def check_headers(self, kver: str) -> None:
        """Raise NotFoundError naming the headers package when `kver` has no build dir."""
        kver = check_kernel(kver)
        if not self.host.exists(f"{INSTALL_TREE}/{kver}/build/Makefile"):
            raise NotFoundError(
                f"kernel headers for {kver} are not installed (no {INSTALL_TREE}/{kver}/build): "
                f"install {headers_package(self.host, kver)}"
            )

    def verify_ko(self, path: Path, version: str, kver: str) -> None:
        """Check with `modinfo` that a .ko reports `version` and was built for `kver`."""
        got = {}
        for field in ("version", "vermagic"):
            res = self.host.run(["modinfo", "-F", field, str(path)], timeout=QUICK_TIMEOUT)
            if not res.ok:
                raise HwmgrError(f"{path}: modinfo cannot read the module ({res.describe()})")
            got[field] = res.stdout.strip()
        if got["version"] != version:
            raise HwmgrError(
                f"{path}: modinfo version is {got['version'] or 'empty'!r}, expected {version!r}"
            )
        magic_kernel = got["vermagic"].split()[0] if got["vermagic"] else ""
        if magic_kernel != kver:
            raise HwmgrError(
                f"{path}: built for kernel {magic_kernel or 'unknown'!r}, expected {kver!r}"
            )

    # ---------------------------------------------------------------- status
    def status(self, name: str | None = None) -> list[DkmsEntry]:
        """Entries of `dkms status` (for one module name, or all)."""
        args = ["-m", check_name(name)] if name else []
        entries = parse_status(self._dkms("status", *args).stdout)
        return [e for e in entries if not name or e.name == name]

    def is_added(self, name: str, version: str) -> bool:
        """True when DKMS knows this module version (in any state)."""
        return any(e.version == version for e in self.status(name))

    # ---------------------------------------------------------------- actions
    def add(
        self,
        src_tree: str | os.PathLike[str],
        name: str,
        version: str,
        *,
        dkms_conf: str | None = None,
        replace: bool = False,
    ) -> str:
        """Copy `src_tree` to /usr/src/NAME-VERSION (+ dkms.conf) and `dkms add` it.

        Refuses when that source dir or DKMS entry already exists, unless `replace` (then the
        old one is removed from DKMS and deleted first). Returns the logical source dir.
        """
        src = Path(src_tree)
        dest = self._source(name, version)
        real = self.host.path(dest)
        if not src.is_dir():
            raise NotFoundError(f"source tree {src} does not exist")
        if dkms_conf is None and not (src / "dkms.conf").is_file():
            raise BadInputError(f"{src}: has no dkms.conf and none was given")
        exists = real.exists() or real.is_symlink()
        if exists or self.is_added(name, version):
            if not replace:
                raise RefusedError(
                    f"{dest} or DKMS entry {name}/{version} already exists; remove it first"
                )
            self.remove(name, version, "all", delete_source=True)
        tmp = f"{self.source_tree}/.{real.name}.hwmgr-tmp"
        self.host.remove_tree(tmp)
        self.host.copy_tree(src, tmp, symlinks=True)
        if dkms_conf is not None:
            self.host.write_bytes(f"{tmp}/dkms.conf", dkms_conf.encode("utf-8"))
        self.host.replace(tmp, dest)
        res = self._dkms("add", "-m", name, "-v", version)
        if not res.ok:
            with contextlib.suppress(OSError):
                self.host.remove_tree(dest)
            raise HwmgrError(f"dkms add of {name}/{version} failed: {_tail(res)}")
        return dest

    def _kernel_args(self, name: str, version: str, kver: str, *, force: bool = False,
                     depmod: bool = True) -> list[str]:
        """Checked `-m/-v/-k` arguments for a per-kernel action (headers must be there)."""
        check_name(name)
        check_version(version)
        self.check_headers(kver)
        args = ["-m", name, "-v", version, "-k", kver]
        if not depmod:
            args.append("--no-depmod")
        if force:
            args.append("--force")
        return args

    def build(
        self,
        name: str,
        version: str,
        kver: str,
        *,
        modules: Sequence[str] | None = None,
        force: bool = False,
        verify: bool = True,
    ) -> dict[str, Path]:
        """`dkms build` for one kernel (`-k kver`, never the running one by default), then
        check each module's .ko (with `verify`, its modinfo version and kernel too); returns
        module -> .ko. A failed build raises `BuildFailed` naming the make line and the log."""
        args = self._kernel_args(name, version, kver, force=force)
        res = self._dkms("build", *args, timeout=self.build_timeout)
        if res.stopped:  # Ctrl-C: no broken driver, and the undo removes the build's log
            raise HwmgrError(f"dkms build of {name}/{version} for kernel {kver} stopped: hwmgr "
                             "was interrupted")
        if not res.ok:
            if "headers for kernel" in res.stdout + res.stderr:
                raise NotFoundError(
                    f"kernel headers for {kver} cannot be found by dkms: "
                    f"install {headers_package(self.host, kver)}"
                )
            log = self.build_log(name, version)
            facts = log_facts(self.host, log)
            line = make_command(res.stdout + "\n" + res.stderr)
            said = facts.first_error or _tail(res)
            if res.rc == RC_TIMEOUT:  # a slow machine, not a broken driver: say what to raise
                said = (f"stopped after {self.build_timeout:g} s; a slow machine may raise "
                        "build_timeout_seconds in the site config")
            raise BuildFailed(
                f"dkms build of {name}/{version} for kernel {kver} failed (exit {res.rc})"
                + (f" running `{line}`" if line else "") + f": {said}",
                log=log, kernel=kver, make_line=line, facts=facts)
        return {m: self.built_ko(name, version, kver, m, verify=verify)
                for m in modules or self.modules_of(name, version)}

    def built_ko(self, name: str, version: str, kver: str, module: str, *,
                 verify: bool = True) -> Path:
        """The checked .ko DKMS built for `kver` (raises when missing or, with `verify`, when
        modinfo says another version or kernel)."""
        base = self.base_dir(name, version, kver)
        ko = self._find_ko(f"{base}/module", check_name(module))
        if ko is None:
            raise HwmgrError(
                f"dkms reported success but built no {module}.ko for kernel {kver} "
                f"(nothing in {base}/module; see {base}/log/make.log)"
            )
        if verify:
            self.verify_ko(ko, version, kver)
        return ko

    def install(
        self,
        name: str,
        version: str,
        kver: str,
        *,
        modules: Sequence[str] | None = None,
        depmod: bool = True,
        force: bool = False,
    ) -> dict[str, Path]:
        """`dkms install` for one kernel, then check each module landed; returns module -> .ko."""
        args = self._kernel_args(name, version, kver, force=force, depmod=depmod)
        res = self._dkms("install", *args, timeout=INSTALL_TIMEOUT)
        if not res.ok:
            raise HwmgrError(
                f"dkms install of {name}/{version} for kernel {kver} failed: {_tail(res)}"
            )
        out = {}
        for m in modules or self.modules_of(name, version):
            try:
                out[m] = self.installed_ko(name, version, kver, m)
            except HwmgrError as exc:
                raise HwmgrError(f"{exc} (dkms said: {_tail(res)})") from None
        return out

    def uninstall(self, name: str, version: str, kver: str, *, depmod: bool = True) -> None:
        """`dkms uninstall` one kernel: the module file goes, the build stays (re-installable)."""
        check_kernel(kver)
        known = [e for e in self.status(name) if e.version == version and e.kernel == kver]
        if not known or known[0].state != "installed":
            return
        args = ["-m", name, "-v", version, "-k", kver]
        if not depmod:
            args.append("--no-depmod")
        res = self._dkms("uninstall", *args, timeout=INSTALL_TIMEOUT)
        if not res.ok:
            raise HwmgrError(f"dkms uninstall of {name}/{version} ({kver}) failed: {_tail(res)}")

    def dest_locations(self, name: str, version: str) -> list[str]:
        """Where DKMS may install this module version: the distro override, then dkms.conf."""
        locs = [loc for i in os_ids(self.host) if (loc := _DISTRO_DEST.get(i))]
        text = self.host.read_text(f"{self._source(name, version)}/dkms.conf") or ""
        for line in text.split("\n"):  # per line: see modules_of
            mo = _DEST_LOCATION.match(line)
            if mo:
                locs.append(mo.group(1))
        locs += ["/updates/dkms", "/extra", "/updates"]
        return list(dict.fromkeys(loc.rstrip("/") for loc in locs))

    def installed_ko(self, name: str, version: str, kver: str, module: str) -> Path:
        """The installed .ko of a module version for `kver`, identical to what DKMS built."""
        built = self.built_ko(name, version, kver, module)
        want = sha256_file(built)
        looked = []
        for loc in self.dest_locations(name, version):
            directory = f"{self.install_tree}/{kver}{loc}"
            looked.append(directory)
            ko = self._find_ko(directory, module)
            if ko is not None and sha256_file(ko) == want:
                return ko
        raise HwmgrError(
            f"{module}.ko from {name}/{version} is not installed for kernel {kver} "
            f"(looked in {', '.join(looked)})"
        )

    def remove(
        self,
        name: str,
        version: str,
        kver: str = "all",
        *,
        delete_source: bool = False,
        depmod: bool = True,
    ) -> None:
        """`dkms remove` one kernel (or `all`); also delete /usr/src/NAME-VERSION if asked.

        Removing something DKMS does not know is not an error (rollback must be repeatable).
        """
        dest = self._source(name, version)
        known = [e for e in self.status(name) if e.version == version]
        if kver != "all":
            check_kernel(kver)
        if known and (kver == "all" or any(e.kernel == kver for e in known)):
            args = ["-m", name, "-v", version]
            args += ["--all"] if kver == "all" else ["-k", kver]
            if not depmod:
                args.append("--no-depmod")
            res = self._dkms("remove", *args, timeout=INSTALL_TIMEOUT)
            if not res.ok:
                raise HwmgrError(f"dkms remove of {name}/{version} ({kver}) failed: {_tail(res)}")
        if delete_source:
            self.host.remove_tree(dest)
