"""`hwmgr recipe check` and `recipe list` (issue 23): a vendor-shaped SRPM built with a driver's
recipe in scratch DKMS trees, with the real rpm, dkms and kernel headers. A good SRPM reports
its module (version, vermagic for the target kernel); a broken recipe and a broken source name
the failing make line, the first error and the log's end, and keep the log; nothing under
/usr/src, /var/lib/dkms or /lib/modules changes. The make.log reading is unit-tested first."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
from support import REPO, python_runs_as_nobody, run_cli
from support import srpmfactory as factory

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.buildlog import make_command, read_facts
from hwmgr.lifecycle.builds.headers import kernels_with_headers

KERNELS = kernels_with_headers(Host("/", SubprocessRunner()))
VERSION = f"0.5.{os.getpid()}"
BUILDS = pytest.mark.skipif(
    not KERNELS or not shutil.which("dkms") or not shutil.which("rpmbuild")
    or os.geteuid() != 0, reason="needs root, dkms, rpmbuild and kernel headers")


def test_make_command_and_facts_from_dkms_output() -> None:
    out = ("Cleaning build area...\nmake -j2 KERNELRELEASE=6.1.0-56-amd64 -C "
           "/lib/modules/6.1.0-56-amd64/build M=/x/build modules.......(bad exit status: 2)\n"
           "Error! Bad return status for module build on kernel: 6.1.0-56-amd64 (x86_64)\n")
    assert make_command(out) == ("make -j2 KERNELRELEASE=6.1.0-56-amd64 -C "
                                 "/lib/modules/6.1.0-56-amd64/build M=/x/build modules")
    assert make_command("nothing like it\n") == ""
    # a line not starting with `make` is run as written (DKMS rewrites only `make ...`)
    assert make_command("Cleaning build area...(bad exit status: 2)\n/usr/bin/make "
                        "BUILD_KERNEL=6.1.0-56-amd64.....(bad exit status: 2)\n") == (
        "/usr/bin/make BUILD_KERNEL=6.1.0-56-amd64")
    log = "\n".join([f"line {i}" for i in range(30)] + [
        "src/kcompat.c:12:3: error: unknown type name 'foo'",
        "make[1]: *** [Makefile.build:255: kcompat.o] Error 1", ""])
    facts = read_facts(log)
    assert facts.first_error == "src/kcompat.c:12:3: error: unknown type name 'foo'"
    assert len(facts.tail) == 20 and facts.tail[-1].startswith("make[1]: ***")
    assert read_facts("all good\n").first_error == ""
    # a vendor Makefile's "***" banner is not the error; the compiler's is (Intel's common.mk)
    banner = ("*** The target kernel has CONFIG_MODULE_SIG_ALL enabled, but\n"
              "igb_main.c:1144:9: error: too many arguments to function 'netif_napi_add'\n"
              "make: *** [Makefile:87: default] Error 2\n")
    assert read_facts(banner).first_error.startswith("igb_main.c:1144:9: error:")
    assert read_facts("Makefile:3: *** missing separator.  Stop.\n").first_error == (
        "Makefile:3: *** missing separator.  Stop.")


def _ours() -> list[str]:
    """Anything of this test's version in DKMS's or the kernels' trees (other tests on the
    machine may use them meanwhile, so only our own version's traces are looked for)."""
    found = []
    for top in ("/usr/src", "/var/lib/dkms", *(f"/lib/modules/{k}" for k in KERNELS)):
        for where, dirs, files in os.walk(top):  # errors (a dir going away) are skipped
            dirs[:] = [d for d in dirs if not d.startswith("linux-")]
            found += [f"{where}/{n}" for n in dirs + files if VERSION in n]
    return found


def _check(tmp: Path, *args: str, env: dict[str, str] | None = None):
    res = run_cli("recipe", "check", *args, "--state-dir", str(tmp / "state"), "--json",
                  env=env, timeout=300)
    return res, json.loads(res.stdout)


@pytest.fixture(scope="module")
def srpm() -> Iterator[Path]:
    """hwmgrtest-VERSION-1.src.rpm, built once, in a dir any user may read."""
    public = Path(tempfile.mkdtemp(prefix="hwmgr-recipe-"))
    try:
        public.chmod(0o755)
        yield factory.build_srpm("hwmgrtest", VERSION, public)
    finally:
        shutil.rmtree(public, ignore_errors=True)


