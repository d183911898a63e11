"""Kernel builds placed on a line, and the fix-stream rule known issues are stated in."""

from __future__ import annotations

import pytest

from hwmgr.catalog import kbuild
from hwmgr.catalog.kbuild import identify

TABLES = {"debian": {"6.1.0-18": "6.1.76"}, "ubuntu": {"5.15.0-91": "5.15.131"}}


@pytest.mark.parametrize(("release", "extra", "want"), [
    ("6.1.0-18-amd64", {}, ("upstream", "6.1.76", "Debian")),
    ("6.1.0-18-cloud-amd64", {}, ("upstream", "6.1.76", "Debian")),
    ("6.1.0-99-amd64", {}, (None, None, "Debian")),  # an ABI the table lacks: not guessed
    # /proc/version names the package, whatever the table says
    ("6.1.0-99-amd64", {"proc_version": "Linux version 6.1.0-99-amd64 (debian-kernel@lists."
                        "debian.org) #1 SMP PREEMPT_DYNAMIC Debian 6.1.140-1 (2025-05-22)"},
     ("upstream", "6.1.140", "Debian")),
    ("6.12.33+deb13-amd64", {}, ("upstream", "6.12.33", "Debian")),
    ("5.15.0-91-generic", {}, ("upstream", "5.15.131", "Ubuntu")),
    ("5.15.0-92-generic", {"signature": "Ubuntu 5.15.0-92.102-generic 5.15.136"},
     ("upstream", "5.15.136", "Ubuntu")),
    ("5.15.0-92-generic", {}, (None, None, "Ubuntu")),
    ("6.8.9-060809-generic", {}, ("upstream", "6.8.9", "Ubuntu mainline")),
    ("6.5.6-300.fc39.x86_64", {}, ("upstream", "6.5.6", "Fedora")),
    ("6.17.4-2-pve", {}, ("upstream", "6.17.4", "Proxmox")),
    # ELRepo's kernel-ml/-lt on EL: the kernel.org release, not RHEL's build (field host
    # cilium17540-mlx5-cx5-el8)
    ("5.14.8-1.el8.elrepo.x86_64", {}, ("upstream", "5.14.8", "ELRepo")),
    ("6.1.81-1.el9.elrepo.x86_64", {}, ("upstream", "6.1.81", "ELRepo")),
    ("5.10.123", {}, ("upstream", "5.10.123", "upstream")),
    ("6.18.44-fc-v657", {}, ("upstream", "6.18.44", "local build")),
    ("4.18.0-477.10.1.el8_8.x86_64", {}, ("el8", "4.18.0-477.10.1.el8_8", "rhel")),
    ("2.6.32-279.el6.x86_64", {}, ("el6", "2.6.32-279.el6", "rhel")),
    # not RHEL's kernel though it says .elN: Oracle's UEK, IBM PowerKVM
    ("5.15.0-200.131.27.el9uek.x86_64", {}, (None, None, "UEK")),
    # UEK 6 stays 5.4.17 for years: not the stable release 5.4.17 with a local suffix
    ("5.4.17-2136.307.3.1.el8uek.x86_64", {}, (None, None, "UEK")),
    ("4.7.0-1.el7.centos.pkvm3_1_1.3100.0.ppc64le", {}, (None, None, None)),
    # SUSE keeps a frozen base and backports: its X.Y.Z says little
    ("5.14.21-150500.55.39-default", {}, (None, None, None)),
    ("4.19.0+1", {}, (None, None, None)),
])
def test_identify(release: str, extra: dict, want: tuple) -> None:
    b = identify(release, builds=TABLES, **extra)
    assert (b.line, b.version, b.family) == want, b
    assert b.how


def test_unrecorded_kernel() -> None:
    assert not identify(None).known and identify(None).label() == "an unrecorded kernel"
    assert not identify("x" * 200).known


