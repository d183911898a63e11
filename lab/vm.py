"""Run the lab: host services (HTTP for the catalog's SRPMs, iperf3) and guest boots in QEMU.

A `Lab` owns one run directory, the e1000e SRPMs, the lab catalog and the host servers; a
`VM` owns a qcow2 overlay on the cached golden disk; `VM.boot(step)` writes a fresh payload
disk (hwmgr, catalog, recipe, site config, the units, the step script), starts QEMU with
-no-reboot, streams the serial console into a transcript, and reads back what the guest
recorded in /lab/out with debugfs (no mounts). The guest boots with systemd; a reboot ends
QEMU, and the next `boot()` is the next boot of the same disk. `VM.paused()` stops a running
guest over QMP (QEMU flushes its disk caches) so its disk can be copied: a power cut's disk.
`Lab.close()` stops every process it started, whatever happened.
"""

from __future__ import annotations

import compileall
import contextlib
import functools
import http.server
import json
import os
import py_compile
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from lab import binpkg, grub, raidsrpm, srpms
from lab import image as labimage
from lab.boot import RESTART, Boot, e1000e_versions  # noqa: F401 - re-exported
from lab.catalog import TRUSTED_BY_SITE, lab_catalog
from lab.image import Image, LabError, log, run

REPO = Path(__file__).resolve().parent.parent
GUEST = Path(__file__).resolve().parent / "guest"
SITE = Path(__file__).resolve().parent / "site"
UNIT = REPO / "contrib" / "systemd" / "hwmgr-verify.service"
HOST_IP = "10.0.2.2"  # the host as QEMU user networking shows it to the guest
# The site's throughput floor: far below what the emulated 82574L moves over QEMU user
# networking (485-924 Mbit/s), far above scenario 5's 20 Mbit/s shaping, and below the
# 150-190 Mbit/s it sends with scenario 7's settings (TSO off: TCG segments in software).
FLOOR_MBPS = 50.0
PKGS = "/lab/pkgs"  # where a boot that names it finds the host's binary packages
BOOT_TIMEOUT = 600.0
JOBS_ENV, SMP_ENV, CPU_ENV = "HWMGR_LAB_JOBS", "HWMGR_LAB_SMP", "HWMGR_LAB_CPU"
GUEST_FILES = ("init.sh", "lib.sh", "facts.py", "summary.py", "net.sh", "run-step.sh",
               "verify-done.sh")


# journald's console forwarding: "[   39.76] run-step.sh[270]: LAB: ..." → "LAB: ..."
_UNIT_PREFIX = re.compile(r"^\[\s*\d+\.\d+\] [\w.@:-]+\[\d+\]: ")


def _console(raw: str) -> str:
    """One console line without CR and without journald's timestamp/unit prefix."""
    return _UNIT_PREFIX.sub("", raw.rstrip("\r\n").replace("\r", ""))


def _die_with_parent(argv: list[str]) -> list[str]:
    """`argv` under `setpriv --pdeathsig KILL`: the child dies with the harness, even when
    the harness is SIGKILLed, so no QEMU or iperf3 outlives a cancelled CI job."""
    if shutil.which("setpriv"):
        return ["setpriv", "--pdeathsig", "KILL", "--", *argv]
    return argv


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def verify_command() -> str:
    """hwmgr-verify.service's ExecStart, verbatim (the lab's site config names the iperf3
    peer, so `verify --boot` runs the throughput check too)."""
    for line in UNIT.read_text().splitlines():
        if line.strip().startswith("ExecStart="):
            return line.split("=", 1)[1].strip()
    raise LabError(f"{UNIT} has no ExecStart=")


def _dropin() -> str:
    """The lab site's drop-in for hwmgr-verify.service: the shipped command plus --json, its
    output where the harness reads it, and the exit status kept by an ExecStopPost."""
    lines = ["# hwmgr QEMU lab site drop-in (written by lab/vm.py)",
             "[Service]", "ExecStart=", f"ExecStart={verify_command()} --json",
              "StandardOutput=file:/lab/out/boot-verify.json",
              "StandardError=file:/lab/out/boot-verify.err",
              "ExecStopPost=/lab/verify-done.sh",
              "Environment=PYTHONDONTWRITEBYTECODE=1 COLUMNS=120"]
    return "\n".join(lines) + "\n"


