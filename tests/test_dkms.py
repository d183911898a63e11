"""Tests for hwmgr.lifecycle.builds.dkms with the real dkms, rpm tools and kernel headers.

Everything a test adds is removed again (DKMS entry, /usr/src/<name>-<version>, installed
.ko files); versions carry the test process id so parallel runs do not collide. DKMS signing
keys are generated in a temp dir, never in /var/lib/dkms. A `dkms build` of the tiny
module takes 1.5-4 s (more while other builds share the 2 vCPUs); the file runs in 15-37 s,
so nothing here is marked slow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import time
from pathlib import Path
from typing import Iterator

import pytest
from support import srpmfactory as factory

from hwmgr.errors import BadInputError, HwmgrError, NotFoundError, RefusedError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.builds.dkms import Dkms, parse_status, render_dkms_conf
from hwmgr.lifecycle.builds.headers import headers_package, kernels_with_headers
from hwmgr.lifecycle.builds.recipe import ModuleSpec, Recipe, load_recipe
from hwmgr.lifecycle.builds.srpm import unpack_srpm

HOST = Host("/", SubprocessRunner())


def work_host(tmp: Path) -> Host:
    """This machine, allowed to write the test's temp dir too (SRPM work dirs live there)."""
    return Host("/", SubprocessRunner(), writable=[tmp])
KERNELS = kernels_with_headers(HOST)
PID = os.getpid()
DEFAULT_MOK = Path("/var/lib/dkms/mok.key")

pytestmark = [
    pytest.mark.slow,  # real DKMS builds
    pytest.mark.skipif(not shutil.which("dkms"), reason="dkms not installed"),
    pytest.mark.skipif(not shutil.which("rpmbuild"), reason="rpmbuild not installed"),
    pytest.mark.skipif(not KERNELS, reason="no kernel headers under /lib/modules/*/build"),
    pytest.mark.skipif(os.geteuid() != 0, reason="dkms add/build needs root"),
]


@pytest.fixture(scope="module")
def kver() -> str:
    return KERNELS[0]


@pytest.fixture(scope="module")
def dkms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dkms]:
    keys = tmp_path_factory.mktemp("mok")
    had_default_key = DEFAULT_MOK.exists()
    yield Dkms(HOST, mok_key=keys / "mok.key", mok_cert=keys / "mok.pub")
    if not had_default_key:
        assert not DEFAULT_MOK.exists(), "tests must not leave a MOK key in /var/lib/dkms"


class Added:
    """Remembers what a test put into DKMS and /lib/modules, and takes it all out again."""

    def __init__(self, dkms: Dkms, kver: str) -> None:
        self.dkms = dkms
        self.kver = kver
        self.entries: list[tuple[str, str]] = []
        self.own_modules: list[str] = []
        self.updates_existed = HOST.path(f"/lib/modules/{kver}/updates").exists()

    def add(self, recipe: Recipe, version: str, tmp: Path, **srpm_kw: object) -> str:
        name = recipe.driver
        if HOST.path(Dkms.source_dir(name, version)).exists() or self.dkms.is_added(
            name, version
        ):
            pytest.skip(f"{name}/{version} already exists on this host; not touching it")
        srpm = factory.build_srpm(recipe.srpm_name, version, tmp / "srpm", **srpm_kw)
        tree = unpack_srpm(work_host(tmp), srpm, tmp / f"work-{version}", recipe, version)
        self.entries.append((name, version))
        return self.dkms.add(tree, name, version, dkms_conf=render_dkms_conf(recipe, version))

    def cleanup(self) -> None:
        for name, version in self.entries:
            self.dkms.remove(name, version, "all", delete_source=True, depmod=False)
        for module in self.own_modules:  # dkms can lose track of what it installed
            for loc in ("updates/dkms", "extra", "updates"):
                HOST.remove(f"/lib/modules/{self.kver}/{loc}/{module}.ko")
        if not self.updates_existed:
            for loc in ("updates/dkms", "updates"):
                with contextlib.suppress(OSError):
                    HOST.path(f"/lib/modules/{self.kver}/{loc}").rmdir()


@pytest.fixture
def added(dkms: Dkms, kver: str) -> Iterator[Added]:
    a = Added(dkms, kver)
    try:
        yield a
    finally:
        a.cleanup()