@pytest.mark.parametrize(("version", "covered", "fix"), [
    ("5.4.273", False, "5.4.274"),   # its stream has a fix it has not reached
    ("5.4.274", True, "5.4.274"),
    ("5.10.250", False, "6.1.84"),   # no fix in 5.10: the lowest fix above it
    ("6.1.84", True, "6.1.84"),
    ("6.6.30", False, "6.9"),        # 6.6 unfixed: the mainline fix
    ("6.9", True, "6.9"),
    ("6.12.1", True, "6.9"),         # later streams: the highest fix covers them
])
def test_fix_streams(version: str, covered: bool, fix: str) -> None:
    assert kbuild.fix_for("upstream", version, ("6.9", "5.4.274", "6.1.84")) == (covered, fix)


def test_el_streams() -> None:
    """A z-stream fix covers its minor release's builds from that one on; a main-line fix
    (no _N suffix) its stream and every later minor release (they branch from main line)."""
    fixed = ("4.18.0-372.52.1.el8_6", "4.18.0-477.10.1.el8_8", "4.18.0-490.el8")
    assert kbuild.fix_for("el8", "4.18.0-372.9.1.el8", fixed) == (False, fixed[0])
    assert kbuild.fix_for("el8", "4.18.0-372.52.1.el8_6", fixed)[0] is True
    assert kbuild.fix_for("el8", "4.18.0-425.3.1.el8", fixed) == (False, fixed[2])  # 8.7
    assert kbuild.fix_for("el8", "4.18.0-477.27.1.el8_8.x86_64", fixed)[0] is True
    assert kbuild.fix_for("el8", "4.18.0-553.5.1.el8_10", fixed)[0] is True
    # without a main-line fix a later minor release is not assumed fixed
    assert kbuild.fix_for("el8", "4.18.0-553.5.1.el8_10", fixed[:2]) == (False, None)
    # RHEL 7's z-streams carry no _N: the dotted release marks them, not main line
    el7 = ("3.10.0-514.25.1.el7", "3.10.0-693.el7")
    assert kbuild.fix_for("el7", "3.10.0-514.21.1.el7", el7) == (False, el7[0])
    assert kbuild.fix_for("el7", "3.10.0-514.26.2.el7.x86_64", el7)[0] is True
    assert kbuild.fix_for("el7", "3.10.0-693.el7", el7)[0] is True
    assert kbuild.fix_for("el7", "3.10.0-1160.119.1.el7", el7[:1]) == (False, None)
    assert kbuild.el_minor("4.18.0-305.25.1.el8_4.x86_64") == "8.4"
    assert kbuild.el_minor("4.18.0-305.el8.x86_64") is None


def test_valid_versions_per_line() -> None:
    assert kbuild.valid("upstream", "6.1.84") and kbuild.valid("upstream", "6.9")
    assert not kbuild.valid("upstream", "6.1.0-18-amd64")
    assert kbuild.valid("el8", "4.18.0-477.10.1.el8_8")
    assert not kbuild.valid("el8", "5.14.0-70.el9") and not kbuild.valid("el9", "6.1.84")


LINES = {"ubuntu-6.8": ["6.8.0-41", "6.8.0-90", "6.8.0-151"]}


@pytest.mark.parametrize(("release", "extra", "want"), [
    ("6.8.0-90-generic", {}, ("ubuntu-6.8", "6.8.0-90", "Ubuntu")),
    ("6.8.0-90-lowlatency", {}, ("ubuntu-6.8", "6.8.0-90", "Ubuntu")),
    # an upload the catalog read wins over the signature's frozen base (6.8.12 for ever)
    ("6.8.0-90-generic", {"signature": "Ubuntu 6.8.0-90.91-generic 6.8.12"},
     ("ubuntu-6.8", "6.8.0-90", "Ubuntu")),
    ("6.8.0-43-generic", {}, (None, None, "Ubuntu")),  # no such upload read: not guessed
    ("6.8.0-1015-aws", {}, (None, None, "Ubuntu")),  # another source package's ABIs
    ("5.15.0-91-generic", {}, ("upstream", "5.15.131", "Ubuntu")),  # the table still places
])
def test_ubuntu_line(release: str, extra: dict, want: tuple) -> None:
    b = identify(release, builds=TABLES, lines=LINES, **extra)
    assert (b.line, b.version, b.family) == want, b


