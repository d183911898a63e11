"""The initramfs step of a storage driver with the real tools: kbuild, depmod, update-initramfs
and lsinitramfs, on the kernel whose headers this machine has (issue 23, part 4).

Two builds of a tiny module stand for the inbox and the vendor driver: 1.0 in `extra/`, in
the image; 2.0 in `updates/` (where DKMS installs, ahead of it for modprobe). The upgrade's
and rollback's own "initramfs" steps run in real transactions: the old image is kept byte for
byte, the rebuilt one holds the new file, a rebuilt image without it is refused and put back,
and the rollback restores the kept image byte for byte.

It writes what a storage-driver upgrade writes: `/boot/initrd.img-KVER` (and `config-KVER`,
which mkinitramfs reads), the module's line in `/etc/initramfs-tools/modules`, module files
under /lib/modules/KVER; all removed afterwards. It is skipped on a machine where that kernel
really has an initramfs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from support.lifecycle_env import headers_kernel

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds import kmod
from hwmgr.lifecycle.steps import rollback_steps, upgrade_steps
from hwmgr.transaction.engine import Transaction
from hwmgr.transaction.state import StateDir

SLOW = pytest.mark.slow  # two kbuild runs and four update-initramfs runs (~10-25 s)

MOD = "hwmgrstor"
MODULES_CONF = Path("/etc/initramfs-tools/modules")
SOURCE = """#include <linux/module.h>
static int __init s_init(void) { return 0; }
static void __exit s_exit(void) { }
module_init(s_init);
module_exit(s_exit);
MODULE_LICENSE("GPL");
MODULE_VERSION("%s");
"""


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_module(tmp: Path, kver: str, version: str) -> Path:
    """A real .ko for `kver`, built with the kernel's kbuild."""
    d = tmp / f"src-{version}"
    d.mkdir()
    (d / f"{MOD}.c").write_text(SOURCE % version)
    (d / "Makefile").write_text(f"obj-m := {MOD}.o\n")
    subprocess.run(["make", "-s", "-C", f"/lib/modules/{kver}/build", f"M={d}", "modules"],
                   check=True, capture_output=True, timeout=300)
    return d / f"{MOD}.ko"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    kver = headers_kernel()
    if kver is None or shutil.which("update-initramfs") is None:
        pytest.skip("needs linux-headers-amd64 and initramfs-tools (make test installs them)")
    boot = Path("/boot")
    image, config = boot / f"initrd.img-{kver}", boot / f"config-{kver}"
    if image.exists():
        pytest.skip(f"{image} exists: {kver} is really installed here, leave its image alone")
    tmp = tmp_path_factory.mktemp("initramfs")
    kos = {v: build_module(tmp, kver, v) for v in ("1.0", "2.0")}
    made_config = not config.exists()
    made_dirs = [d for d in (Path(f"/lib/modules/{kver}/extra"),
                             Path(f"/lib/modules/{kver}/updates")) if not d.exists()]
    conf_before = MODULES_CONF.read_bytes() if MODULES_CONF.exists() else None
    extra = Path(f"/lib/modules/{kver}/extra/{MOD}.ko")
    updates = Path(f"/lib/modules/{kver}/updates/{MOD}.ko")
    try:
        if made_config:
            shutil.copyfile(f"/lib/modules/{kver}/build/.config", config)
        MODULES_CONF.write_bytes((conf_before or b"") + f"{MOD}\n".encode())
        extra.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kos["1.0"], extra)
        subprocess.run(["depmod", "-a", kver], check=True)
        subprocess.run(["update-initramfs", "-c", "-k", kver], check=True, capture_output=True)
        yield {"kver": kver, "image": image, "kos": kos, "updates": updates,
               "state": StateDir(Host("/", SubprocessRunner()), str(tmp / "state"))}
    finally:
        for p in (image, extra, updates, *([config] if made_config else [])):
            p.unlink(missing_ok=True)
        for d in made_dirs:  # only if empty: a concurrent DKMS install may use updates/
            with contextlib.suppress(OSError):
                d.rmdir()
        if conf_before is None:
            MODULES_CONF.unlink(missing_ok=True)
        else:
            MODULES_CONF.write_bytes(conf_before)
        if Path(f"/lib/modules/{kver}/modules.dep").exists():
            subprocess.run(["depmod", "-a", kver], check=False)


def install(bed: dict[str, Any], version: str | None) -> None:
    """Put 2.0 in updates/ (what `dkms install` does) or take it out (what rollback does)."""
    if version:
        bed["updates"].parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bed["kos"][version], bed["updates"])
    else:
        bed["updates"].unlink(missing_ok=True)
    subprocess.run(["depmod", "-a", bed["kver"]], check=True)


def listing(bed: dict[str, Any]) -> list[str]:
    out = subprocess.run(["lsinitramfs", str(bed["image"])], check=True, capture_output=True,
                         text=True).stdout
    return [line for line in out.splitlines() if line.endswith(f"{MOD}.ko")]


def run_step(bed: dict[str, Any], kind: str, **params: Any) -> tuple[Any, dict[str, Any]]:
    """Run the registry's own "initramfs" step of `kind` as a real journaled transaction."""
    full = {"driver": MOD, "version": "2.0", "modules": [MOD], "kernels": [bed["kver"]],
            "initramfs": [bed["kver"]], "source": {}, "restore": {}, "remove_versions": [],
            **params}
    factory = upgrade_steps if kind == "upgrade" else rollback_steps
    registry = {kind: lambda p: [s for s in factory(p) if s.name == "initramfs"]}
    state = bed["state"]
    with state.lock(command=f"test {kind}"):
        res = Transaction(state, registry, kind, full, target=MOD).run()
    return res, state.journal().get(res.id)["steps"][0]["data"]