class Lab:
    """One lab run: image, run dir, SRPMs on an HTTP server, iperf3, and its VMs."""

    def __init__(self, run_dir: Path, img: Image | None = None) -> None:
        self.img = img or labimage.ensure_image()
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._procs: list[subprocess.Popen] = []
        self._http: http.server.ThreadingHTTPServer | None = None
        self.vms: list[VM] = []
        self.srpms: dict[str, Path] = {}
        self.binpkg: binpkg.Builder | None = None
        self.catalog: dict[str, Any] = {}
        self.http_port = 0
        self.timings: dict[str, float] = {}
        # guests running at once; TCG vCPUs beyond the host's CPUs only slow everyone down
        self.jobs = max(1, int(os.environ.get(JOBS_ENV) or 2))
        self.smp = int(os.environ.get(SMP_ENV) or (2 if self.jobs == 1 else 1))
        # a boot that runs while nothing else can (the first one) may use every host CPU
        self.smp_alone = int(os.environ.get(SMP_ENV) or min(2, os.cpu_count() or 1))
        self.cpu = os.environ.get(CPU_ENV) or "qemu64"  # ~15% faster builds than "max" (TCG)
        self.slots = threading.BoundedSemaphore(self.jobs)
        self.closed = False

    # ------------------------------------------------------------------ host side
    def start(self) -> Lab:
        """Make the SRPMs and catalog, start the HTTP server and the iperf3 server."""
        t0 = time.monotonic()
        served = self.run_dir / "served"
        self.srpms = srpms.build_all(self.img.e1000e_src, served, self.img.kver2)
        self.srpms[raidsrpm.VERSION] = raidsrpm.build_srpm(self.img.megaraid_src, served)
        handler = functools.partial(_Quiet, directory=str(served))
        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.http_port = int(self._http.server_address[1])
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        self.catalog = lab_catalog(self.srpms, self.mirror)
        (self.run_dir / "catalog.json").write_text(json.dumps(self.catalog, indent=1) + "\n")
        # the binary packages, built once here as on a build host, beside the first boots
        self.binpkg = binpkg.Builder(self.run_dir, self.run_dir / "catalog.json",
                                     f"http://127.0.0.1:{self.http_port}", self.img.kver).start()
        self.pylib = self.run_dir / "pylib"
        shutil.rmtree(self.pylib, ignore_errors=True)
        shutil.copytree(REPO / "hwmgr", self.pylib / "hwmgr",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # bytecode compiled here, checked by source hash: under TCG each hwmgr run in the
        # guest would otherwise spend seconds compiling the package again
        compileall.compile_dir(self.pylib, quiet=1,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
        self.timings["host setup"] = round(time.monotonic() - t0, 1)
        log(f"lab run dir {self.run_dir}: SRPMs {', '.join(sorted(self.srpms))} on "
            f"http://{HOST_IP}:{self.http_port}/ (guest view)")
        return self

    @property
    def mirror(self) -> str:
        """The site mirror as the guest sees it: the lab's HTTP server (flat layout)."""
        return f"http://{HOST_IP}:{self.http_port}"

    def iperf_server(self) -> int:
        """Start one more iperf3 server on 127.0.0.1 (one per VM: iperf3 serves one client)."""
        port = free_port()
        logf = open(self.run_dir / f"iperf3-{port}.log", "wb")  # noqa: SIM115 - kept open
        p = subprocess.Popen(_die_with_parent(["iperf3", "-s", "-B", "127.0.0.1", "-p",
                                               str(port)]),
                             stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        self._procs.append(p)
        time.sleep(0.3)
        if p.poll() is not None:
            raise LabError(f"iperf3 server on port {port} exited at once (see {logf.name})")
        return port

    def vm(self, name: str, **kw: Any) -> VM:
        """A new VM: a fresh overlay on the golden disk, or `fork_of=` another VM's disk."""
        v = VM(self, name, **kw)
        self.vms.append(v)
        return v

    def close(self) -> None:
        """Stop QEMU, iperf3 and HTTP: everything this lab started."""
        self.closed = True  # background chains start no new boot from now on
        for v in self.vms:
            v.kill()
            shutil.rmtree(v.qmp.parent, ignore_errors=True)
        for p in self._procs:
            if p.poll() is None:
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                        os.killpg(p.pid, signal.SIGKILL)
                    p.wait(timeout=5)
        self._procs.clear()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None

    def __enter__(self) -> Lab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class VM:
    """One guest disk (qcow2 overlay) and its sequence of boots."""

    def __init__(self, lab: Lab, name: str, *, floor_mbps: float = FLOOR_MBPS,
                 on_failure: str = "rollback", fork_of: VM | None = None,
                 power_cut: bool = False, storage: bool = False, grub: bool = False) -> None:
        """A fresh disk, a copy of powered-off `fork_of`'s disk, or with `power_cut` the disk
        of running `fork_of` as it is this instant (what a power cut leaves behind).
        `storage`: boot the guest's own initramfs (see `_argv`), a data disk on the SAS 2108.
        `grub`: boot the kernel GRUB would choose from the disk, with its own /boot files
        (lab/grub.py)."""
        self.lab, self.name = lab, name
        self.dir = lab.run_dir / name
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.overlay = self.dir / "root.qcow2"
        self._qmp_dir = Path(tempfile.mkdtemp(prefix=f"hwmgr-lab-{name}-"))  # short path
        self.qmp = self._qmp_dir / "qmp.sock"
        self.history: list[str] = list(fork_of.history) if fork_of else []
        if fork_of is not None and power_cut:
            with fork_of.paused():
                shutil.copyfile(fork_of.overlay, self.overlay)
            self.history.append(f"power cut: {fork_of.name}'s disk during its boot "
                                f"{len(fork_of.boots) + 1}")
        elif fork_of is not None:  # the same disk as fork_of has now (it is powered off)
            shutil.copyfile(fork_of.overlay, self.overlay)
            self.history.append(f"forked from {fork_of.name} after its boot "
                                f"{len(fork_of.boots)}")
        else:
            run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(lab.img.disk), "-F",
                 "raw", str(self.overlay)], what="qemu-img create overlay")
        self.iperf_port = lab.iperf_server()
        self.config = {
            "comment": "hwmgr QEMU lab site config (lab/vm.py)",
            "on_failure": on_failure,  # reboot_command: hwmgr's default, systemctl reboot
            "throughput_peer": HOST_IP, "throughput_port": self.iperf_port,
            "throughput_floor_mbps": floor_mbps, "throughput_duration": 3,
            "link_wait_seconds": 10, "mirror": lab.mirror,
            # DKMS builds e1000e in 2-5 min under TCG, up to ~10 beside other guests
            "build_timeout_seconds": 2400,
        }
        self.boots: list[Boot] = []
        self._proc: subprocess.Popen | None = None
        self.storage, self.grub = False, grub
        if storage:
            self.attach_storage()

    def attach_storage(self) -> None:
        """From the next boot on: a 64 MiB data disk on the SAS 2108, and the initramfs the
        guest's own /boot holds (see `_argv`), as a boot loader would read it."""
        if not self.storage:
            run(["truncate", "-s", "64M", str(self.dir / "sas.img")])
            self.storage = True

    # ------------------------------------------------------------------ payload
    def _payload(self, n: int, step: str, shape: str | None) -> Path:
        d = self.dir / f"payload{n}"
        shutil.rmtree(d, ignore_errors=True)
        (d / "out").mkdir(parents=True)
        for f in GUEST_FILES:
            shutil.copy2(GUEST / f, d / f)
        shutil.copytree(self.lab.pylib, d / "pylib")
        (d / "catalog").mkdir()
        shutil.copy2(self.lab.run_dir / "catalog.json", d / "catalog" / "lab.json")
        shutil.copytree(SITE, d / "site")  # site catalog layers a step may install
        # the vendor SRPM "the admin obtained" (scp'd onto the host), for `catalog trust`
        (d / "obtained").mkdir()
        shutil.copy2(self.lab.srpms[TRUSTED_BY_SITE], d / "obtained")
        if PKGS in step:  # the binary packages built on the host, and their catalog layer
            assert self.lab.binpkg is not None, "the lab was not started"
            built = self.lab.binpkg.result()
            (d / "pkgs").mkdir()
            for f in [*built.debs.values(), *built.layers]:
                shutil.copy2(f, d / "pkgs" / f.name)
        (d / "drivers").mkdir()
        for drv in ("e1000e", "megaraid_sas"):
            shutil.copytree(REPO / "drivers" / drv, d / "drivers" / drv)
        (d / "hwmgr.json").write_text(json.dumps(self.config, indent=1) + "\n")
        (d / "unit").mkdir()
        shutil.copy2(UNIT, d / "unit" / UNIT.name)
        (d / "unit" / "lab.conf").write_text(_dropin())
        shutil.copytree(GUEST / "units", d / "units")
        if shape:
            (d / "shape.sh").write_text(f"#!/bin/bash\n{shape}\n")
            (d / "shape.sh").chmod(0o755)
        (d / "boot-id").write_text(f"{self.name}#{n}\n")
        if self.storage:  # run-step.sh leaves /boot's initramfs in out/ for the next boot
            (d / "storage").write_text("1\n")
        (d / "step.sh").write_text("#!/bin/bash\nsource /lab/lib.sh\n" + step + "\n")
        img = self.dir / f"payload{n}.img"
        img.unlink(missing_ok=True)
        run(["truncate", "-s", "256M", str(img)])
        run(["mkfs.ext4", "-q", "-F", "-L", "labpayload", "-E", "root_owner=0:0", "-d", str(d),
             str(img)], what="mkfs.ext4 payload")
        return img

    def _left_initrd(self) -> Path | None:
        """The copy of /boot/initrd.img-KVER the last storage boot left (run-step.sh)."""
        left = [b.out / "initrd.img" for b in self.boots if (b.out / "initrd.img").is_file()]
        return left[-1] if left else None

    def next_kernel(self) -> grub.Choice:
        """The kernel GRUB boots next from this (powered-off) disk, and why."""
        return grub.next_boot(self.overlay, self.dir / "grub-next")

    def _argv(self, payload: Path, smp: int, choice: grub.Choice | None) -> list[str]:
        img = self.lab.img
        mac = "52:54:00:12:34:56"
        vmlinuz, initrd, sas = img.vmlinuz, img.initrd, []
        if choice is not None and choice.vmlinuz and choice.initrd:  # as GRUB reads /boot
            vmlinuz, initrd = choice.vmlinuz, choice.initrd
        if self.storage:  # as a boot loader reads /boot: the copy of /boot/initrd.img-KVER
            # the last boot left, or (the first storage boot) the file read from the disk
            left = self._left_initrd()
            initrd = left if left else initrd
            sas = ["-drive", f"file={self.dir / 'sas.img'},format=raw,if=none,id=sas0",
                   "-device", "scsi-hd,drive=sas0,bus=raid0.0"]
        return [
            "qemu-system-x86_64", "-accel", "tcg,thread=multi", "-cpu", self.lab.cpu,
            "-smp", str(smp),
            "-m", "1536", "-display", "none", "-serial", "stdio", "-monitor", "none",
            "-qmp", f"unix:{self.qmp},server=on,wait=off",
            "-no-reboot", "-kernel", str(vmlinuz), "-initrd", str(initrd),
            "-append", "console=ttyS0 root=/dev/vda rw init=/sbin/lab-init quiet loglevel=3 "
                       "panic=-1 net.ifnames=0",
            "-drive", f"file={self.overlay},format=qcow2,if=virtio,cache=writeback",
            "-drive", f"file={payload},format=raw,if=virtio,cache=writeback",
            "-netdev", "user,id=n0,ipv6=off",  # no SLAAC default route in the guest
            "-device", f"e1000e,netdev=n0,mac={mac},romfile=",
            "-device", "megasas-gen2,id=raid0", *sas,
        ]

    # ------------------------------------------------------------------ boot
    def boot(self, step: str = "", *, shape: str | None = None,
             timeout: float = BOOT_TIMEOUT, on_line: Callable[[str], None] | None = None,
             slot: bool = True, smp: int | None = None) -> Boot:
        """Boot the guest once, run boot-verify and `step` (bash), return what it recorded.

        `on_line`: called with each console line as it arrives (e.g. to take a power cut).
        `slot`: wait for one of the lab's `jobs` slots (False: the caller holds one).
        `smp`: vCPUs for this boot (default the lab's per-guest count).
        """
        args = (step, shape, timeout, on_line, smp or self.lab.smp)
        if not slot:
            return self._boot(*args)
        with self.lab.slots:
            return self._boot(*args)

    def _boot(self, step: str, shape: str | None, timeout: float,
              on_line: Callable[[str], None] | None, smp: int) -> Boot:
        n = len(self.boots) + 1
        if self.lab.closed:
            raise LabError(f"{self.name} boot {n}: the lab is closed")
        choice = grub.next_boot(self.overlay, self.dir / f"grub{n}") if self.grub else None
        if choice is not None:
            log(f"{self.name} boot {n}: GRUB (emulated) boots {choice.kernel}: {choice.why}")
        elif self.storage and self._left_initrd() is None:  # its /boot, read off the disk
            choice = grub.next_boot(self.overlay, self.dir / f"grub{n}")
            if choice.kernel != self.lab.img.kver:
                raise LabError(f"{self.name} boot {n}: the disk boots {choice.kernel}, not the "
                               f"lab's kernel {self.lab.img.kver} ({choice.why})")
            log(f"{self.name} boot {n}: storage boot with /boot/initrd.img-{choice.kernel} "
                "read from the disk")
        payload = self._payload(n, step, shape)
        logp = self.dir / f"boot{n}.log"
        lines: list[str] = []
        t0 = time.monotonic()
        log(f"{self.name} boot {n}: starting QEMU ({smp} vCPU)")
        self.qmp.unlink(missing_ok=True)
        with open(logp, "w") as logf:
            self._proc = subprocess.Popen(_die_with_parent(self._argv(payload, smp, choice)),
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, start_new_session=True)
            proc = self._proc
            if self.lab.closed:  # close() ran while this boot was being prepared
                self._kill_proc(proc)
            timer = threading.Timer(timeout, self._timeout_kill, args=(proc,))
            timer.start()
            try:
                assert proc.stdout is not None
                for raw in iter(proc.stdout.readline, b""):
                    line = _console(raw.decode(errors="replace"))
                    if not line.strip():
                        continue
                    stamp = f"[{time.monotonic() - t0:7.2f}] {line}"
                    lines.append(line)
                    logf.write(stamp + "\n")
                    logf.flush()
                    if line.startswith(("LAB", "    ")) or "hwmgr" in line:
                        log(f"{self.name}#{n} {stamp}")
                    if on_line:
                        on_line(line)
                rc = proc.wait()
            finally:
                timer.cancel()
                self.kill()
        wall = round(time.monotonic() - t0, 1)
        timed_out = getattr(proc, "_lab_timed_out", False)
        out = self.dir / f"out{n}"
        self._read_out(payload, out, dirty=timed_out)
        b = Boot(self.name, n, logp, out, wall, rc, lines,
                 grub=(choice.kernel, choice.why) if choice else None)
        self.boots.append(b)
        log(f"{self.name} boot {n}: QEMU exited rc={rc} after {wall} s")
        if timed_out:
            raise LabError(f"{self.name} boot {n} timed out after {timeout:.0f} s; "
                           f"transcript {logp}")
        return b

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the running guest's vCPUs over QMP for the block; QEMU drains and flushes its
        disks on `stop`, so the overlay file is then exactly what the guest's disk holds."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(60)
            sock.connect(str(self.qmp))
            f = sock.makefile("rwb")

            def call(cmd: str) -> None:
                f.write(json.dumps({"execute": cmd}).encode() + b"\n")
                f.flush()
                while True:
                    line = f.readline()
                    if not line:
                        raise LabError(f"{self.name}: QMP closed during {cmd}")
                    msg = json.loads(line)
                    if "error" in msg:
                        raise LabError(f"{self.name}: QMP {cmd}: {msg['error']}")
                    if "return" in msg:
                        return

            json.loads(f.readline())  # the greeting
            call("qmp_capabilities")
            call("stop")
            try:
                yield
            finally:
                call("cont")

    def _timeout_kill(self, proc: subprocess.Popen) -> None:
        proc._lab_timed_out = True  # type: ignore[attr-defined]
        self._kill_proc(proc)

    @staticmethod
    def _kill_proc(proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)

    def kill(self) -> None:
        """Stop this VM's QEMU if it still runs."""
        p = self._proc
        if p is not None and p.poll() is None:
            self._kill_proc(p)
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                p.wait(timeout=10)

    @staticmethod
    def _read_out(payload: Path, dest: Path, dirty: bool) -> None:
        """Copy /out from the payload image with debugfs (after fsck if QEMU timed out)."""
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        if dirty:
            subprocess.run(["e2fsck", "-fy", str(payload)], capture_output=True, check=False,
                           timeout=120)
        tmp = dest.parent / f".{dest.name}.dump"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        subprocess.run(["debugfs", "-R", f"rdump /out {tmp}", str(payload)],
                       capture_output=True, check=False, timeout=120)
        src = tmp / "out"
        if src.is_dir():
            for p in src.iterdir():
                shutil.move(str(p), dest / p.name)
        shutil.rmtree(tmp, ignore_errors=True)
