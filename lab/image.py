"""Build and cache the lab guest: kernel, busybox initramfs, debootstrap rootfs packed as ext4.

The rootfs also has Debian's initramfs-tools and its own `/boot/initrd.img-KVER`, made by
`update-initramfs` in the chroot (MODULES=list: virtio + ext4 for the root disk and the SAS
2108's megaraid_sas, as an admin lists a boot controller); the storage scenario boots with
that image instead of the busybox one, read off the guest's disk (lab/vm.py).

A second kernel, another 6.1 ABI the guest does not run (`second_kernel()`: the newest one
below the main kernel with an image and headers on the mirror), is installed with its headers,
its pruned module tree and its own initramfs, and `grub2-common` gives the guest a real
`/etc/default/grub` and `/boot/grub/grubenv`: the kernel gate's scenario (tests/lab/
test_kernel_gate.py) boots it the way lab/grub.py says GRUB would.

Everything lands in `$HWMGR_LAB_CACHE` (default /var/cache/hwmgr-lab), outside the repo. The
image is keyed on the kernel release, the package lists and the PID-1 stub, so a change to any
of them rebuilds it; otherwise `ensure_image()` returns at once. No loop mounts: the rootfs is
packed with `mkfs.ext4 -d`, and the chroot's /proc and /dev live in a private mount namespace.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Sequence

CACHE_ENV = "HWMGR_LAB_CACHE"
DEFAULT_CACHE = "/var/cache/hwmgr-lab"
BUILDER_VERSION = 7
GUEST_DIR = Path(__file__).resolve().parent / "guest"
DISK_SIZE = "4G"
# debootstrap --include (minbase) and then apt-get install in the chroot
DEBOOTSTRAP_PACKAGES = (
    "python3", "kmod", "ethtool", "pciutils", "iperf3", "iproute2", "procps", "e2fsprogs",
)
CHROOT_PACKAGES = (
    "dkms", "rpm", "gcc", "make", "python3-requests", "python3-jsonschema", "python3-rich",
    "systemd", "udev", "initramfs-tools", "grub2-common", "ifupdown",
)
# Debian ifupdown owns eth1 (the netdevsim net.sh creates each boot), so settings persist
# through two backends: hwmgr picks ifupdown `post-up` lines for eth1 (it has a stanza) and a
# systemd .link file for eth0 (no stanza: net.sh configures it, ifupdown leaves it alone).
# `allow-hotplug`: ifupdown's udev rule starts ifup@eth1.service when the device appears.
IFUPDOWN_STANZAS = {"eth1": "allow-hotplug eth1\niface eth1 inet manual\n"}
INITRD_MODULES = ("virtio_pci", "virtio_blk", "ext4")
INITRD_APPLETS = ("sh", "mount", "umount", "insmod", "switch_root", "mkdir", "cat", "sleep",
                  "echo", "ls", "poweroff", "grep")
E1000E_SUBDIR = "drivers/net/ethernet/intel/e1000e"
MEGARAID_SUBDIR = "drivers/scsi/megaraid"  # megaraid_sas*: the lab's "vendor" RAID driver
# initramfs-tools in the guest: only the listed modules (MODULES=list), so an image holds
# what the root disk and the RAID controller need and a rebuild under TCG takes seconds
DISTRO_INITRD_MODULES = ("virtio_pci", "virtio_blk", "ext4", "megaraid_sas")
DISTRO_INITRD_CONF = "MODULES=list\nCOMPRESS=gzip\nRESUME=none\n"
# Debian does not build netdevsim (CONFIG_NETDEVSIM is not set); the lab builds it from the
# same linux-source against the matching headers, so the guest has a NIC whose rings, pause
# and channels can all be set (e1000e has no channels) and that has no PCI device at all.
NETDEVSIM_SUBDIR = "drivers/net/netdevsim"
# Module trees for hardware the guest cannot have (QEMU emulates no sound, USB, GPU, radio,
# other vendors' NICs...). Dropping them takes /lib/modules from ~4,000 modules to ~1,200,
# which makes every depmod (dkms install/remove and hwmgr's own) about 3x cheaper under TCG.
PRUNED_MODULES = (
    "sound", "drivers/media", "drivers/iio", "drivers/hid", "drivers/hwmon", "drivers/comedi",
    "drivers/usb", "drivers/mtd", "drivers/gpu", "drivers/infiniband", "drivers/bluetooth",
    "drivers/net/wireless", "drivers/net/can", "drivers/net/usb", "drivers/isdn",
    "drivers/staging", "drivers/platform", "drivers/video", "drivers/watchdog", "drivers/w1",
    "drivers/mmc", "drivers/leds", "drivers/atm", "drivers/accessibility", "drivers/input",
    "drivers/misc", "drivers/i2c", "drivers/mfd", "net/bluetooth", "net/mac80211",
    "net/wireless", "net/6lowpan", "net/netfilter", "net/ipv4/netfilter", "net/ipv6/netfilter",
    "net/bridge",
)
# /etc/default/grub as Debian's grub-pc postinst writes it, for when grub2-common does not
# ship the template (/usr/share/grub/default/grub)
GRUB_DEFAULTS = ("GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\n"
                 "GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n"
                 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n')
KEPT_ETHERNET = "intel"  # of drivers/net/ethernet/*, only Intel's (e1000e) stays


class LabError(RuntimeError):
    """The lab could not be built or run (one line, says which step)."""


@dataclass
class Image:
    """A ready guest in the cache: boot files, the golden disk and the e1000e sources."""

    cache: Path
    kver: str
    kernel_version: str
    vmlinuz: Path
    initrd: Path
    disk: Path
    e1000e_src: Path
    key: str
    megaraid_src: Path
    kver2: str = ""  # the second kernel: installed in the image, not the one the lab boots


def log(msg: str) -> None:
    """One transcript line on stderr (pytest -s / make lab show it)."""
    sys.stderr.write(f"[lab {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def run(argv: Sequence[str], *, cwd: Path | None = None, timeout: float = 1800,
        env: dict[str, str] | None = None, what: str | None = None) -> str:
    """Run a host command; LabError with the output's tail when it fails. Returns stdout."""
    full = dict(os.environ, LC_ALL="C", DEBIAN_FRONTEND="noninteractive")
    full.update(env or {})
    try:
        res = subprocess.run(list(argv), cwd=cwd, env=full, capture_output=True, text=True,
                             timeout=timeout, check=False)
    except FileNotFoundError:
        raise LabError(f"{argv[0]} is not installed (needed for: {what or argv[0]})") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{what or argv[0]} timed out after {timeout:.0f} s") from None
    if res.returncode != 0:
        tail = " | ".join((res.stdout + res.stderr).strip().splitlines()[-4:])
        raise LabError(f"{what or ' '.join(argv[:3])} failed (exit {res.returncode}): {tail}")
    return res.stdout