def test_ubuntu_line_order_and_fix() -> None:
    """Uploads compare by ABI number (not as text); the line is one stream."""
    assert kbuild.compare("ubuntu-6.8", "6.8.0-100", "6.8.0-99") == 1
    assert kbuild.fix_for("ubuntu-6.8", "6.8.0-90", ("6.8.0-103",)) == (False, "6.8.0-103")
    assert kbuild.fix_for("ubuntu-6.8", "6.8.0-103", ("6.8.0-103",)) == (True, "6.8.0-103")
    assert kbuild.valid("ubuntu-6.8", "6.8.0-58")
    assert not kbuild.valid("ubuntu-6.8", "6.8.12") and not kbuild.valid("ubuntu-6.8", "6.5.0-9")
    with pytest.raises(ValueError):
        kbuild.compare("ubuntu-6.8", "6.8.0-90", "6.8.12")
    noble = identify("6.8.0-90-generic", lines=LINES)
    assert kbuild.way_out(noble, "6.8.0-151") == "an Ubuntu kernel of ABI 6.8.0-151 or later"


PVE = {"6.8.12-30": ("ubuntu-6.8", "6.8.0-130")}


@pytest.mark.parametrize(("release", "want"), [
    # built on noble's 6.8.0-130 upload (Proxmox's changelog): Ubuntu's backports, not 6.8.12
    ("6.8.12-30-pve", ("ubuntu-6.8", "6.8.0-130", "Proxmox")),
    # a 6.8.12 build the catalog knows no upload of: never upstream 6.8.12
    ("6.8.12-43-pve", (None, None, "Proxmox")),
    # before 6.8.12 the release names a whole stable release; other series as before
    ("6.8.8-4-pve", ("upstream", "6.8.8", "Proxmox")),
    ("6.17.4-2-pve", ("upstream", "6.17.4", "Proxmox")),
])
def test_proxmox_on_an_ubuntu_upload(release: str, want: tuple) -> None:
    b = identify(release, lines=LINES, proxmox=PVE)
    assert (b.line, b.version, b.family) == want, b
    if b.known and b.line != "upstream":
        assert kbuild.way_out(b, "6.8.0-150") == (
            "a Proxmox VE kernel built on Ubuntu's upload 6.8.0-150 or later, or of a later "
            "series")


CLOUDS = {"5.15.0-1121-aws": "5.15.0-91", "6.8.0-1074-gcp": "6.8.0-90"}


@pytest.mark.parametrize(("release", "want"), [
    # a cloud kernel sits where the master upload it is built on sits (its changelog)
    ("5.15.0-1121-aws", ("upstream", "5.15.131", "Ubuntu")),
    ("6.8.0-1074-gcp", ("ubuntu-6.8", "6.8.0-90", "Ubuntu")),
    # its own ABI is never read as a master ABI
    ("5.15.0-1122-aws", (None, None, "Ubuntu")),
    ("5.15.0-1121-azure", (None, None, "Ubuntu")),
])
def test_ubuntu_cloud_kernels_through_their_master_upload(release: str, want: tuple) -> None:
    said = identify("5.15.0-1122-aws", builds=TABLES, flavours=CLOUDS,
                    signature="Ubuntu 5.15.0-1122.129-aws 5.15.224")
    assert (said.line, said.version) == ("upstream", "5.15.224")  # the host's own word
    b = identify(release, builds=TABLES, lines=LINES, flavours=CLOUDS)
    assert (b.line, b.version, b.family) == want, b
    assert "built on the master upload" in b.how or not b.known
    if b.line == "ubuntu-6.8":
        assert kbuild.way_out(b, "6.8.0-151") == (
            "an Ubuntu gcp kernel built on the master upload 6.8.0-151 or later")
