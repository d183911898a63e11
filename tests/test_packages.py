"""`make packages` end to end (scripts/build-packages, the real rpmbuild, dpkg-deb, rpmlint,
lintian and apt-get): the EL9 and EL8 RPMs require Python 3.9 and nothing else of Python's,
carry the man page, completions, kernel hook, units and /etc/hwmgr/catalog.d but not the test
recipe; the .deb's Depends resolve on this Debian; every linter finding is one that
docs/packaging.md explains; and the .deb, unpacked into a throw-away root, runs.

The packages are built once (one module fixture) from a copy of this tree, never installed
on this host.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hwmgr
from hwmgr.cli import VERBS

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "packaging.md"
RELEASE = re.search(r"^Release:\s*(\d+)%\{\?dist\}", (REPO / "specs" / "hwmgr.spec").read_text(),
                    re.M)
TOOLS = ("rpm", "rpmbuild", "rpmlint", "dpkg-deb", "lintian", "apt-get", "man", "zsh")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not all(shutil.which(t) for t in TOOLS),
                       reason=f"needs {', '.join(TOOLS)} (make apt-test installs them)"),
]


def sh(*argv: str, env: dict[str, str] | None = None,
       timeout: float = 600) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C", "HOME": "/root"}
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          check=False, env={**base, **(env or {})})


class Built:
    def __init__(self, out: Path) -> None:
        v, r = hwmgr.__version__, RELEASE.group(1) if RELEASE else "?"
        self.rpm = {el: out / f"hwmgr-{v}-{r}.el{el}.noarch.rpm" for el in (8, 9)}
        self.deb = out / f"hwmgr_{v}-{r}_all.deb"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """scripts/build-packages (what `make packages` runs) from a copy of the tree it reads."""
    tree = tmp_path_factory.mktemp("tree")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".*", "*.egg-info")
    for name in ("hwmgr", "catalogs", "drivers", "contrib", "specs", "docs", "scripts",
                 "packaging"):
        shutil.copytree(REPO / name, tree / name, ignore=skip)
    for name in ("README.md", "setup.cfg", "pyproject.toml"):
        shutil.copy2(REPO / name, tree / name)
    out = tree / "dist"
    res = sh(str(tree / "scripts" / "build-packages"), sys.executable, str(out),
             env={"SOURCE_DATE_EPOCH": "1800000000", "TMPDIR": str(tree)}, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    b = Built(out)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        p.name for p in (*b.rpm.values(), b.deb)), res.stdout
    return b


def rpmq(rpm: Path, *args: str) -> str:
    res = sh("rpm", "-qp", "--nosignature", *args, str(rpm))
    assert res.returncode == 0, res.stderr
    return res.stdout


def explained(tool: str) -> set[tuple[str, str]]:
    """(level, tag) of each finding docs/packaging.md explains for `tool` (its table rows)."""
    rows = re.findall(rf"^\| {tool} \| ([EW]) \| `([a-z0-9-]+)` \|", DOC.read_text(), re.M)
    assert rows, f"docs/packaging.md has no {tool} rows"
    return set(rows)


# ------------------------------------------------------------------------------ RPMs
@pytest.mark.parametrize("el", [9, 8])
def test_rpm_requires_python_39_only(built: Built, el: int) -> None:
    requires = rpmq(built.rpm[el], "--requires").split("\n")
    pythons = {r for r in requires if r.startswith(("python(abi)", "python3"))}
    # no other interpreter, and no python3dist() of the platform's default python3 (3.6 on EL8)
    assert {r for r in pythons if r.startswith("python(abi)")} == {"python(abi) = 3.9"}, requires
    assert all(r.startswith(("python(abi) = 3.9", "python3.9dist(", "/usr/bin/python3.9"))
               for r in pythons), pythons
    assert "python3.9dist(jsonschema) >= 3.2" in requires  # RHEL 9's 3.2.0, EPEL 8's for EL8
    assert "python3.9dist(requests) >= 2.25" in requires
    vendored = {"python3.9dist(rich) >= 13.1", "python3.9dist(prometheus-client) >= 0.16"}
    provides = rpmq(built.rpm[el], "--provides")
    if el == 9:
        assert vendored <= set(requires) and "bundled(" not in provides
    else:  # no RHEL 8 / EPEL 8 package of these for python39: the EL8 RPM carries them
        assert not vendored & set(requires)
        assert "bundled(python3dist(rich)) = 13.1.0" in provides, provides


@pytest.mark.parametrize("el", [9, 8])
def test_rpm_files(built: Built, el: int) -> None:
    listing = rpmq(built.rpm[el], "--qf", "[%{FILEMODES:perms} %{FILENAMES}\n]")
    files = dict(reversed(line.split(" ", 1)) for line in listing.splitlines())
    for path in ("/usr/bin/hwmgr", "/usr/share/man/man8/hwmgr.8.gz",
                 "/usr/share/bash-completion/completions/hwmgr",
                 "/usr/share/zsh/site-functions/_hwmgr",
                 "/usr/lib/kernel/install.d/90-hwmgr-gate.install",
                 "/usr/lib/systemd/system/hwmgr-check.timer",
                 "/usr/lib/systemd/system/hwmgr-check.service",
                 "/usr/lib/systemd/system/hwmgr-verify.service",
                 "/usr/share/doc/hwmgr/install.md",
                 "/usr/lib/python3.9/site-packages/hwmgr/cli.py"):
        assert path in files, path
    for d in ("/etc/hwmgr/catalog.d", "/etc/hwmgr/trusted.gpg.d", "/var/lib/hwmgr"):
        assert files.get(d, "").startswith("d"), d  # owned by the package, as a directory
    assert files["/usr/lib/kernel/install.d/90-hwmgr-gate.install"] == "-rwxr-xr-x"
    assert not [f for f in files if "hwmgrtest" in f]
    assert not [f for f in files if "/python3." in f and "/python3.9/" not in f]
    assert ("/usr/share/hwmgr/python/rich/table.py" in files) == (el == 8)


@pytest.mark.parametrize("el", [9, 8])
def test_rpmlint_says_only_what_the_docs_explain(built: Built, el: int) -> None:
    res = sh("rpmlint", "-r", str(REPO / "specs" / "rpmlintrc-hwmgr"), str(built.rpm[el]))
    out = res.stdout + res.stderr
    found = set(re.findall(r"^hwmgr\.noarch: ([EW]): (\S+)", out, re.M))
    assert re.search(r"1 packages and 0 specfiles checked; 0 errors", out), out
    assert found <= explained("rpmlint"), out


# ------------------------------------------------------------------------------ the .deb
def test_deb_contents(built: Built) -> None:
    listing = sh("dpkg-deb", "-c", str(built.deb)).stdout
    entries = {line.split()[-1].lstrip("."): line[0] for line in listing.splitlines()}
    for path in ("/usr/bin/hwmgr", "/usr/share/man/man8/hwmgr.8.gz",
                 "/usr/share/bash-completion/completions/hwmgr",
                 "/usr/share/zsh/vendor-completions/_hwmgr",
                 "/etc/kernel/postinst.d/zz-hwmgr-gate",
                 "/lib/systemd/system/hwmgr-check.timer",
                 "/lib/systemd/system/hwmgr-verify.service",
                 "/usr/lib/python3/dist-packages/hwmgr/cli.py",
                 "/usr/share/hwmgr/catalogs/hwmgr-catalog.json",
                 "/usr/share/doc/hwmgr/copyright"):
        assert entries.get(path) == "-", path
    assert entries.get("/etc/hwmgr/catalog.d/") == "d", sorted(entries)[:20]
    assert not [p for p in entries if "hwmgrtest" in p]
    control = sh("dpkg-deb", "-f", str(built.deb), "Depends").stdout
    deps = {d.split()[0] for d in control.strip().split(", ")}
    assert {"python3", "python3-requests", "python3-jsonschema", "python3-rich",
            "python3-prometheus-client"} <= deps, control


def test_deb_resolves_on_this_debian(built: Built) -> None:
    """apt's own resolver, simulating (-s): every Depends is a package this Debian has."""
    res = sh("apt-get", "-s", "install", str(built.deb), timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    assert re.search(r"^Conf hwmgr \(", res.stdout, re.M), res.stdout[-2000:]


def test_lintian_says_only_what_the_docs_explain(built: Built) -> None:
    res = sh("lintian", "--tag-display-limit", "0", str(built.deb), timeout=600)
    found = set(re.findall(r"^([EW]): hwmgr: (\S+)", res.stdout, re.M))
    assert "hwmgr" in res.stdout or res.returncode == 0, res.stdout + res.stderr
    assert found <= explained("lintian"), res.stdout


def test_unpacked_deb_runs(built: Built, tmp_path: Path) -> None:
    """The .deb unpacked (dpkg -x) into a throw-away root: its launcher runs on this
    machine's python3, its man page renders, its completion completes a verb."""
    root = tmp_path / "root"
    assert sh("dpkg-deb", "-x", str(built.deb), str(root)).returncode == 0
    env = {"PYTHONPATH": str(root / "usr/lib/python3/dist-packages")}
    res = sh("/usr/bin/python3", str(root / "usr/bin/hwmgr"), "--version", env=env)
    assert res.stdout.strip() == f"hwmgr {hwmgr.__version__}", res.stdout + res.stderr
    page = sh("man", "-l", str(root / "usr/share/man/man8/hwmgr.8.gz"),
              env={"MANPAGER": "cat", "MANWIDTH": "100"}).stdout
    assert "hwmgr catalog validate" in page and "exit codes:" in page, page[:2000]
    # every verb the CLI knows has its section, made from its own parser
    missing = [v for v in VERBS if not re.search(rf"^ +hwmgr {v}$", page, re.M)]
    assert not missing, missing
    comp = root / "usr/share/bash-completion/completions/hwmgr"
    script = (f"source {comp}; COMP_WORDS=(hwmgr cat); COMP_CWORD=1; _hwmgr; "
              "echo ${COMPREPLY[@]}; COMP_WORDS=(hwmgr catalog va); COMP_CWORD=2; _hwmgr; "
              "echo ${COMPREPLY[@]}")
    lines = sh("bash", "-c", script).stdout.splitlines()
    assert lines[0] == "catalog" and "validate" in lines[1].split(), lines
    # zsh: the file parses, and compinit loads it from where the package puts it, in a real
    # interactive zsh whose TAB completes a verb, a subcommand and an option (not a stranger)
    zcomp = root / "usr/share/zsh/vendor-completions/_hwmgr"
    assert sh("zsh", "-n", str(zcomp)).returncode == 0
    assert "'fetch:download and verify a driver'\\''s vendor package'" in zcomp.read_text()
    out, cwd = tmp_path / "zsh.out", tmp_path / "empty"
    cwd.mkdir()
    typed = ["hwmgr kernel-g", "hwmgr catalog va", "hwmgr kernel-gate --allow-u", "hwmgr zz"]
    subprocess.run(["zsh", "-f", str(REPO / "tests/support/zsh_complete.zsh"), str(out),
                    str(zcomp.parent), *typed], cwd=cwd, timeout=60, check=True,
                   capture_output=True, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)})
    assert out.read_text().splitlines() == [
        "<hwmgr kernel-gate >", "<hwmgr catalog validate >",
        "<hwmgr kernel-gate --allow-unready >", "<hwmgr zz>"]