def cache_dir() -> Path:
    """The lab cache directory ($HWMGR_LAB_CACHE or /var/cache/hwmgr-lab)."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def host_kernel() -> tuple[str, str]:
    """(kernel release, package version) that the installed linux-headers-amd64 points at."""
    try:
        out = run(["dpkg-query", "-W", "-f=${Depends}", "linux-headers-amd64"],
                  what="dpkg-query linux-headers-amd64")
    except LabError:
        raise LabError("linux-headers-amd64 is not installed: apt-get install "
                       "linux-headers-amd64") from None
    m = re.search(r"linux-headers-(\S+)\s*\(=\s*([^)\s]+)\)", out)
    if not m:
        raise LabError(f"cannot read the kernel from linux-headers-amd64's Depends: {out!r}")
    return m.group(1), m.group(2)


def apt_sources() -> tuple[Path, str, str]:
    """The host's Debian apt source file, its first mirror URI and the release codename."""
    cands = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    cands += [Path("/etc/apt/sources.list")]
    codename = ""
    osr = Path("/etc/os-release")
    if osr.is_file():
        m = re.search(r"^VERSION_CODENAME=\"?(\w+)", osr.read_text(), re.M)
        codename = m.group(1) if m else ""
    for p in cands:
        if not p.is_file():
            continue
        text = p.read_text()
        for m in re.finditer(r"(?:^URIs:\s*|^deb\s+(?:\[[^]]*\]\s+)?)(\S+)", text, re.M):
            uri = m.group(1)
            if "debian" in uri and "security" not in uri:
                return p, uri, codename or "bookworm"
    raise LabError("no Debian mirror found in /etc/apt/sources.list(.d)")