def _renamed(name: str) -> Recipe:
    """The hwmgrtest recipe for a module called `name` (so tests own the installed .ko)."""
    r = load_recipe("hwmgrtest")
    return dataclasses.replace(
        r,
        driver=name,
        srpm_name=name,
        tarball=f"{name}-{{version}}.tar.gz",
        subdir=f"{name}-{{version}}",
        modules=(ModuleSpec(name),),
    )


@pytest.fixture(scope="module")
def built(
    dkms: Dkms, kver: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path, float]]:
    """hwmgrtest built once for the headers' kernel: (version, .ko path, build seconds)."""
    a = Added(dkms, kver)
    version = f"0.1.{PID}"
    try:
        a.add(load_recipe("hwmgrtest"), version, tmp_path_factory.mktemp("built"))
        t0 = time.monotonic()
        kos = dkms.build("hwmgrtest", version, kver)
        yield version, kos["hwmgrtest"], time.monotonic() - t0
    finally:
        a.cleanup()


def test_kernels_with_headers_matches_lib_modules() -> None:
    for k in KERNELS:
        assert Path(f"/lib/modules/{k}/build/Makefile").is_file()
    others = [k for k in os.listdir("/lib/modules") if k not in KERNELS]
    for k in others:
        assert not Path(f"/lib/modules/{k}/build/Makefile").is_file()


