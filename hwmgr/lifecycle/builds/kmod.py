"""Kernel module files per kernel: which .ko `modinfo -k` resolves to, depmod, initramfs.

All through the host seam, so a temporary root (`modinfo -b ROOT`) works like `/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, TypedDict

from hwmgr.errors import HwmgrError, UnknownError
from hwmgr.host.capture import HEADERS, MODINFO, retake
from hwmgr.host.hashing import sha256_file
from hwmgr.host.seam import Host
from hwmgr.transaction.state import BackupRecord

QUICK = 120.0
INITRAMFS_TIMEOUT = 900.0


class _ModuleFields(TypedDict):
    module: str
    kernel: str
    path: Optional[str]
    builtin: bool
    version: Optional[str]
    srcversion: Optional[str]
    vermagic: Optional[str]
    sha256: Optional[str]


class ModuleRecord(_ModuleFields, total=False):
    """`ModuleFile.as_dict()` as plans and the journal keep it; an upgrade's backup step adds
    where it copied the file (`backup`)."""

    backup: Optional[BackupRecord]


# kernel -> module -> its record (a plan's "from", a backup's "saved", a rollback's "restore")
ModuleFiles = dict[str, dict[str, ModuleRecord]]


@dataclass(frozen=True)
class ModuleFile:
    """What one module name resolves to for one kernel (path None: no such module)."""

    module: str
    kernel: str
    path: str | None = None  # logical path on the host
    builtin: bool = False
    version: str | None = None
    srcversion: str | None = None
    vermagic: str | None = None
    sha256: str | None = None

    def as_dict(self) -> ModuleRecord:
        return {"module": self.module, "kernel": self.kernel, "path": self.path,
                "builtin": self.builtin, "version": self.version,
                "srcversion": self.srcversion, "vermagic": self.vermagic,
                "sha256": self.sha256}

    def describe(self) -> str:
        if self.builtin:
            return f"{self.module} built into {self.kernel}"
        if not self.path:
            return f"no {self.module} module for {self.kernel}"
        return f"{self.path} ({self.version or 'no version'})"


def base_args(host: Host) -> list[str]:
    """`-b ROOT` for a scratch root; none for `/` or a snapshot (whose outputs are replayed)."""
    return [] if host.live or host.meta else ["-b", str(host.root)]


def modinfo_fields(text: str) -> dict[str, str]:
    """filename, version, srcversion and vermagic from modinfo's output, the first of each.
    Lines end at newlines only: a vendor's version string holding a \r cannot start a
    `srcversion:` line of its own (splitlines would let it forge one)."""
    fields: dict[str, str] = {}
    for line in text.split("\n"):
        key, sep, value = line.partition(":")
        if sep and key in ("filename", "version", "srcversion", "vermagic") and key not in fields:
            fields[key] = value.strip()
    return fields


def resolve(host: Host, module: str, kver: str) -> ModuleFile:
    """Ask modinfo which file `module` is for kernel `kver` (what modprobe would load)."""
    res = host.run(["modinfo", *base_args(host), "-k", kver, module], timeout=QUICK)
    if res.unrecorded:  # a snapshot without it: say so, never blame the snapshot host's kmod
        # the shell collector runs modinfo for the running kernel only (it lists no other
        # kernel's headers), so another kernel's output is something it never records
        record = MODINFO if kver == host.meta.get("kernel") else HEADERS
        raise UnknownError(retake(f"output of `modinfo -k {kver} {module}`", host, record))
    if not res.available:
        raise HwmgrError("modinfo is not available on this machine: install the 'kmod' package")
    if not res.ok:
        return ModuleFile(module, kver)
    fields = modinfo_fields(res.stdout)
    filename = fields.get("filename", "")
    if filename == "(builtin)":
        return ModuleFile(module, kver, builtin=True, version=fields.get("version"))
    logical = filename
    if not host.live and filename.startswith(str(host.root)):
        logical = "/" + filename[len(str(host.root)) :].lstrip("/")
    real = host.path(logical)
    return ModuleFile(
        module,
        kver,
        path=logical or None,
        version=fields.get("version") or None,
        srcversion=fields.get("srcversion") or None,
        vermagic=fields.get("vermagic") or None,
        sha256=sha256_file(real) if real.is_file() else None,
    )


def depmod(host: Host, kver: str) -> None:
    """Rebuild modules.dep for one kernel."""
    res = host.run(["depmod", *base_args(host), "-a", kver], timeout=QUICK)
    if not res.ok:
        raise HwmgrError(f"depmod for {kver} failed: {res.describe()}")


def initramfs_image(host: Host, kver: str) -> tuple[str, str] | None:
    """(image path, tool family) of the kernel's initramfs, or None when there is none."""
    for path, family in ((f"/boot/initrd.img-{kver}", "debian"),
                         (f"/boot/initramfs-{kver}.img", "dracut")):
        if host.exists(path):
            return path, family
    return None


def initramfs_files(host: Host, kver: str) -> list[str] | None:
    """The paths inside the kernel's initramfs (lsinitramfs / lsinitrd); None when unknown,
    [] when the kernel has no initramfs."""
    image = initramfs_image(host, kver)
    if image is None:
        return []
    path, family = image
    image_arg = path if host.meta else str(host.path(path))  # a snapshot replays by logical path
    argv = ["lsinitramfs", image_arg] if family == "debian" else [
        "lsinitrd", "-k", kver]
    res = host.run(argv, timeout=QUICK)
    if not res.ok:
        return None
    files = []
    for line in res.stdout.splitlines():
        fields = line.split(" -> ", 1)[0].split()  # lsinitrd prints `ls -l` lines
        if fields:
            files.append(fields[-1])
    return files


def _in_image(path: str) -> str:
    """A module path as an initramfs lists it: relative, without merged-/usr's `usr/`."""
    rel = path.lstrip("/")
    return rel[len("usr/"):] if rel.startswith("usr/lib/") else rel


def image_holds(listing: list[str], module_path: str) -> bool:
    """True when an initramfs listing holds the module file `module_path` (/lib/modules/...)."""
    want = _in_image(module_path)
    return any(_in_image(f) == want for f in listing)


def in_initramfs(host: Host, modules: list[str], kver: str) -> bool | None:
    """True when any of `modules` is inside the kernel's initramfs; None when unknown."""
    listing = initramfs_files(host, kver)
    if listing is None:
        return None
    names = {f"{m}.ko" for m in modules}
    for line in listing:
        leaf = line.rsplit("/", 1)[-1]
        for suffix in ("", ".xz", ".gz", ".zst"):
            if leaf.endswith(suffix) and leaf[: len(leaf) - len(suffix)] in names:
                return True
    return False


def rebuild_initramfs(host: Host, kver: str) -> str:
    """Regenerate the initramfs with the distribution's tool; returns the tool used."""
    image = initramfs_image(host, kver)
    if image is None:
        return "none"
    _, family = image
    argv = (["update-initramfs", "-u", "-k", kver] if family == "debian"
            else ["dracut", "-f", "--kver", kver])
    res = host.run(argv, timeout=INITRAMFS_TIMEOUT)
    if not res.ok:
        raise HwmgrError(f"initramfs rebuild for {kver} failed: {res.describe()}")
    return argv[0]


def loaded_version(host: Host, module: str) -> tuple[bool, str | None, str | None]:
    """(loaded, version, srcversion) of a module in the running kernel, from /sys/module."""
    base = f"/sys/module/{module.replace('-', '_')}"
    if not host.is_dir(base):
        return False, None, None
    return True, host.read_attr(f"{base}/version"), host.read_attr(f"{base}/srcversion")
