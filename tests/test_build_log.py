"""Issue 23: a DKMS build that fails inside `hwmgr upgrade` keeps its make.log. The last lines
are printed with the error, the whole log is copied into the state dir before the undo deletes
the DKMS tree, the journal's build step names the copy (`history --steps` shows it), and the
undo still puts everything else back: the module the host had, DKMS's records, /usr/src."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import run_cli
from support.lifecycle_env import MODULE, Bed, cleanup_dkms, make_bed, write_catalog
from support.srpmfactory import build_srpm
from test_lifecycle import host_fingerprint, module_state

pytestmark = pytest.mark.slow  # two DKMS builds and an install of the test module

# versions of our own: other test files build hwmgrtest 1.0/1.1 on the same machine
GOOD, BROKEN = f"7.{os.getpid()}", f"7.{os.getpid()}.1"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("buildlog")
    b, srv = make_bed(tmp, (GOOD,))
    b.srpms[BROKEN] = build_srpm(MODULE, BROKEN, tmp / "served", broken=True)
    write_catalog(b.catalog, b.url, b.srpms)
    cleanup_dkms(b.kver)
    yield b
    srv.shutdown()
    cleanup_dkms(b.kver)


def hw(bed: Bed, *args: str, **env: str):
    return run_cli(*args, env={**bed.env, **env}, timeout=300)


def test_failed_build_keeps_its_log_and_the_undo_restores_the_rest(bed: Bed) -> None:
    up = hw(bed, "upgrade", MODULE, "--to", GOOD, "--kernel", bed.kver, "--yes",
            "--catalog", str(bed.catalog))
    assert up.returncode == 0, up.stderr
    before = host_fingerprint(bed)
    assert before["module"][0] == GOOD

    res = hw(bed, "upgrade", MODULE, "--to", BROKEN, "--kernel", bed.kver, "--yes", "--json",
             "--catalog", str(bed.catalog))
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    txn = doc["data"]["transaction"]
    assert txn["state"] == "rolled-back"
    kept = Path(bed.env["HWMGR_STATE_DIR"]) / "logs" / (
        f"{txn['id']}-{MODULE}-{BROKEN}-{bed.kver}.make.log")
    # the error names the make line, the compiler's first error and the kept copy
    (err,) = doc["errors"]
    assert f"dkms build of {MODULE}/{BROKEN} for kernel {bed.kver} failed (exit 10)" in err
    assert "running `make -j" in err and f"KERNELRELEASE={bed.kver}" in err
    assert f"{MODULE}.c:" in err and "error:" in err
    assert err.endswith(f"whole log kept in {kept}")
    # the last lines went to stderr before the undo ran
    assert "dkms build failed; last " in res.stderr and str(kept) in res.stderr
    assert "  | " in res.stderr and "this_does_not_compile" in res.stderr
    # the whole log outlives the DKMS tree the undo deleted
    assert "this_does_not_compile" in kept.read_text()
    assert not Path(f"/var/lib/dkms/{MODULE}/{BROKEN}").exists()
    assert not Path(f"/usr/src/{MODULE}-{BROKEN}").exists()
    # and everything else is as it was
    assert host_fingerprint(bed) == before
    assert module_state(bed) == before["module"]

    hist = hw(bed, "history", "--steps", "--json")
    steps = next(t for t in json.loads(hist.stdout)["data"]["transactions"]
                 if t["id"] == txn["id"])["steps"]
    build = next(s for s in steps if s["name"] == "dkms-build")
    assert build["state"] == "undone" and build["data"]["make_log"] == str(kept)
    assert build["data"]["kernel"] == bed.kver
    assert any("this_does_not_compile" in line for line in build["data"]["log_tail"])
    human = hw(bed, "history", "--steps", COLUMNS="300")  # wide enough for the whole path
    assert f"log {kept}" in human.stdout, human.stdout

    rb = hw(bed, "rollback", MODULE, "--to", "inbox", "--yes")
    assert rb.returncode == 0, rb.stderr
    assert subprocess.run(["dkms", "status", MODULE], capture_output=True, text=True,
                          check=False).stdout.strip() == ""