def test_kernels_with_headers_and_package_names_on_fake_root(tmp_path: Path) -> None:
    (tmp_path / "lib/modules/9.9.9-1-amd64/build").mkdir(parents=True)
    (tmp_path / "lib/modules/9.9.9-1-amd64/build/Makefile").write_text("")
    (tmp_path / "lib/modules/9.9.8-1-amd64").mkdir(parents=True)
    (tmp_path / "etc").mkdir()
    fake = Host(tmp_path, SubprocessRunner())
    assert kernels_with_headers(fake) == ["9.9.9-1-amd64"]
    (tmp_path / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    assert headers_package(fake, "9.9.8-1-amd64") == "linux-headers-9.9.8-1-amd64"
    (tmp_path / "etc/os-release").write_text('ID="rocky"\nID_LIKE="rhel centos fedora"\n')
    assert headers_package(fake, "4.18.0-513.el8.x86_64") == "kernel-devel-4.18.0-513.el8.x86_64"


def test_build_checks_module_and_status(
    built: tuple[str, Path, float], dkms: Dkms, kver: str
) -> None:
    version, ko, seconds = built
    assert ko == Path(f"/var/lib/dkms/hwmgrtest/{version}/{kver}/{dkms.arch}/module/hwmgrtest.ko")
    res = HOST.run(["modinfo", "-F", "version", str(ko)])
    assert res.stdout.strip() == version
    assert HOST.run(["modinfo", "-F", "parm", str(ko)]).stdout.startswith("ring_size:")
    assert seconds < 120
    mine = [e for e in dkms.status("hwmgrtest") if e.version == version]
    assert [(e.kernel, e.arch, e.state) for e in mine] == [(kver, dkms.arch, "built")]
    assert dkms.modules_of("hwmgrtest", version) == ["hwmgrtest"]


def test_build_again_is_a_checked_noop(
    built: tuple[str, Path, float], dkms: Dkms, kver: str
) -> None:
    version, ko, _ = built
    # dkms 3.0 answers "already built ... skip" with exit 0; we still check the module
    again = dkms.build("hwmgrtest", version, kver)
    assert again == {"hwmgrtest": ko}


def test_verify_ko_names_version_and_kernel(
    built: tuple[str, Path, float], dkms: Dkms, kver: str
) -> None:
    version, ko, _ = built
    dkms.verify_ko(ko, version, kver)
    with pytest.raises(HwmgrError, match=f"modinfo version is '{version}', expected '9.9.9'"):
        dkms.verify_ko(ko, "9.9.9", kver)
    with pytest.raises(HwmgrError, match=f"built for kernel '{kver}', expected '5.10.0-1-amd64'"):
        dkms.verify_ko(ko, version, "5.10.0-1-amd64")
    with pytest.raises(HwmgrError, match="dkms reported success but built no hwmgrtest.ko"):
        dkms.built_ko("hwmgrtest", version, "5.10.0-1-amd64", "hwmgrtest")


def test_add_refuses_existing_entry(
    built: tuple[str, Path, float], dkms: Dkms, tmp_path: Path
) -> None:
    version, _, _ = built
    (tmp_path / "dkms.conf").write_text("PACKAGE_NAME=x\n")
    with pytest.raises(RefusedError, match=f"/usr/src/hwmgrtest-{version} or DKMS entry"):
        dkms.add(tmp_path, "hwmgrtest", version)


def test_missing_headers_names_package(dkms: Dkms) -> None:
    with pytest.raises(NotFoundError) as exc:
        dkms.build("hwmgrtest", "0.1", "6.1.0-999-hwmgrnone")
    assert "install linux-headers-6.1.0-999-hwmgrnone" in str(exc.value)
    with pytest.raises(HwmgrError, match="kernel release"):
        dkms.build("hwmgrtest", "0.1", "../../etc")


def test_be2net_recipe_end_to_end(added: Added, dkms: Dkms, kver: str, tmp_path: Path) -> None:
    """Seed 000 with DKMS: vendor-shaped be2net SRPM → unpack → add → build → modinfo → remove."""
    recipe = load_recipe("be2net")
    v = factory.BE2NET_VERSION
    src = added.add(recipe, v, tmp_path)
    assert src == f"/usr/src/be2net-{v}"
    conf = Path(src, "dkms.conf").read_text()
    assert 'BUILT_MODULE_NAME[0]="be2net"' in conf and f'PACKAGE_VERSION="{v}"' in conf
    assert Path(src, "be2net.c").is_file() and Path(src, "Makefile").is_file()
    kos = dkms.build("be2net", v, kver, modules=recipe.module_names)
    res = HOST.run(["modinfo", "-F", "version", str(kos["be2net"])])
    assert res.stdout.strip() == "10.2.470.14"
    assert HOST.run(["modinfo", "-F", "name", str(kos["be2net"])]).stdout.strip() == "be2net"
    dkms.remove("be2net", v, "all", delete_source=True, depmod=False)
    assert [e for e in dkms.status("be2net") if e.version == v] == []
    assert not Path(src).exists()
    assert not Path(f"/var/lib/dkms/be2net/{v}").exists()


def test_build_failure_names_make_log(added: Added, dkms: Dkms, kver: str, tmp_path: Path) -> None:
    recipe = _renamed("hwmgrtest_bad")
    v = f"0.2.{PID}"
    added.add(recipe, v, tmp_path, broken=True)
    log = f"/var/lib/dkms/hwmgrtest_bad/{v}/build/make.log"
    with pytest.raises(HwmgrError) as exc:
        dkms.build("hwmgrtest_bad", v, kver)
    msg = str(exc.value)
    assert f"for kernel {kver} failed" in msg and msg.endswith(f"see {log}")
    assert "this_does_not_compile" in Path(log).read_text()


def test_a_build_over_its_timeout_says_which_setting_to_raise(
        added: Added, dkms: Dkms, kver: str, tmp_path: Path) -> None:
    """A build stopped by the site's build_timeout_seconds is named as such, not as a broken
    driver, and its make is stopped with it (the runner kills the session dkms leads)."""
    recipe = _renamed("hwmgrtest_slow")
    v = f"0.3.{PID}"
    added.add(recipe, v, tmp_path)
    slow = Dkms(HOST, mok_key=dkms.env["mok_signing_key"],
                mok_cert=dkms.env["mok_certificate"], build_timeout=0.5)
    with pytest.raises(HwmgrError) as exc:
        slow.build("hwmgrtest_slow", v, kver)
    assert "stopped after 0.5 s" in str(exc.value) and "build_timeout_seconds" in str(exc.value)
    assert HOST.run(["pgrep", "-f", f"hwmgrtest_slow/{v}"]).rc == 1  # nothing builds on
    kos = dkms.build("hwmgrtest_slow", v, kver)  # the default timeout: the same source builds
    assert kos["hwmgrtest_slow"].is_file()


def test_install_and_the_silent_skip(added: Added, dkms: Dkms, kver: str, tmp_path: Path) -> None:
    """Install, then hit dkms 3.0's "not newer" skip: it exits 0 and marks itself installed."""
    name = "hwmgrtest_inst"
    recipe = _renamed(name)
    added.own_modules.append(name)
    dest = Path(f"/lib/modules/{kver}/updates/dkms/{name}.ko")
    if dest.exists():
        pytest.skip(f"{dest} exists already; not touching it")
    new, old = f"2.0.{PID}", f"1.0.{PID}"
    added.add(recipe, new, tmp_path)
    added.add(recipe, old, tmp_path)
    installed = dkms.install(name, new, kver, depmod=False)
    assert installed == {name: dest}
    assert HOST.run(["modinfo", "-F", "version", str(dest)]).stdout.strip() == new
    assert dkms.installed_ko(name, new, kver, name) == dest

    dkms.build(name, old, kver)
    with pytest.raises(HwmgrError) as exc:
        dkms.install(name, old, kver, depmod=False)
    msg = str(exc.value)
    assert f"{name}.ko from {name}/{old} is not installed for kernel {kver}" in msg
    assert "not newer than what is already found" in msg
    # what dkms now believes, versus the file on disk
    states = {e.version: e.state for e in dkms.status(name)}
    assert states == {old: "installed", new: "built"}
    assert HOST.run(["modinfo", "-F", "version", str(dest)]).stdout.strip() == new

    # --force does replace it, and remove takes it out again
    assert dkms.install(name, old, kver, depmod=False, force=True) == {name: dest}
    assert HOST.run(["modinfo", "-F", "version", str(dest)]).stdout.strip() == old
    dkms.remove(name, old, kver, depmod=False)
    assert not dest.exists()


def test_fake_root_keeps_dkms_inside(tmp_path: Path) -> None:
    """With a non-/ root, dkms is pointed at the root's own source and DKMS trees."""
    root = tmp_path / "root"
    root.mkdir()
    fake = Dkms(Host(root, SubprocessRunner()))
    v = f"0.3.{PID}"
    srpm = factory.build_srpm("hwmgrtest", v, tmp_path / "srpm")
    tree = unpack_srpm(work_host(tmp_path), srpm, tmp_path / "work", load_recipe("hwmgrtest"), v)
    fake.add(tree, "hwmgrtest", v, dkms_conf=render_dkms_conf(load_recipe("hwmgrtest"), v))
    try:
        assert (root / f"usr/src/hwmgrtest-{v}/hwmgrtest.c").is_file()
        assert os.readlink(root / f"var/lib/dkms/hwmgrtest/{v}/source") == str(
            root / f"usr/src/hwmgrtest-{v}"
        )
        assert [(e.version, e.state) for e in fake.status("hwmgrtest")] == [(v, "added")]
        assert not Path(f"/var/lib/dkms/hwmgrtest/{v}").exists()
        # adding the same version again is refused, unless replace=True
        (root / f"usr/src/hwmgrtest-{v}/stale").write_text("x")
        with pytest.raises(RefusedError, match="already exists; remove it first"):
            fake.add(tree, "hwmgrtest", v, dkms_conf="PACKAGE_NAME=x\n")
        fake.add(tree, "hwmgrtest", v, dkms_conf=render_dkms_conf(load_recipe("hwmgrtest"), v),
                 replace=True)
        assert not (root / f"usr/src/hwmgrtest-{v}/stale").exists()
        assert [(e.version, e.state) for e in fake.status("hwmgrtest")] == [(v, "added")]
        with pytest.raises(BadInputError, match="has no dkms.conf and none was given"):
            fake.add(tree, "hwmgrtest", "0.4")
        with pytest.raises(NotFoundError, match="does not exist"):
            fake.add(tmp_path / "nope", "hwmgrtest", "0.4", dkms_conf="x")
        with pytest.raises(BadInputError, match="module name"):
            fake.add(tree, "../evil", "0.4", dkms_conf="x")
    finally:
        fake.remove("hwmgrtest", v, delete_source=True)
    assert fake.status("hwmgrtest") == []
    assert not (root / f"usr/src/hwmgrtest-{v}").exists()


def test_parse_status_formats() -> None:
    text = (
        "hwmgrtest/0.9.1, 6.1.0-56-amd64, x86_64: installed (WARNING! Diff between built and "
        "installed module!)\n"
        "hwmgrtest/0.9.2: added\n"
        "Warning: some noise from dkms\n"
        "e1000e, 3.8.7, 2.6.32-279.el6.x86_64, x86_64: installed\n"
    )
    got = [(e.name, e.version, e.kernel, e.arch, e.state, e.note) for e in parse_status(text)]
    assert got == [
        ("hwmgrtest", "0.9.1", "6.1.0-56-amd64", "x86_64", "installed",
         "(WARNING! Diff between built and installed module!)"),
        ("hwmgrtest", "0.9.2", None, None, "added", ""),
        ("e1000e", "3.8.7", "2.6.32-279.el6.x86_64", "x86_64", "installed", ""),
    ]
