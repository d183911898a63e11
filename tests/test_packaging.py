"""hwmgr as users install it: the RPM asks for what setup.cfg installs, the wheel carries the
shipped catalog and recipes, and (slow) the built wheel installed into a clean venv of every
supported Python checks a fixture host from outside the checkout."""

from __future__ import annotations

import configparser
import json
import os
import re
import subprocess
import sys
import zipfile
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path

import pytest
from support import HOSTS, REPO

SETUP_CFG = REPO / "setup.cfg"
SPEC = REPO / "specs" / "hwmgr.spec"
SUPPORTED = ("3.9", "3.11", "3.13")  # RHEL 9, Debian 12, the newest
SHIPPED = ("catalogs/**/*", "drivers/**/*", "specs/driver-dkms.spec.in")


def _setup() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(SETUP_CFG)
    return cfg


def _lines(value: str) -> list[str]:
    return [ln.split("#")[0].strip() for ln in value.splitlines() if ln.split("#")[0].strip()]


def _canon(name: str) -> str:
    """PEP 503 name, as the RPM's python3dist() provides it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def install_requires() -> dict[str, str]:
    """setup.cfg's install_requires as {name: minimum version}; each must be `name>=X`."""
    out = {}
    for req in _lines(_setup()["options"]["install_requires"]):
        mo = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)", req)
        assert mo, f"setup.cfg install_requires {req!r}: this test reads only `name>=X.Y`"
        out[_canon(mo.group(1))] = mo.group(2)
    return out


def spec_requires() -> tuple[str | None, dict[str, str]]:
    """The spec's `python(abi) = X` and its python3.9dist(name) >= X requirements (the EL9
    branch's: the EL8 flavour carries two of them instead, tests/test_packages.py)."""
    python, dists = None, {}
    for line in SPEC.read_text().splitlines():
        mo = re.match(r"Requires:\s*(.+?)\s*$", line)
        if not mo:
            continue
        req = mo.group(1)
        py = re.fullmatch(r"python\(abi\)\s*=\s*([0-9.]+)", req)
        dist = re.fullmatch(r"python3\.9dist\(([^)]+)\)\s*>=\s*([0-9.]+)", req)
        if py:
            python = py.group(1)
        elif dist:
            dists[_canon(dist.group(1))] = dist.group(2)
        else:
            assert not req.startswith("python3"), f"hwmgr.spec: unversioned {req!r}"
    return python, dists


def test_rpm_requires_what_setup_cfg_installs() -> None:
    python, dists = spec_requires()
    requires = install_requires()
    assert requires, "setup.cfg lists no install_requires"
    assert dists == requires, f"hwmgr.spec Requires {dists} != setup.cfg {requires}"
    minimum = _setup()["options"]["python_requires"].strip()
    assert minimum == f">={python}", f"hwmgr.spec python(abi) = {python}, setup.cfg {minimum}"
    assert minimum == f">={SUPPORTED[0]}", "the oldest leg of make test is not the minimum"


def el9_pins() -> dict[str, str]:
    """specs/el9-constraints.txt: {name: version} of what RHEL 9 and EPEL 9 ship."""
    pins = {}
    for line in _lines((REPO / "specs" / "el9-constraints.txt").read_text()):
        name, _, version = line.partition("==")
        pins[_canon(name)] = version
    return pins