def test_el8_rpm_carries_what_python39_lacks(built: Built, tmp_path: Path) -> None:
    """The EL8 RPM's /usr/share/hwmgr/python, unpacked, gives a bare Python 3.9 (no
    site-packages: -S) rich and prometheus-client, the two no RHEL 8 / EPEL 8 package has."""
    root = tmp_path / "root"
    root.mkdir()
    unpack = sh("sh", "-c", f"rpm2cpio {built.rpm[8]} | cpio -idm --quiet -D {root}")
    assert unpack.returncode == 0, unpack.stderr
    py = sh(str(REPO / "scripts" / "find-python"), "3.9").stdout.strip()
    assert py, "no Python 3.9 (scripts/find-python)"
    vendor = root / "usr/share/hwmgr/python"
    code = (f"import sys; sys.path[:0] = [{str(vendor)!r}]; import rich, rich.table, "
            "prometheus_client; from importlib.metadata import version; "
            "print(rich.__file__, version('rich'), version('prometheus-client'))")
    res = sh(py, "-S", "-c", code)
    assert res.returncode == 0, res.stderr
    where, rich_v, prom_v = res.stdout.split()
    assert where.startswith(str(vendor)) and (rich_v, prom_v) == ("13.1.0", "0.21.0"), res.stdout
    launcher = (root / "usr/bin/hwmgr").read_text()
    assert launcher.startswith("#!/usr/bin/python3.9 -s\n")
    assert 'sys.path.append("/usr/share/hwmgr/python")' in launcher