def second_kernel(kver: str) -> tuple[str, str]:
    """(release, package version) of the newest other 6.1 ABI on the mirror, below `kver`,
    whose linux-image and linux-headers both have a candidate in apt's indexes."""
    m = re.fullmatch(r"(\d+\.\d+\.\d+)-(\d+)-(\w+)", kver)
    if not m:
        raise LabError(f"cannot read the ABI number from the kernel release {kver!r}")
    base, abi, flavour = m.group(1), int(m.group(2)), m.group(3)
    for n in range(abi - 1, max(abi - 20, 0), -1):
        k2 = f"{base}-{n}-{flavour}"
        out = run(["apt-cache", "policy", f"linux-image-{k2}", f"linux-headers-{k2}"],
                  what="apt-cache policy (second kernel)")
        cands = re.findall(r"Candidate:\s*(\S+)", out)
        if len(cands) == 2 and "(none)" not in cands and cands[0] == cands[1]:
            return k2, cands[0]
    raise LabError(f"no other {base} kernel with headers below {kver} in apt's indexes "
                   "(apt-get update?)")


def _key(kver: str, kver2: str) -> str:
    stub = (GUEST_DIR / "lab-init").read_bytes()
    doc = json.dumps([BUILDER_VERSION, kver, kver2, DEBOOTSTRAP_PACKAGES, CHROOT_PACKAGES,
                      INITRD_MODULES, DISK_SIZE, DISTRO_INITRD_MODULES, DISTRO_INITRD_CONF,
                      PRUNED_MODULES, KEPT_ETHERNET, NETDEVSIM_SUBDIR, IFUPDOWN_STANZAS,
                      hashlib.sha256(stub).hexdigest()])
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