def _vt(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def test_lower_bounds_install_on_rhel9() -> None:
    """Every install_requires is pinned for the 3.9 leg (RHEL 9's version) and its lower
    bound is not above that version: pip and dnf accept what RHEL 9 has."""
    pins = el9_pins()
    for name, minimum in install_requires().items():
        assert name in pins, f"{name}: no RHEL 9 version in specs/el9-constraints.txt"
        assert _vt(minimum) <= _vt(pins[name]), f"{name}>={minimum}, RHEL 9 has {pins[name]}"


def _data_files() -> dict[str, list[str]]:
    section = _setup()["options.data_files"]
    return {target: _lines(globs) for target, globs in section.items()}


def test_wheel_data_files_cover_every_shipped_file() -> None:
    """Each file of the shipped catalog, recipes and spec template is installed, at its path
    under <prefix>/share/hwmgr (where config.shipped_dirs looks)."""
    placed = {}
    for target, globs in _data_files().items():
        for pattern in globs:
            for f in REPO.glob(pattern):
                if f.is_file():
                    placed[f.relative_to(REPO).as_posix()] = f"{target}/{f.name}"
    shipped = sorted({f.relative_to(REPO).as_posix() for pattern in SHIPPED
                      for f in REPO.glob(pattern) if f.is_file()})
    assert len(shipped) > 5
    missing = [f for f in shipped if f not in placed]
    assert not missing, f"add to setup.cfg [options.data_files]: {missing}"
    wrong = {f: placed[f] for f in shipped if placed[f] != f"share/hwmgr/{f}"}
    assert not wrong, f"installed at the wrong place: {wrong}"


def test_min_python_check_catches_a_runtime_union() -> None:
    """scripts/check-min-python (make check's version gate) catches raid.py's old 3.9 crash
    and leaves annotations, bit flags and subscripts alone."""
    loader = SourceFileLoader("check_min_python", str(REPO / "scripts" / "check-min-python"))
    mod = module_from_spec(spec_from_loader(loader.name, loader))
    loader.exec_module(mod)
    crash = ("from __future__ import annotations\n"
             "Found = tuple[str | None, str | None]\n"
             "def f(x: int | None) -> dict[str, int] | None: ...\n"
             "y: list[str] | None = None\n"
             "flags = os.O_RDONLY | os.O_CLOEXEC | a[1]\n")
    assert [u.split(":")[:2] for u in mod.runtime_unions(crash, "m.py")] == [
        ["m.py", "2"], ["m.py", "2"]]
    # without postponed annotations, an annotation is evaluated at definition time too
    assert len(mod.runtime_unions("def f(x: int | None): ...\n", "m.py")) == 1


# ------------------------------------------------------------------ the wheel, installed
def find_python(version: str) -> str:
    """The interpreter scripts/find-python finds; the oldest must exist (fail, never skip)."""
    res = subprocess.run([str(REPO / "scripts" / "find-python"), version], capture_output=True,
                         text=True, check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                          str(REPO)], capture_output=True, text=True, check=False, timeout=600)
    assert res.returncode == 0, res.stderr
    (whl,) = out.glob("hwmgr-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_carries_the_catalog_and_recipes(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    data = {n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n}
    assert "share/hwmgr/catalogs/hwmgr-catalog.json" in data
    assert "share/hwmgr/drivers/be2net/recipe.json" in data
    assert not [n for n in names if n.startswith(("tests/", "catalogs/", "drivers/"))]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("version", SUPPORTED)
def test_installed_wheel_checks_a_host(version: str, wheel: Path, tmp_path: Path) -> None:
    """pip install of the wheel into a clean venv (dependencies from the index, through pip's
    cache), then check, inventory and fleet-report run from a directory outside the checkout."""
    # a clean environment: no PYTHONPATH to this checkout (pip would take it for installed);
    # pip keeps its own cache, hwmgr gets throw-away dirs
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HWMGR_") and k not in ("PYTHONPATH", "PYTHONHOME")}
    run_env = dict(env, XDG_CACHE_HOME=str(tmp_path / "cache"),
                   HWMGR_STATE_DIR=str(tmp_path / "state"),
                   HWMGR_CACHE_DIR=str(tmp_path / "dl"),
                   HWMGR_CONFIG=str(tmp_path / "none.json"),
                   HWMGR_SITE_CATALOG_DIR=str(tmp_path / "catalog.d"),
                   HWMGR_TRUSTED_KEYS_DIR=str(tmp_path / "trusted.gpg.d"))

    venv = tmp_path / "venv"
    subprocess.run([find_python(version), "-m", "venv", str(venv)], check=True, timeout=300,
                   env=env)
    res = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                          "--disable-pip-version-check", str(wheel)],
                         capture_output=True, text=True, check=False, timeout=600, env=env)
    assert res.returncode == 0, res.stderr
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def hwmgr(*args: str) -> tuple[int, dict]:
        run = subprocess.run([str(venv / "bin" / "hwmgr"), *args, "--json"], cwd=outside,
                             env=run_env, capture_output=True, text=True, check=False, timeout=120)
        assert run.stdout, run.stderr
        return run.returncode, json.loads(run.stdout)

    rc, doc = hwmgr("check", "--root", str(HOSTS / "seed002-before"))
    assert rc == 5, doc
    drift = [f for f in doc["data"]["findings"] if f["status"] == "drift"]
    assert doc["data"]["catalog_version"] and len(drift) >= 10, doc["data"]["summary"]
    assert any(f["item"] == "channels.combined" and f["actual"] == 8 for f in drift)

    rc, doc = hwmgr("inventory", "--root", str(HOSTS / "seed000-ustor"))
    assert rc <= 5 and doc["status"] == "ok", doc
    be2net = [d for d in doc["data"]["devices"] if d["driver"] == "be2net"]
    assert be2net and all(d["driver_version"] == "4.1.307r"
                          and d["catalog"]["status"] == "known-bad" for d in be2net), be2net
    # the fleet page: its template is package data, Jinja2 came from the index as a dependency
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(hwmgr("check", "--root", str(HOSTS / "seed002-before"),
                                      "--root", str(HOSTS / "seed002-after"))[1]))
    rc, doc = hwmgr("fleet-report", "--results", str(batch), "--out", str(tmp_path / "report"))
    assert rc == 5 and doc["data"]["summary"]["hosts"] == 2, doc
    assert "<h1>Fleet compliance</h1>" in (tmp_path / "report/fleet-report.html").read_text()
    # the catalog and recipes found are the venv's share/hwmgr, not this checkout's
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "from hwmgr.config import shipped_dirs as s; "
         "print(s('catalogs')[0], s('drivers')[0])"],
        cwd=outside, env=run_env, capture_output=True, text=True, check=True).stdout.split()
    assert where == [str(venv / "share/hwmgr/catalogs"), str(venv / "share/hwmgr/drivers")]
