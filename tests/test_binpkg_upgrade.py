"""`hwmgr upgrade DRIVER --to V --package FILE`: a host installs the site-built .deb (real
dpkg-deb, dpkg -i / -r) instead of building; `hwmgr rollback` removes it and restores the
previous state byte for byte. A tampered or hostile package is refused with nothing changed;
a SIGKILL at each step boundary + `hwmgr recover` leaves exactly the old or the new state.

Installs into this machine's /lib/modules/<headers kernel>/updates/hwmgr and dpkg database
(machine_wide, like tests/test_lifecycle.py); the package is purged afterwards.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import run_cli
from support.lifecycle_env import MODULE, Bed, cleanup_dkms, make_bed

from hwmgr.errors import EXIT_REFUSED
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.transaction.state import StateDir

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not all(shutil.which(t) for t in ("dpkg", "dpkg-deb", "dkms", "rpm")),
    reason="dpkg, dpkg-deb, dkms and rpm are needed")]

VERSION = "1.0_lab"
STEPS = ["verify-package", "inspect", "backup", "install", "initramfs", "arm"]


def _dpkg_status(name: str) -> str:
    res = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status}", name],
                         capture_output=True, text=True, check=False)
    return res.stdout.strip() if res.returncode == 0 else "not-installed"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("binpkg-upgrade")
    b, srv = make_bed(tmp, versions=("1.0", VERSION))  # 1.0: a DKMS upgrade beneath
    cleanup_dkms(b.kver)
    out = tmp / "out"
    res = run_cli("package", MODULE, "--catalog", str(b.catalog), "--version", VERSION,
                  "--binary", "deb", "--kernel", b.kver, "--out", str(out), "--json",
                  env=b.env, timeout=300)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)["data"]
    b.env["DEB"], b.env["LAYER"] = data["path"], data["layer"]
    b.env["DEB_NAME"] = data["name"]
    yield b
    srv.shutdown()
    subprocess.run(["dpkg", "--purge", data["name"]], capture_output=True, check=False)
    cleanup_dkms(b.kver)


def hw(bed: Bed, *args: str, env: dict[str, str] | None = None, layer: bool = True):
    cat = ["--catalog", str(bed.catalog)] + (["--catalog", bed.env["LAYER"]] if layer else [])
    return run_cli(*args, *(cat if args[0] in ("upgrade", "plan") else []),
                   env={**bed.env, **(env or {})}, timeout=300)


def upgrade(bed: Bed, deb: str, **kw):
    return hw(bed, "upgrade", MODULE, "--to", VERSION, "--package", deb, "--kernel",
              bed.kver, "--yes", "--json", **kw)


def fingerprint(bed: Bed) -> dict[str, object]:
    """The module files of the kernel (path → sha256), modules.dep, the package's dpkg
    status, DKMS's view: everything an upgrade from a package could change."""
    base = Path(f"/lib/modules/{bed.kver}")
    mods = {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(base.rglob(f"{MODULE}.ko*"))}
    dep = [ln for ln in (base / "modules.dep").read_text().splitlines() if MODULE in ln]
    dkms = subprocess.run(["dkms", "status", MODULE], capture_output=True, text=True,
                          check=False).stdout
    return {"modules": mods, "dep": dep, "dpkg": _dpkg_status(bed.env["DEB_NAME"]),
            "dkms": dkms}


def open_txns(bed: Bed) -> list[dict]:
    j = StateDir(Host("/", SubprocessRunner()), bed.env["HWMGR_STATE_DIR"]).read_journal()
    return [] if j is None else j.open_transactions()


def journal_size(bed: Bed) -> int:
    j = Path(bed.env["HWMGR_STATE_DIR"]) / "journal.json"
    return j.stat().st_size if j.exists() else 0


