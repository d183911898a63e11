"""Fixtures of the QEMU lab scenarios: one `Lab` per session (image, SRPMs, HTTP, iperf3)
and the VM chains the scenarios share, torn down at the end whatever happened.

The lab runs by default; `HWMGR_LAB=0` skips it (with that reason). Transcripts and each
boot's guest output stay in the run dir (`HWMGR_LAB_RUN`, default a pytest temp dir).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from lab.chain import Chain  # noqa: E402
from lab.image import log  # noqa: E402
from lab.vm import Lab  # noqa: E402

TOOLS = ("qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4", "debugfs", "rpmbuild",
         "iperf3", "cpio", "unshare")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "lab: boots the QEMU lab guest (HWMGR_LAB=0 skips)")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    # the kernel gate's chains fork from chain a's disks, which test_lab.py boots: run after it
    items.sort(key=lambda item: item.path.name == "test_kernel_gate.py")
    if os.environ.get("HWMGR_LAB", "1") != "0":
        return
    skip = pytest.mark.skip(reason="HWMGR_LAB=0: the QEMU lab is switched off")
    for item in items:
        if "lab" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: Any) -> Iterator[Lab]:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.fail(f"the QEMU lab needs {', '.join(missing)} (apt-get install qemu-system-x86 "
                    "qemu-utils debootstrap e2fsprogs rpm iperf3 cpio; or HWMGR_LAB=0)")
    if os.geteuid() != 0:
        pytest.fail("the QEMU lab builds its guest with debootstrap/chroot: run as root "
                    "(or HWMGR_LAB=0)")
    run_dir = Path(os.environ.get("HWMGR_LAB_RUN") or tmp_path_factory.mktemp("lab"))
    the_lab = Lab(run_dir)

    def on_term(signum: int, frame: Any) -> None:  # CI cancels with SIGTERM: still tear down
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        the_lab.start()
        yield the_lab
    finally:
        the_lab.close()
        signal.signal(signal.SIGTERM, old)
        log(f"lab closed; transcripts in {run_dir}")


@pytest.fixture(scope="session")
def chains() -> Iterator[dict[str, Chain]]:
    all_chains = {n: Chain(n) for n in ("a", "b", "c", "d", "s")}
    yield all_chains
    for c in all_chains.values():
        c.release()
