"""Driver lifecycle with real rpm, dkms, kernel headers and HTTP: the full upgrade/rollback
cycle, refusals that change nothing, and a SIGKILL at every step boundary + `hwmgr recover`.

Modules are built for the installed linux-headers kernel (not the running one) and installed
into /lib/modules/<headers-kver>/updates/dkms, which is safe on CI.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from lifecycle_env import MODULE, Bed, cleanup_dkms, make_bed, same_serial, write_catalog
from support import run_cli

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.transaction.state import StateDir

pytestmark = pytest.mark.slow  # DKMS builds and installs of the test module

UPGRADE_STEPS = ["fetch", "unpack", "dkms-add", "dkms-build", "backup", "install", "initramfs",
                 "arm"]
ROLLBACK_STEPS = ["backup", "restore", "arm"]


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("lifecycle")
    b, srv = make_bed(tmp)
    cleanup_dkms(b.kver)
    yield b
    srv.shutdown()
    cleanup_dkms(b.kver)


def hw(bed: Bed, *args: str, env: dict[str, str] | None = None):
    return run_cli(*args, "--catalog", str(bed.catalog),
                   env={**bed.env, **(env or {})}, timeout=300) if args[0] in (
        "upgrade", "plan", "fetch") else run_cli(*args, env={**bed.env, **(env or {})},
                                                 timeout=300)


def module_state(bed: Bed) -> tuple[str | None, str | None]:
    """(version, sha256) of what modinfo resolves hwmgrtest to for the headers kernel."""
    res = subprocess.run(["modinfo", "-k", bed.kver, "-F", "filename", MODULE],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return None, None
    path = Path(res.stdout.strip())
    ver = subprocess.run(["modinfo", "-F", "version", str(path)], capture_output=True,
                         text=True, check=False).stdout.strip()
    return ver, hashlib.sha256(path.read_bytes()).hexdigest()


def host_fingerprint(bed: Bed) -> dict[str, object]:
    """Everything an upgrade could change on the host, for 'nothing changed' checks."""
    dkms = subprocess.run(["dkms", "status", MODULE], capture_output=True, text=True,
                          check=False).stdout
    mods = sorted(str(p) for p in Path(f"/lib/modules/{bed.kver}").rglob(f"{MODULE}.ko*"))
    src = sorted(p.name for p in Path("/usr/src").glob(f"{MODULE}-*"))
    return {"dkms": dkms, "modules": mods, "src": src, "module": module_state(bed)}


def upgrade(bed: Bed, version: str, **kw: str):
    return hw(bed, "upgrade", MODULE, "--to", version, "--kernel", bed.kver, "--yes", **kw)


def open_txns(bed: Bed) -> list[dict]:
    state = StateDir(Host("/", SubprocessRunner()), bed.env["HWMGR_STATE_DIR"])
    j = state.read_journal()
    return [] if j is None else j.open_transactions()


def planned_and_ran(doc: dict) -> list[str]:
    """The step names the plan listed, once checked equal to the steps the journal ran."""
    planned = [line.split(":")[0] for line in doc["data"]["plan"]["steps"]]
    assert planned == [s["name"] for s in doc["data"]["transaction"]["steps"]]
    return planned


def test_full_cycle(bed: Bed) -> None:
    assert module_state(bed) == (None, None)
    res = upgrade(bed, "1.0")
    assert res.returncode == 0, res.stderr
    # not a terminal: one quiet log line per event on stderr, stdout keeps the result
    assert "step fetch: start" in res.stderr and f"for {bed.kver}: " in res.stderr
    assert "committed" in res.stdout
    v10 = module_state(bed)
    assert v10[0] == "1.0"
    # DKMS signed it (sign-file) with the openssl-made key HWMGR_SIGN_KEY/CERT name: modinfo
    # reads that key's subject and serial back from the module's signature
    signed = {f: subprocess.run(["modinfo", "-k", bed.kver, "-F", f, MODULE], capture_output=True,
                                text=True, check=True).stdout.strip()
              for f in ("signer", "sig_key")}
    assert signed["signer"] == bed.mok_cn and same_serial(signed["sig_key"], bed.mok_serial), \
        (signed, bed.mok_serial)
    assert "installed" in host_fingerprint(bed)["dkms"]
    # another hwmgr holds the state dir's lock: the rollback is refused, nothing changes
    before = host_fingerprint(bed)
    state_dir = bed.env["HWMGR_STATE_DIR"]
    held = StateDir(Host("/", SubprocessRunner(), writable=[state_dir]), state_dir)
    with held.lock(command="test_full_cycle"):
        res = hw(bed, "rollback", MODULE, "--yes")
    held.close()
    assert res.returncode == 10 and "locked by pid" in res.stderr, res.stderr
    assert host_fingerprint(bed) == before and module_state(bed) == v10
    # rollback to what was there: no module at all
    res = hw(bed, "rollback", MODULE, "--yes")
    assert res.returncode == 0, res.stderr
    assert module_state(bed) == (None, None)
    assert host_fingerprint(bed)["src"] == []
    # upgrade again, then to 1.1, then roll back to the previous *vendor* version
    assert upgrade(bed, "1.0").returncode == 0
    v10 = module_state(bed)
    res = hw(bed, "upgrade", MODULE, "--to", "1.1", "--kernel", bed.kver, "--yes", "--json")
    assert res.returncode == 0, res.stderr
    assert module_state(bed)[0] == "1.1"
    assert planned_and_ran(json.loads(res.stdout)) == UPGRADE_STEPS
    res = hw(bed, "rollback", MODULE, "--yes", "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 0 and doc["data"]["plan"]["to_version"] == "1.0"
    assert planned_and_ran(doc) == ROLLBACK_STEPS
    assert module_state(bed) == v10, "the 1.0 .ko must come back byte for byte"
    # and finally to the inbox state
    assert hw(bed, "rollback", MODULE, "--yes", "--to", "inbox").returncode == 0
    assert module_state(bed) == (None, None)
    assert hw(bed, "rollback", MODULE, "--yes").returncode == 4  # nothing left to undo
    rc, hist = 0, json.loads(hw(bed, "history", MODULE, "--json").stdout)
    kinds = [(t["kind"], t["version"], t["state"]) for t in hist["data"]["transactions"]]
    assert kinds[:6] == [("rollback", "inbox", "committed"), ("rollback", "1.0", "committed"),
                         ("upgrade", "1.1", "committed"), ("upgrade", "1.0", "committed"),
                         ("rollback", "inbox", "committed"), ("upgrade", "1.0", "committed")]
    assert rc == 0
    # backups are never deleted by upgrades: the 1.0 module saved before 1.1 is still there
    backups = list(Path(bed.env["HWMGR_STATE_DIR"], "backups").rglob(f"{MODULE}.ko"))
    assert any(hashlib.sha256(p.read_bytes()).hexdigest() == v10[1] for p in backups)
    assert not open_txns(bed)


def _variant(bed: Bed, tmp: Path, **extra: dict) -> Path:
    return write_catalog(tmp / "variant.json", bed.url, bed.srpms, **extra)


@pytest.mark.parametrize(
    "case, rc, fragment",
    [
        ("known-bad", 9, "known-bad"),
        ("not-in-catalog", 3, "not in the catalog"),
        ("wrong-kernel", 9, "is not for kernel"),
        ("no-headers", 9, "linux-headers-9.9.9-hwmgr"),
        ("bad-checksum", 1, "sha256"),
        ("unverified-source", 9, "verified"),
        ("locked", 10, "locked by pid"),
        ("no-space", 9, "not enough space in the state dir"),
    ],
)
def test_refusals_change_nothing(bed: Bed, tmp_path: Path, case: str, rc: int,
                                 fragment: str) -> None:
    before = host_fingerprint(bed)
    version, kernel, catalog = "1.0", bed.kver, bed.catalog
    if case == "known-bad":
        catalog = _variant(bed, tmp_path, **{"1.0": {"status": "known-bad"}})
    elif case == "not-in-catalog":
        version = "7.7"
    elif case == "wrong-kernel":
        catalog = _variant(bed, tmp_path, **{"1.0": {"kernels": ["2.6.32-*.el6.x86_64"]}})
    elif case == "no-headers":
        kernel = "9.9.9-hwmgr"
    elif case == "bad-checksum":
        data = json.loads(bed.catalog.read_text())
        data["drivers"][MODULE]["versions"]["1.0"]["source"]["sha256"] = "0" * 64
        catalog = tmp_path / "bad.json"
        catalog.write_text(json.dumps(data))
    elif case == "unverified-source":
        data = json.loads(bed.catalog.read_text())
        src = data["drivers"][MODULE]["versions"]["1.0"]["source"]
        del src["sha256"], src["size"]
        src["verified"] = False
        catalog = tmp_path / "unverified.json"
        catalog.write_text(json.dumps(data))
    holder = None
    env = dict(bed.env)
    small = tmp_path / "small"
    if case == "no-space":  # a real, nearly full filesystem as the state dir
        small.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(small)],
                       check=True)
        env["HWMGR_STATE_DIR"] = str(small / "state")
    if case == "locked":
        holder = subprocess.Popen(
            ["python3", "-c", (
                "import sys,time; sys.path.insert(0, '.');"
                "from hwmgr.host.seam import Host; from hwmgr.host.runner import SubprocessRunner;"
                "from hwmgr.transaction.state import StateDir;"
                f"d={bed.env['HWMGR_STATE_DIR']!r};"
                "s=StateDir(Host('/', SubprocessRunner(), writable=[d]), d);"
                "l=s.lock('hwmgr upgrade hwmgrtest 1.0'); l.acquire(); print('held', flush=True);"
                "time.sleep(60)")],
            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
        assert holder.stdout.readline().strip() == "held"
    try:
        res = run_cli("upgrade", MODULE, "--to", version, "--kernel", kernel, "--yes",
                      "--catalog", str(catalog), env=env, timeout=300)
        if case == "no-space":
            assert not any(small.iterdir()), "refused before writing anything"
    finally:
        if holder:
            holder.kill()
            holder.wait()
        if case == "no-space":
            subprocess.run(["umount", str(small)], check=False)
    assert res.returncode == rc, (res.stdout, res.stderr)
    assert fragment in res.stderr + res.stdout
    assert "Traceback" not in res.stderr
    assert host_fingerprint(bed) == before
    assert not open_txns(bed)


def _reset_to(bed: Bed, version: str) -> None:
    """Bring the host to exactly `version` of the test module via hwmgr itself."""
    assert not open_txns(bed)
    while module_state(bed)[0] not in (None,):
        if module_state(bed)[0] == version:
            return
        assert hw(bed, "rollback", MODULE, "--yes").returncode == 0
    assert upgrade(bed, version).returncode == 0


@pytest.mark.parametrize("phase", ["before", "after"])
@pytest.mark.parametrize("step", UPGRADE_STEPS)
def test_crash_during_upgrade_then_recover(bed: Bed, step: str, phase: str) -> None:
    _reset_to(bed, "1.0")
    old = host_fingerprint(bed)
    res = upgrade(bed, "1.1", env={"HWMGR_CRASH_AT": f"{step}:{phase}"})
    assert res.returncode == -9, (res.returncode, res.stderr)
    assert open_txns(bed), "the killed transaction is left open"
    rec = hw(bed, "recover", "--json")
    assert rec.returncode == 0, rec.stderr
    states = [r["state"] for r in json.loads(rec.stdout)["data"]]
    assert states and states[0] in ("committed", "rolled-back")
    ver, sha = module_state(bed)
    if states[0] == "rolled-back":
        assert host_fingerprint(bed) == old, "exactly the old state"
    else:
        assert ver == "1.1" and sha is not None, "exactly the new state"
        # past the commit point the old .ko must still be restorable
        assert hw(bed, "rollback", MODULE, "--yes").returncode == 0
        assert host_fingerprint(bed) == old
    assert not open_txns(bed)


@pytest.mark.parametrize("phase", ["before", "after"])
@pytest.mark.parametrize("step", ROLLBACK_STEPS)
def test_crash_during_rollback_then_recover(bed: Bed, step: str, phase: str) -> None:
    _reset_to(bed, "1.0")
    assert upgrade(bed, "1.1").returncode == 0
    new = host_fingerprint(bed)
    res = hw(bed, "rollback", MODULE, "--yes", env={"HWMGR_CRASH_AT": f"{step}:{phase}"})
    assert res.returncode == -9, (res.returncode, res.stderr)
    rec = hw(bed, "recover", "--json")
    assert rec.returncode == 0, rec.stderr
    state = json.loads(rec.stdout)["data"][0]["state"]
    if state == "rolled-back":
        assert host_fingerprint(bed) == new
    else:
        assert state == "committed" and module_state(bed)[0] == "1.0"
    assert not open_txns(bed)