class _Lock:
    """An exclusive flock on the cache dir, so two builders never race."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def __enter__(self) -> _Lock:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _image_from(cache: Path, meta: dict) -> Image:
    return Image(cache=cache, kver=meta["kver"], kernel_version=meta["kernel_version"],
                 vmlinuz=cache / "vmlinuz", initrd=cache / "initrd.img",
                 disk=cache / "disk.img", e1000e_src=cache / "e1000e-src", key=meta["key"],
                 megaraid_src=cache / "megaraid-src",
                 kver2=meta.get("kver2", ""))


def ensure_image(cache: Path | None = None, *, rebuild: bool = False) -> Image:
    """Return the cached guest, building what is missing or stale first."""
    cache = Path(cache or cache_dir())
    kver, kversion = host_kernel()
    kver2, kversion2 = second_kernel(kver)
    key = _key(kver, kver2)
    with _Lock(cache / ".lock"):
        meta_path = cache / "image.json"
        if meta_path.is_file() and not rebuild:
            meta = json.loads(meta_path.read_text())
            if meta.get("key") == key and all(
                    (cache / f).exists() for f in ("vmlinuz", "initrd.img", "disk.img",
                                                   "e1000e-src", "megaraid-src")):
                return _image_from(cache, meta)
        log(f"building the lab guest for {kver} (second kernel {kver2}) in {cache} "
            "(cold cache: a few minutes)")
        meta = _build(cache, (kver, kversion), (kver2, kversion2), key)
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        return _image_from(cache, meta)


def _timed(timings: dict[str, float], name: str) -> _Timer:
    return _Timer(timings, name)


class _Timer:
    def __init__(self, timings: dict[str, float], name: str) -> None:
        self.timings, self.name = timings, name

    def __enter__(self) -> None:
        self.t0 = time.monotonic()
        log(f"  {self.name} ...")

    def __exit__(self, *exc: object) -> None:
        self.timings[self.name] = round(time.monotonic() - self.t0, 1)
        if not exc[0]:
            log(f"  {self.name}: {self.timings[self.name]} s")


def _download(debs: Path, pkgs: list[str]) -> None:
    debs.mkdir(parents=True, exist_ok=True)
    try:
        run(["apt-get", "download", *pkgs], cwd=debs, what="apt-get download")
    except LabError:
        run(["apt-get", "update", "-q"], what="apt-get update")
        run(["apt-get", "download", *pkgs], cwd=debs, what="apt-get download")


def _one(debs: Path, glob: str) -> Path:
    found = sorted(debs.glob(glob))
    if not found:
        raise LabError(f"apt-get download produced no {glob} in {debs}")
    return found[-1]


def _initrd(kimg: Path, kver: str, busybox: Path, out: Path, work: Path) -> None:
    """A tiny busybox initramfs: load virtio + ext4, mount /dev/vda, switch_root."""
    w = work / "initrd"
    shutil.rmtree(w, ignore_errors=True)
    for d in ("bin", "dev", "proc", "sys", "newroot", "mods"):
        (w / d).mkdir(parents=True)
    shutil.copy2(busybox, w / "bin" / "busybox")
    for a in INITRD_APPLETS:
        (w / "bin" / a).symlink_to("busybox")
    order: list[str] = []
    for mod in INITRD_MODULES:  # one call per module: --show-depends takes only one name
        out_s = run(["/sbin/modprobe", "-d", str(kimg), "-S", kver, "--show-depends", mod],
                    what=f"modprobe --show-depends {mod}")
        for line in out_s.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "insmod":
                name = Path(parts[1]).name
                if name not in order:
                    shutil.copy2(parts[1], w / "mods" / name)
                    order.append(name)
    (w / "mods" / "order").write_text("\n".join(order) + "\n")
    (w / "init").write_text((GUEST_DIR / "initrd-init").read_text())
    (w / "init").chmod(0o755)
    files = run(["find", "."], cwd=w)
    with open(out, "wb") as fh:
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet"], cwd=w,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-1"], stdin=cpio.stdout, stdout=fh)
        assert cpio.stdin is not None and cpio.stdout is not None
        cpio.stdout.close()
        cpio.stdin.write(files.encode())
        cpio.stdin.close()
        if cpio.wait() != 0 or gz.wait() != 0:
            raise LabError("packing the initramfs with cpio|gzip failed")
    shutil.rmtree(w, ignore_errors=True)


def _prune_modules(mods: Path, root: Path, kver: str, *, lab_built: bool = True) -> None:
    """Drop module trees for hardware the guest cannot have, then re-run depmod.
    `lab_built`: the tree has the lab's netdevsim.ko (the main kernel's only)."""
    kernel = mods / "kernel"
    doomed = [kernel / p for p in PRUNED_MODULES]
    doomed += [e for e in (kernel / "drivers/net/ethernet").iterdir()
               if e.is_dir() and e.name != KEPT_ETHERNET]
    for d in doomed:
        shutil.rmtree(d, ignore_errors=True)
    run(["/sbin/depmod", "-b", str(root), kver], what="depmod -b (pruned modules)")
    for mod in ("e1000e", "megaraid_sas", "sch_tbf", *INITRD_MODULES,
                *(("netdevsim",) if lab_built else ())):
        run(["/sbin/modprobe", "-d", str(root), "-S", kver, "--show-depends", mod],
            what=f"modprobe --show-depends {mod} after pruning")


def _chroot(root: Path, script: str, what: str) -> None:
    """Run `script` in the rootfs with /proc and /dev mounted in a private mount namespace."""
    wrapper = (f"set -e; mount -t proc proc {root}/proc; mount --bind /dev {root}/dev; "
               f"exec chroot {root} /bin/bash -ec '{script}'")
    run(["unshare", "--mount", "--propagation", "private", "/bin/bash", "-c", wrapper],
        what=what, timeout=3600)


def _build(cache: Path, main: tuple[str, str], second: tuple[str, str], key: str) -> dict:
    (kver, kversion), (kver2, kversion2) = main, second
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    work = cache / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    debs = work / "debs"
    series = ".".join(kver.split(".")[:2])
    sources, mirror, codename = apt_sources()
    with _timed(timings, "download kernel, linux-source, busybox"):
        _download(debs, [f"linux-image-{kver}={kversion}", f"linux-source-{series}={kversion}",
                         "busybox-static", f"linux-image-{kver2}={kversion2}"])
    kimg, kimg2 = work / "kimg", work / "kimg2"
    with _timed(timings, "unpack kernels + depmod"):
        run(["dpkg-deb", "-x", str(_one(debs, f"linux-image-{kver}_*.deb")), str(kimg)])
        run(["/sbin/depmod", "-b", str(kimg), kver], what="depmod -b")
        run(["dpkg-deb", "-x", str(_one(debs, f"linux-image-{kver2}_*.deb")), str(kimg2)])
        shutil.copy2(kimg / "boot" / f"vmlinuz-{kver}", cache / "vmlinuz.new")
    bbx = work / "bbx"
    with _timed(timings, "initramfs"):
        run(["dpkg-deb", "-x", str(_one(debs, "busybox-static_*.deb")), str(bbx)])
        _initrd(kimg, kver, bbx / "bin" / "busybox", cache / "initrd.img.new", work)
    with _timed(timings, "e1000e sources from linux-source"):
        lsrc = work / "lsrc"
        run(["dpkg-deb", "-x", str(_one(debs, f"linux-source-{series}_*.deb")), str(lsrc)])
        tarball = next((lsrc / "usr" / "src").glob(f"linux-source-{series}.tar.*"))
        run(["tar", "-xf", str(tarball), "-C", str(work),
             f"linux-source-{series}/{E1000E_SUBDIR}", f"linux-source-{series}/{MEGARAID_SUBDIR}",
             f"linux-source-{series}/{NETDEVSIM_SUBDIR}"],
            what="extract e1000e, megaraid, netdevsim")
        for name, sub in (("e1000e-src", E1000E_SUBDIR), ("megaraid-src", MEGARAID_SUBDIR)):
            shutil.rmtree(cache / f"{name}.new", ignore_errors=True)
            shutil.copytree(work / f"linux-source-{series}" / sub, cache / f"{name}.new")
        shutil.rmtree(lsrc)
    with _timed(timings, "netdevsim.ko against the kernel's headers"):
        nsim = work / f"linux-source-{series}" / NETDEVSIM_SUBDIR
        run(["make", "-s", "-C", f"/lib/modules/{kver}/build", f"M={nsim}",
             "CONFIG_NETDEVSIM=m", f"-j{os.cpu_count() or 1}", "modules"],
            what=f"build netdevsim (needs linux-headers-{kver})", timeout=900)
    root = work / "rootfs"
    with _timed(timings, f"debootstrap {codename} (minbase) from {mirror}"):
        run(["debootstrap", "--variant=minbase", f"--include={','.join(DEBOOTSTRAP_PACKAGES)}",
             codename, str(root), mirror], what="debootstrap", timeout=3600)
    with _timed(timings, "chroot apt-get install dkms, headers, rpm, hwmgr deps"):
        (root / "etc/apt/sources.list").unlink(missing_ok=True)
        shutil.copy2(sources, root / "etc/apt/sources.list.d" / sources.name)
        shutil.copy2("/etc/resolv.conf", root / "etc/resolv.conf")
        policy = root / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        pkgs = " ".join([*CHROOT_PACKAGES, f"linux-headers-{kver}={kversion}",
                         f"linux-headers-{kver2}={kversion2}"])
        _chroot(root, "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                f"--no-install-recommends {pkgs} && apt-get clean", "chroot apt-get install")
        policy.unlink()
    with _timed(timings, "kernel modules + lab files into the rootfs"):
        shutil.rmtree(root / "lib/modules" / kver, ignore_errors=True)
        (root / "lib/modules").mkdir(parents=True, exist_ok=True)
        # hardlink-free copy: headers' /lib/modules/<kver>/build link is kept by merging
        run(["cp", "-a", str(kimg / "lib/modules" / kver), str(root / "lib/modules/")])
        (root / "lib/modules" / kver / "extra").mkdir(exist_ok=True)
        shutil.copy2(nsim / "netdevsim.ko", root / "lib/modules" / kver / "extra")
        _prune_modules(root / "lib/modules" / kver, root, kver)
        hdr = Path("/lib/modules") / kver / "build"
        if not (root / "lib/modules" / kver / "build").exists() and hdr.is_symlink():
            (root / "lib/modules" / kver / "build").symlink_to(os.readlink(hdr))
        run(["cp", "-a", str(kimg / "boot") + "/.", str(root / "boot/")])
        # the second kernel: its pruned modules next to its headers' build link, its /boot
        mods2 = root / "lib/modules" / kver2
        shutil.rmtree(mods2, ignore_errors=True)
        run(["cp", "-a", str(kimg2 / "lib/modules" / kver2), str(root / "lib/modules/")])
        _prune_modules(mods2, root, kver2, lab_built=False)
        if not (mods2 / "build").is_symlink():  # what linux-headers-KVER2 had put there
            (mods2 / "build").symlink_to(f"/usr/src/linux-headers-{kver2}")
        run(["cp", "-a", str(kimg2 / "boot") + "/.", str(root / "boot/")])
        # GRUB as Debian's grub-pc postinst leaves it (the defaults file; an empty grubenv)
        grub_default, shipped = root / "etc/default/grub", root / "usr/share/grub/default/grub"
        if not grub_default.exists():
            grub_default.parent.mkdir(parents=True, exist_ok=True)
            grub_default.write_text(shipped.read_text() if shipped.is_file() else GRUB_DEFAULTS)
        (root / "boot/grub").mkdir(parents=True, exist_ok=True)
        shutil.copy2(GUEST_DIR / "lab-init", root / "sbin/lab-init")
        (root / "sbin/lab-init").chmod(0o755)
        conf = root / "etc/initramfs-tools"
        (conf / "conf.d/hwmgr-lab.conf").write_text(DISTRO_INITRD_CONF)
        (conf / "modules").write_text("\n".join(DISTRO_INITRD_MODULES) + "\n")
        _chroot(root, f"update-initramfs -c -k {kver} && update-initramfs -c -k {kver2} && "
                "grub-editenv /boot/grub/grubenv create", "update-initramfs in the chroot")
        for ifname, stanza in IFUPDOWN_STANZAS.items():
            (root / "etc/network/interfaces.d" / ifname).write_text(stanza)
        (root / "etc/hostname").write_text("lab\n")
        (root / "etc/machine-id").write_text("")
        for junk in ("var/lib/apt/lists", "var/cache/apt/archives", "usr/share/doc",
                     "usr/share/man", "usr/share/locale"):
            for p in (root / junk).glob("*"):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                elif p.is_file():
                    p.unlink()
    with _timed(timings, f"mkfs.ext4 -d rootfs ({DISK_SIZE} sparse)"):
        disk_new = cache / "disk.img.new"
        disk_new.unlink(missing_ok=True)
        run(["truncate", "-s", DISK_SIZE, str(disk_new)])
        run(["mkfs.ext4", "-q", "-F", "-L", "labroot", "-E",
             "root_owner=0:0,lazy_itable_init=0,lazy_journal_init=0", "-d", str(root),
             str(disk_new)], what="mkfs.ext4 -d")
    for name in ("vmlinuz", "initrd.img", "disk.img"):
        os.replace(cache / f"{name}.new", cache / name)
    for name in ("e1000e-src", "megaraid-src"):
        shutil.rmtree(cache / name, ignore_errors=True)
        os.replace(cache / f"{name}.new", cache / name)
    shutil.rmtree(work, ignore_errors=True)
    timings["total"] = round(time.monotonic() - t0, 1)
    log(f"lab guest built in {timings['total']} s; cache {cache_size(cache) >> 20} MiB")
    return {"key": key, "kver": kver, "kernel_version": kversion, "kver2": kver2,
            "kernel_version2": kversion2, "mirror": mirror,
            "built": time.strftime("%Y-%m-%dT%H:%M:%S"), "timings": timings}


def cache_size(cache: Path) -> int:
    """Bytes allocated on disk under `cache` (sparse files count what they use)."""
    total = 0
    for p in _walk(cache):
        with contextlib.suppress(OSError):
            total += p.lstat().st_blocks * 512
    return total


def _walk(top: Path) -> Iterator[Path]:
    for dirpath, _dirs, files in os.walk(top):
        for f in files:
            yield Path(dirpath) / f


def describe(img: Image) -> dict:
    """Sizes and build timings of the cached image (for the transcript and the report)."""
    meta = json.loads((img.cache / "image.json").read_text())
    return {**asdict(img), "cache_mib": cache_size(img.cache) >> 20,
            "disk_allocated_mib": (img.disk.stat().st_blocks * 512) >> 20,
            "timings": meta.get("timings", {})}
