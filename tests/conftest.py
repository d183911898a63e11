"""Shared pytest fixtures (among them the network namespaces); plain helpers live in the
tests/support package."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from support import HOSTS
from support.apply_env import ApplyNs
from support.netns import VethLink

# A suite started in the background of a non-interactive shell (`make test &`, a CI wrapper,
# scripts/run-tests' lab job) gets SIGINT ignored, and every hwmgr it starts inherits that, so
# the tests that press Ctrl-C on hwmgr would see it ignored (as hwmgr rightly honours). Give
# the children SIGINT as a terminal delivers it: a handled signal is reset to default on exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

LAB = Path(__file__).resolve().parent / "lab"
# a module marked slow as a whole (module-level `pytestmark = pytest.mark.slow`)
SLOW_MODULE = re.compile(r"^pytestmark = pytest\.mark\.slow\b", re.M)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With -m "not slow" (make check, the other Pythons' legs) a module marked slow as a
    whole is not even imported: building some corpora's parameters takes minutes."""
    if (config.getoption("markexpr") == "not slow" and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_")):
        try:
            if SLOW_MODULE.search(collection_path.read_text()):
                return True
        except OSError:
            return None
    return None
# pytest-xdist's workers start with COLUMNS=80 and LINES=24 set; a run must see the terminal
# variables the controller saw (the CLI's tables are as wide as COLUMNS says)
TERMINAL_ENV = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # xdist, in the controller: what each worker gets
    node.workerinput["hwmgr_terminal_env"] = {k: os.environ.get(k) for k in TERMINAL_ENV}


def pytest_configure(config: pytest.Config) -> None:
    sent = getattr(config, "workerinput", {}).get("hwmgr_terminal_env")
    for key, value in (sent or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


# Modules whose slow tests change this machine's own DKMS tree, /usr/src, /lib/modules or
# rpm database (the hwmgrtest module, Intel's igb, the benches' upgrades): marked
# machine_wide, they run one after the other in one pytest process while another runs the
# rest beside them (scripts/run-tests; xdist's loadgroup does not group under pytest 9).
MACHINE_WIDE = {"test_build_log.py", "test_dkms.py", "test_initramfs.py", "test_kernel_gate.py",
                "test_lifecycle.py", "test_package.py", "test_recipe_check.py",
                "test_trust_story.py", "test_vendor_igb.py", "test_verify.py", "test_bench.py",
                "test_hostile_tool_output.py", "test_signature.py", "test_interrupt.py",
                "test_kernel_gate_signals.py", "test_binpkg_upgrade.py"}
# Slow tests that change nothing machine-wide but join that process anyway (serial_lane), so
# the two finish together: the lab waits for both (in the 2026-11-29 rehearsal the other
# process ran 13.0 min beside its 11.1; the wheel installs under each Python are about 1 min).
SERIAL_LANE = {"test_packaging.py"}


def pytest_itemcollected(item: pytest.Item) -> None:
    """The slow tests of MACHINE_WIDE modules are machine_wide (marked as each is collected,
    so that -m selects by it)."""
    if item.path.name in MACHINE_WIDE and item.get_closest_marker("slow"):
        item.add_marker(pytest.mark.machine_wide)
    if item.path.name in SERIAL_LANE and item.get_closest_marker("slow"):
        item.add_marker(pytest.mark.serial_lane)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The QEMU lab (tests/lab) is slow as a whole: make check leaves it out."""
    for item in items:
        if LAB in item.path.parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def hosts_dir() -> Path:
    return HOSTS


@pytest.fixture
def copy_host(tmp_path: Path):
    """Copy a bundled snapshot to a temp dir so a test may damage it."""

    def _copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(HOSTS / name, dest, symlinks=True)
        return dest

    return _copy


# Where `hwmgr apply` persists settings on a live host. Tests must name a --persist-root
# (or a snapshot root): a file appearing or changing here means a test wrote to this host.
HOST_PERSIST_DIRS = ("/etc/systemd/network", "/etc/sysctl.d",
                     "/etc/NetworkManager/system-connections", "/etc/hwmgr")


def _persist_state() -> dict[str, bytes | None]:
    state: dict[str, bytes | None] = {}
    for d in map(Path, HOST_PERSIST_DIRS):
        for p in sorted(d.rglob("*")) if d.is_dir() else []:
            state[str(p)] = p.read_bytes() if p.is_file() and not p.is_symlink() else None
    return state


@pytest.fixture(scope="session", autouse=True)
def host_persistence_untouched():
    """Fail the run if any test wrote this machine's persistence directories."""
    before = _persist_state()
    yield
    after = _persist_state()
    changed = sorted(p for p in set(before) | set(after)
                     if before.get(p, b"?") != after.get(p, b"?"))
    if changed:
        pytest.fail("tests wrote this host's persistence files (use --persist-root): "
                    + ", ".join(changed[:5]))


def _agent_homes(base: Path) -> list[Path]:
    """GNUPGHOMEs under `base` where a gpg-agent listens (its socket is in the home)."""
    return sorted({sock.parent for sock in base.rglob("S.gpg-agent")}) if base.is_dir() else []


@pytest.fixture(scope="session", autouse=True)
def no_gpg_agent_left(tmp_path_factory: pytest.TempPathFactory):
    """End every gpg-agent a test's GNUPGHOME started (gpg forks one per home and it outlives
    the run); the trust fixtures end theirs, this catches a test that failed half-way."""
    yield
    if shutil.which("gpgconf"):
        for home in _agent_homes(tmp_path_factory.getbasetemp()):
            subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False,
                           capture_output=True, timeout=30)


# ------------------------------------------------------------------ network namespaces
_VETH_TAGS = itertools.count()


@pytest.fixture
def ns(tmp_path: Path):
    """A network namespace of the test's own holding veth v0/v1 (support.apply_env.ApplyNs),
    GRO off on v0 and forwarding off; hwmgr runs inside it with its state dir and persist
    root under tmp_path. Deleted afterwards, with what the test started in it."""
    if os.geteuid() != 0:
        pytest.skip("needs root for a network namespace")
    env = ApplyNs.create(tmp_path)
    try:
        env.x("ethtool", "-K", "v0", "gro", "off")
        env.x("sh", "-c", "echo 0 > /proc/sys/net/ipv4/ip_forward")
        yield env
    finally:
        env.teardown()


@pytest.fixture
def veth():
    """Two network namespaces joined by a veth pair (support.netns.VethLink): side a for hwmgr,
    side b for its peer, with addresses on both. Deleted afterwards."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("ethtool"):
        pytest.skip("needs root, ip and ethtool")
    link = VethLink.create(f"x{next(_VETH_TAGS)}")
    try:
        yield link
    finally:
        link.teardown()