@pytest.mark.slow  # a real DKMS build (2-5 s)
@BUILDS
def test_good_srpm_reports_its_module_for_every_kernel_with_headers(
        srpm: Path, tmp_path: Path) -> None:
    res, doc = _check(tmp_path, "hwmgrtest", "--file", str(srpm))
    assert res.returncode == 0, res.stderr
    data = doc["data"]
    assert data["version"] == VERSION  # read from the SRPM: no catalog names it
    # the default targets are the kernels with headers, whatever `uname -r` says
    assert [k["kernel"] for k in data["kernels"]] == KERNELS
    for k in data["kernels"]:
        assert k["ok"] and not k["problems"]
        (mod,) = k["modules"]
        assert (mod["name"], mod["file"], mod["version"]) == ("hwmgrtest", "hwmgrtest.ko",
                                                              VERSION)
        assert mod["vermagic"].split()[0] == k["kernel"]
        assert len(mod["srcversion"]) > 10
    assert _ours() == [], "recipe check wrote into DKMS's or a kernel's tree"
    assert list((tmp_path / "state" / "work").iterdir()) == [], "scratch tree left behind"
    human = run_cli("recipe", "check", "hwmgrtest", "--file", str(srpm), "--kernel", KERNELS[0],
                    "--state-dir", str(tmp_path / "state"), timeout=300)
    assert human.returncode == 0
    assert f"kernel {KERNELS[0]}: built" in human.stdout
    assert f"hwmgrtest.ko  version {VERSION}  vermagic {KERNELS[0]} " in human.stdout


def _broken_recipe(tmp: Path, make: str) -> Path:
    """A site drivers dir whose hwmgrtest recipe runs `make` instead of the shipped line."""
    site = tmp / "site-drivers"
    shutil.copytree(REPO / "drivers" / "hwmgrtest", site / "hwmgrtest")
    path = site / "hwmgrtest" / "recipe.json"
    doc = json.loads(path.read_text())
    doc["build"]["make"] = make
    path.write_text(json.dumps(doc))
    return site


@pytest.mark.slow  # a real DKMS build (2-5 s)
@BUILDS
def test_broken_recipe_names_the_failing_make_line_and_keeps_the_log(
        srpm: Path, tmp_path: Path) -> None:
    site = _broken_recipe(tmp_path, "make -C ${kernel_source_dir} M=${dkms_tree}/"
                          "${PACKAGE_NAME}/${PACKAGE_VERSION}/build modules_nosuchtarget")
    kver = KERNELS[0]
    res, doc = _check(tmp_path, "hwmgrtest", "--file", str(srpm), "--kernel", kver,
                      env={"HWMGR_DRIVERS_DIR": str(site)})
    assert res.returncode == 1, res.stderr
    assert doc["data"]["recipe"] == str(site / "hwmgrtest" / "recipe.json")
    (k,) = doc["data"]["kernels"]
    fail = k["failure"]
    assert fail["make_line"].startswith("make -j") and f"KERNELRELEASE={kver}" in fail[
        "make_line"] and fail["make_line"].endswith("modules_nosuchtarget")
    assert "No rule to make target 'modules_nosuchtarget'" in fail["first_error"]
    assert fail["log"] == str(tmp_path / "state" / "logs" /
                              f"recipe-check-hwmgrtest-{VERSION}-{kver}.make.log")
    kept = Path(fail["log"]).read_text()
    assert "modules_nosuchtarget" in kept and fail["log_tail"][-1] in kept
    (err,) = doc["errors"]
    assert "running `make -j" in err and "modules_nosuchtarget`" in err
    assert err.endswith(f"whole log kept in {fail['log']}")
    assert _ours() == []
    human = run_cli("recipe", "check", "hwmgrtest", "--file", str(srpm), "--kernel", kver,
                    "--state-dir", str(tmp_path / "state"),
                    env={"HWMGR_DRIVERS_DIR": str(site)}, timeout=300)
    assert human.returncode == 1
    assert f"kernel {kver}: FAILED" in human.stdout
    assert "make line: make -j" in human.stdout
    assert "    | " in human.stdout and "lines of make.log" in human.stdout