def test_image_holds_reads_both_listings() -> None:
    """lsinitramfs paths (merged /usr) and lsinitrd `ls -l` lines name the same module file."""
    ko = "/lib/modules/6.1.0-56-amd64/updates/dkms/megaraid_sas.ko"
    debian = ["usr/lib/modules/6.1.0-56-amd64/kernel/drivers/scsi/megaraid/megaraid_sas.ko",
              "usr/lib/modules/6.1.0-56-amd64/updates/dkms/megaraid_sas.ko"]
    assert kmod.image_holds(debian, ko)
    assert not kmod.image_holds(debian[:1], ko)  # only the in-tree one: the old image
    assert not kmod.image_holds(debian, ko + ".xz")
    line = ("-rw-r--r--   1 root     root       123 Jan 13  2023 "
            "usr/lib/modules/6.1.0-56-amd64/updates/dkms/megaraid_sas.ko")
    assert kmod.image_holds([line.split()[-1]], ko)


@SLOW
def test_upgrade_rollback_and_a_refused_image(bed: dict[str, Any]) -> None:
    kver, image = bed["kver"], bed["image"]
    before = sha(image)
    assert any("/extra/" in f for f in listing(bed)), "the 'inbox' 1.0 is in the first image"
    assert kmod.in_initramfs(Host("/", SubprocessRunner()), [MOD], kver) is True

    # upgrade: kept byte for byte in the state dir, rebuilt, holds the updates/ file
    install(bed, "2.0")
    res, data = run_step(bed, "upgrade")
    assert res.state == "committed", res.error
    kept = data[f"backup:{image}"]
    assert kept["sha256"] == before and sha(Path(kept["backup"])) == before
    assert data["rebuilt"][kver]["how"] == "update-initramfs"
    assert data["rebuilt"][kver]["holds"] == {MOD: f"/lib/modules/{kver}/updates/{MOD}.ko"}
    assert any(f.endswith(f"lib/modules/{kver}/updates/{MOD}.ko") for f in listing(bed))
    built = sha(image)
    assert data["rebuilt"][kver]["sha256"] == built and built != before

    # rollback: the module files are back (1.0), then the kept image, byte for byte
    install(bed, None)
    res, rdata = run_step(bed, "rollback", version="1.0", undo_upgrade=res.id)
    assert res.state == "committed", res.error
    assert sha(image) == before, "the rollback must put the upgrade's kept image back"
    assert rdata["rebuilt"][kver]["how"] == "restored"
    assert rdata[f"backup:{image}"]["sha256"] == built  # and it kept the one it replaced

    # an image that does not hold the new module is refused and the old one put back
    install(bed, "2.0")
    MODULES_CONF.write_bytes(MODULES_CONF.read_bytes().replace(f"{MOD}\n".encode(), b""))
    res, data = run_step(bed, "upgrade")
    assert not data.get("rebuilt") and data[f"backup:{image}"]["sha256"] == before
    assert res.state == "rolled-back"
    assert f"does not hold /lib/modules/{kver}/updates/{MOD}.ko" in (res.error or "")
    assert sha(image) == before


CRASHER = """
import json, sys
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.steps import upgrade_steps
from hwmgr.transaction.engine import Transaction
from hwmgr.transaction.state import StateDir
state = StateDir(Host("/", SubprocessRunner()), sys.argv[1])
registry = {"upgrade": lambda p: [s for s in upgrade_steps(p) if s.name == "initramfs"]}
with state.lock(command="crash test"):
    Transaction(state, registry, "upgrade", json.loads(sys.argv[2]), target="hwmgrstor").run()
"""


@SLOW
@pytest.mark.parametrize(("at", "ends"), [("initramfs:saved", "rolled-back"),
                                          ("initramfs:after", "committed")])
def test_killed_in_the_initramfs_step_then_recovered(bed: dict[str, Any], tmp_path: Path,
                                                      at: str, ends: str) -> None:
    """SIGKILL once the image is kept (before the rebuild), or once it is rebuilt (before the
    step is marked done): `recover` leaves exactly the old image or exactly the checked new
    one."""
    install(bed, "2.0")
    MODULES_CONF.write_bytes(MODULES_CONF.read_bytes().replace(f"{MOD}\n".encode(), b"")
                             + f"{MOD}\n".encode())
    subprocess.run(["update-initramfs", "-u", "-k", bed["kver"]], check=True,
                   capture_output=True)
    before = sha(bed["image"])
    params = {"driver": MOD, "version": "2.0", "modules": [MOD], "kernels": [bed["kver"]],
              "initramfs": [bed["kver"]], "source": {}}
    state_dir = tmp_path / "state"
    res = subprocess.run([sys.executable, "-c", CRASHER, str(state_dir), json.dumps(params)],
                         env={**os.environ, "HWMGR_TEST_CRASH_AT": at}, check=False)
    assert res.returncode == -9
    state = StateDir(Host("/", SubprocessRunner()), str(state_dir))
    registry = {"upgrade": lambda p: [s for s in upgrade_steps(p) if s.name == "initramfs"]}
    with state.lock(command="recover"):
        (done,) = Transaction.recover(state, registry)
    assert done.state == ends, done.error
    data = state.journal().get(done.id)["steps"][0]["data"]
    if ends == "rolled-back":
        assert sha(bed["image"]) == before
    else:
        assert sha(bed["image"]) == data["rebuilt"][bed["kver"]]["sha256"] != before
        assert data[f"backup:{bed['image']}"]["sha256"] == before