def test_upgrade_from_package_then_rollback_is_byte_identical(bed: Bed) -> None:
    before = fingerprint(bed)
    plan = hw(bed, "plan", "upgrade", MODULE, "--to", VERSION, "--package", bed.env["DEB"],
              "--json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    planned = [s.split(":")[0] for s in json.loads(plan.stdout)["data"]["steps"]]
    assert planned == STEPS
    assert fingerprint(bed) == before

    res = upgrade(bed, bed.env["DEB"])
    assert res.returncode == 0, res.stdout + res.stderr
    ran = [s["name"] for s in json.loads(res.stdout)["data"]["transaction"]["steps"]]
    assert ran == STEPS
    ko = Path(f"/lib/modules/{bed.kver}/updates/hwmgr/{MODULE}.ko")
    got = subprocess.run(["modinfo", "-k", bed.kver, "-F", "filename", MODULE],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert got == str(ko) and _dpkg_status(bed.env["DEB_NAME"]) == "installed"
    assert subprocess.run(["modinfo", "-F", "version", str(ko)], capture_output=True,
                          text=True, check=True).stdout.strip() == VERSION
    exp = json.loads((Path(bed.env["HWMGR_STATE_DIR"]) / "expectations" /
                      f"{MODULE}.json").read_text())
    assert exp["kernels"][bed.kver][MODULE]["path"] == str(ko)  # what hwmgr-verify checks

    rb = hw(bed, "rollback", MODULE, "--yes")
    assert rb.returncode == 0, rb.stdout + rb.stderr
    assert fingerprint(bed) == before

    # and the same through `rollback --to inbox`
    assert upgrade(bed, bed.env["DEB"]).returncode == 0
    rb = hw(bed, "rollback", MODULE, "--to", "inbox", "--yes")
    assert rb.returncode == 0, rb.stdout + rb.stderr
    assert fingerprint(bed) == before
    assert not open_txns(bed)


def _refused(bed: Bed, deb: Path, layer: bool = True) -> str:
    before, size = fingerprint(bed), journal_size(bed)
    res = hw(bed, "upgrade", MODULE, "--to", VERSION, "--package", str(deb), "--kernel",
             bed.kver, "--yes", layer=layer)
    assert res.returncode == EXIT_REFUSED, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "not recommended" not in ln]
    assert len(lines) == 1 and str(deb) in lines[0], res.stderr
    assert fingerprint(bed) == before and journal_size(bed) == size  # nothing changed
    return lines[0]


def test_tampered_package_is_refused(bed: Bed, tmp_path: Path) -> None:
    bad = tmp_path / Path(bed.env["DEB"]).name
    data = bytearray(Path(bed.env["DEB"]).read_bytes())
    data[-100] ^= 0xFF
    bad.write_bytes(bytes(data))
    assert "is not a package the catalog" in _refused(bed, bad)
    # the genuine file, but no layer recording it: refused too
    assert "is not a package the catalog" in _refused(bed, Path(bed.env["DEB"]), layer=False)


def test_hostile_contents_are_refused_even_when_pinned(bed: Bed, tmp_path: Path) -> None:
    """A .deb the catalog pins but that holds a file outside /lib/modules/K: refused by
    dpkg-deb -c before anything is installed."""
    root = tmp_path / "evil"
    subprocess.run(["dpkg-deb", "-R", bed.env["DEB"], str(root)], check=True)
    (root / "etc").mkdir()
    (root / "etc" / "evil.conf").write_text("x\n")
    evil = tmp_path / "evil.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(evil)],
                   check=True, capture_output=True)
    layer = json.loads(Path(bed.env["LAYER"]).read_text())
    entry = layer["drivers"][MODULE]["versions"][VERSION]["packages"][bed.kver]["deb"]
    entry.update(sha256=hashlib.sha256(evil.read_bytes()).hexdigest(),
                 size=evil.stat().st_size)
    pinned = tmp_path / "evil.catalog.json"
    pinned.write_text(json.dumps(layer))
    saved = bed.env["LAYER"]
    bed.env["LAYER"] = str(pinned)
    try:
        assert "member ./etc/ " in _refused(bed, evil)
    finally:
        bed.env["LAYER"] = saved


@pytest.mark.parametrize("phase", ["before", "after"])
@pytest.mark.parametrize("step", STEPS)
def test_crash_during_package_upgrade_then_recover(bed: Bed, step: str, phase: str) -> None:
    old = fingerprint(bed)
    res = upgrade(bed, bed.env["DEB"], env={"HWMGR_TEST_CRASH_AT": f"{step}:{phase}"})
    assert res.returncode == -9, (res.returncode, res.stderr)
    rec = hw(bed, "recover", "--json")
    assert rec.returncode == 0, rec.stderr
    state = json.loads(rec.stdout)["data"][0]["state"]
    if state == "rolled-back":
        assert fingerprint(bed) == old, "exactly the old state"
    else:
        assert state == "committed" and _dpkg_status(bed.env["DEB_NAME"]) == "installed"
        assert hw(bed, "rollback", MODULE, "--yes").returncode == 0
        assert fingerprint(bed) == old
    assert not open_txns(bed)


def test_package_over_a_dkms_upgrade_then_rollback(bed: Bed) -> None:
    """inbox → DKMS 1.0 (updates/dkms) → package 1.0_lab (updates/hwmgr: the DKMS file,
    which would compete, is displaced into the backup) → rollback: DKMS 1.0 byte for byte
    → rollback: as before the first upgrade."""
    before = fingerprint(bed)
    res = hw(bed, "upgrade", MODULE, "--to", "1.0", "--kernel", bed.kver, "--yes")
    assert res.returncode == 0, res.stdout + res.stderr
    on_dkms = fingerprint(bed)
    assert any("/updates/dkms/" in p for p in on_dkms["modules"])  # type: ignore[union-attr]
    res = upgrade(bed, bed.env["DEB"])
    assert res.returncode == 0, res.stdout + res.stderr
    mods = fingerprint(bed)["modules"]
    assert list(mods) == [f"/lib/modules/{bed.kver}/updates/hwmgr/{MODULE}.ko"]  # type: ignore
    assert hw(bed, "rollback", MODULE, "--yes").returncode == 0
    assert fingerprint(bed) == on_dkms
    assert hw(bed, "rollback", MODULE, "--yes").returncode == 0
    assert fingerprint(bed) == before
    assert not open_txns(bed)


@pytest.mark.parametrize("phase", ["before", "after"])
@pytest.mark.parametrize("step", ["backup", "restore", "arm"])
def test_crash_during_package_rollback_then_recover(bed: Bed, step: str, phase: str) -> None:
    before = fingerprint(bed)
    assert upgrade(bed, bed.env["DEB"]).returncode == 0
    new = fingerprint(bed)
    res = hw(bed, "rollback", MODULE, "--yes", env={"HWMGR_TEST_CRASH_AT": f"{step}:{phase}"})
    assert res.returncode == -9, (res.returncode, res.stderr)
    rec = hw(bed, "recover", "--json")
    assert rec.returncode == 0, rec.stderr
    state = json.loads(rec.stdout)["data"][0]["state"]
    if state == "rolled-back":  # the package is installed again, exactly as it was
        assert fingerprint(bed) == new
        assert hw(bed, "rollback", MODULE, "--yes").returncode == 0
    else:
        assert state == "committed"
    assert fingerprint(bed) == before
    assert not open_txns(bed)