@pytest.mark.slow  # a real DKMS build (2-5 s)
@BUILDS
def test_broken_source_names_the_compiler_error(tmp_path: Path) -> None:
    srpm = factory.build_srpm("hwmgrtest", VERSION, tmp_path / "srpm", broken=True)
    res, doc = _check(tmp_path, "hwmgrtest", "--file", str(srpm), "--kernel", KERNELS[0])
    assert res.returncode == 1
    fail = doc["data"]["kernels"][0]["failure"]
    assert "hwmgrtest.c:" in fail["first_error"] and "error:" in fail["first_error"]
    assert any("this_does_not_compile" in line for line in fail["log_tail"])


@BUILDS
def test_refusals_name_the_problem_before_building(srpm: Path, tmp_path: Path) -> None:
    """No headers, another package, no recipe: one line, its code, no scratch tree made."""
    site = _broken_recipe(tmp_path, "make modules")  # a recipe for another package name
    doc = json.loads((site / "hwmgrtest" / "recipe.json").read_text())
    doc["source"]["srpm_name"] = "be2net"
    (site / "hwmgrtest" / "recipe.json").write_text(json.dumps(doc))
    res, doc = _check(tmp_path, "hwmgrtest", "--file", str(srpm),
                      env={"HWMGR_DRIVERS_DIR": str(site)})
    assert res.returncode == 9
    assert doc["errors"] == [f"{srpm.name}: package name is 'hwmgrtest', recipe 'hwmgrtest' "
                             "expects 'be2net' (source.srpm_name)"]
    own = srpm
    res, doc = _check(tmp_path, "hwmgrtest", "--file", str(own), "--kernel", "9.9.9-nohdr")
    assert res.returncode == 3
    assert "kernel headers for 9.9.9-nohdr are not installed" in doc["errors"][0]
    assert "install linux-headers-9.9.9-nohdr" in doc["errors"][0]
    res, doc = _check(tmp_path, "nosuchdrv", "--file", str(own))
    assert res.returncode == 3
    assert doc["errors"][0].startswith("no build recipe for driver 'nosuchdrv' (looked in ")
    assert doc["errors"][0].endswith("; to write one see docs/recipes.md")
    assert not (tmp_path / "state" / "work").exists()


def test_recipe_list_names_each_dir_and_the_shadowed(tmp_path: Path) -> None:
    site = _broken_recipe(tmp_path, "make modules")
    (site / "mydrv").mkdir()
    (site / "mydrv" / "recipe.json").write_text("{")
    res = run_cli("recipe", "list", "--json", env={"HWMGR_DRIVERS_DIR": str(site)})
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["data"]["recipes"]
    mine = [(r["driver"], r["dir"], r["used"]) for r in rows if r["driver"] == "hwmgrtest"]
    assert mine == [("hwmgrtest", str(site), True), ("hwmgrtest", str(REPO / "drivers"), False)]
    bad = next(r for r in rows if r["driver"] == "mydrv")
    assert bad["error"].startswith(f"{site / 'mydrv' / 'recipe.json'}: not valid JSON")
    human = run_cli("recipe", "list", env={"HWMGR_DRIVERS_DIR": str(site)})
    assert "(shadowed by an earlier dir)" in human.stdout and "INVALID" in human.stdout


@BUILDS
@pytest.mark.skipif(not shutil.which("runuser") or not python_runs_as_nobody(),
                    reason="needs runuser and a Python that starts as nobody")
def test_an_unwritable_state_dir_is_exit_13_in_one_line(srpm: Path) -> None:
    """A user who cannot write the state dir gets one line naming it, not a traceback."""
    res = subprocess.run(
        ["runuser", "-u", "nobody", "--", sys.executable, "-m", "hwmgr", "recipe", "check",
         "hwmgrtest", "--file", str(srpm), "--state-dir", "/var/lib/hwmgr-test-none"],
        capture_output=True, text=True, check=False, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd="/")
    assert res.returncode == 13, res.stderr
    assert res.stderr == ("hwmgr recipe: error: /var/lib/hwmgr-test-none/work: cannot make the "
                          "scratch DKMS trees (Permission denied): run as root, or pass "
                          "--state-dir DIR you can write\n")
