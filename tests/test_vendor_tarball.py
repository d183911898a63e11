"""Vendor tarballs as sources (issue 39): the bnxt_en recipe's layout (Broadcom's
`netxtreme-bnxt_en-<ver>.tar.gz`: `bnxt_en/` with a MANIFEST of sha512 sums) and a corpus of
hostile variants of it, generated here (no vendor code is in the repository): each is refused
before anything is extracted, on one line naming the archive and the member.

The real tarballs are exercised elsewhere: Intel's igb tarball (inside the shared SRPM) by
tests/test_vendor_igb.py; Broadcom's public releases by hand (drivers/bnxt_en/README.md).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import tarfile
from pathlib import Path

import pytest
from support import run_cli
from support.hostile_tree import Member, info, tar_bytes
from support.lifecycle_env import headers_kernel

from hwmgr.errors import EXIT_REFUSED, BadInputError, HwmgrError, RefusedError
from hwmgr.lifecycle.builds.recipe import REPO_DRIVERS_DIR, load_recipe, parse_recipe
from hwmgr.lifecycle.builds.srpm import check_tarball
from hwmgr.lifecycle.builds.tarball import inspect_tarball, kind_of, source_version

VERSION = "9.8.7-230.0.1.0"
TOP = f"netxtreme-bnxt_en-{VERSION}"
NAME = f"{TOP}.tar.gz"
FILES = {"Makefile": b"obj-m += bnxt_en.o\n", "bnxt.c": b"/* bnxt */\n",
         "tf_core/tf.c": b"/* tf */\n", "ChangeLog": b"not listed in MANIFEST\n"}
LISTED = ("Makefile", "bnxt.c", "tf_core/tf.c")


def recipe():
    return load_recipe("bnxt_en", REPO_DRIVERS_DIR)


def manifest(files: dict[str, bytes], listed: tuple[str, ...] = LISTED) -> bytes:
    """Broadcom's MANIFEST: `sha512sum` lines of the files it vouches for."""
    return "".join(f"{hashlib.sha512(files[n]).hexdigest()}  {n}\n" for n in listed).encode()


def members(files: dict[str, bytes] | None = None, sums: bytes | None = None,
            extra: tuple[Member, ...] = ()) -> list[Member]:
    """A tarball laid out as Broadcom ships bnxt_en: top dir, bnxt_en/ with a MANIFEST."""
    files = dict(FILES if files is None else files)
    out = [info(TOP, tarfile.DIRTYPE), info(f"{TOP}/bnxt_en", tarfile.DIRTYPE),
           info(f"{TOP}/bnxt_en/tf_core", tarfile.DIRTYPE)]
    out += [info(f"{TOP}/bnxt_en/{n}", data=d) for n, d in files.items()]
    out.append(info(f"{TOP}/bnxt_en/MANIFEST", data=manifest(FILES) if sums is None else sums))
    return out + list(extra)


def write(tmp_path: Path, ms: list[Member], name: str = NAME, compress: bool = True) -> Path:
    path = tmp_path / name
    path.write_bytes(tar_bytes(ms, compress=compress))
    return path


def test_bnxt_en_recipe_reads_broadcoms_layout() -> None:
    r = recipe()
    assert (r.source_type, r.manifest) == ("tarball", "MANIFEST")
    assert r.source_subdir(VERSION) == f"{TOP}/bnxt_en"
    assert r.tarball_version(NAME) == VERSION
    assert r.tarball_version("netxtreme-bnxt_en-1.10.2-227.0.130.0.tar.gz") == "1.10.2-227.0.130.0"
    assert r.tarball_version("bnxt_en-1.0.tar.gz") is None
    # an SRPM recipe reads the tarball it holds (Intel publishes both)
    assert load_recipe("igb", REPO_DRIVERS_DIR).tarball_version("igb-5.18.7.tar.gz") == "5.18.7"


@pytest.mark.parametrize("source, field", [
    ({"type": "zip", "tarball": "x-{version}.zip"}, "source.type"),
    ({"type": "tarball", "tarball": "x.tar.gz"}, "source.tarball"),
    ({"type": "tarball", "tarball": "x-{version}.zip"}, "source.tarball"),
    ({"type": "tarball", "tarball": "x-{version}.tar.gz", "srpm_name": "x"}, "source.srpm_name"),
    ({"type": "tarball", "tarball": "x-{version}.tar.gz", "manifest": "../M"}, "source.manifest"),
    ({"type": "tarball", "tarball": "x-{version}.tar.gz", "manifest": "M*"}, "source.manifest"),
])
def test_bad_tarball_recipes_name_the_field(tmp_path: Path, source: dict, field: str) -> None:
    raw = json.loads((REPO_DRIVERS_DIR / "bnxt_en" / "recipe.json").read_text())
    raw["source"] = source
    (tmp_path / "bnxt_en").mkdir()
    path = tmp_path / "bnxt_en" / "recipe.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(BadInputError, match=f"{path}: field '{field}'"):
        parse_recipe(path)


def test_broadcom_layout_passes_with_its_manifest(tmp_path: Path) -> None:
    path = write(tmp_path, members())
    facts = inspect_tarball(path, recipe())
    assert (facts.version, facts.manifest_checked) == (VERSION, len(LISTED))
    assert kind_of(path) == "tarball"
    assert source_version(None, recipe(), path) == VERSION  # type: ignore[arg-type]
    # the same tree in xz, and the subdir reached through the archive's own link (1.7.23's
    # layout: bnxt_en -> bnxt_en-<ver>)
    xz = tmp_path / "x" / f"{TOP}.tar.xz"
    xz.parent.mkdir()
    xz.write_bytes(lzma.compress(tar_bytes(members(), compress=False)))
    r = recipe()
    linked = [(ti, d) for ti, d in members()]
    for ti, _ in linked:
        ti.name = ti.name.replace(f"{TOP}/bnxt_en", f"{TOP}/bnxt_en-{VERSION}")
    linked.insert(1, info(f"{TOP}/bnxt_en", tarfile.SYMTYPE, link=f"bnxt_en-{VERSION}"))
    assert inspect_tarball(write(tmp_path / "x", linked), r).manifest_checked == len(LISTED)
    with pytest.raises(RefusedError, match="not named like recipe 'bnxt_en' expects"):
        inspect_tarball(xz, r)  # the recipe names .tar.gz: an .xz is another file


def _sums_with(**changes: bytes) -> bytes:
    files = dict(FILES)
    files.update(changes)
    return manifest(files)


HOSTILE = {
    # name: (members, the words of the refusal after "<archive>: ")
    "manifest-mismatch": (lambda: members(files={**FILES, "bnxt.c": b"/* changed */\n"}),
                          f"member '{TOP}/bnxt_en/bnxt.c' does not match its sha512"),
    "manifest-missing-file": (lambda: members(files={k: v for k, v in FILES.items()
                                                     if k != "bnxt.c"}),
                              f"member '{TOP}/bnxt_en/bnxt.c' is listed in"),
    "manifest-garbage": (lambda: members(sums=b"not a sum line\n"),
                         f"member '{TOP}/bnxt_en/MANIFEST' line 1: not a sha512"),
    "manifest-escapes": (lambda: members(sums=_sums_with() + (
        hashlib.sha512(b"x").hexdigest() + "  ../../etc/passwd\n").encode()),
        "lists '../../etc/passwd', outside the tree"),
    "dotdot": (lambda: members(extra=(info(f"{TOP}/../evil", data=b"x"),)),
               f"refusing member '{TOP}/../evil': '..' in path"),
    "absolute": (lambda: members(extra=(info("/etc/cron.d/evil", data=b"x"),)),
                 "refusing member '/etc/cron.d/evil': absolute path"),
    "symlink-escapes": (lambda: members(extra=(info(f"{TOP}/bnxt_en/up", tarfile.SYMTYPE,
                                                    link="../../.."),)),
                        f"refusing member '{TOP}/bnxt_en/up': symlink '../../..' leads outside"),
    "symlink-absolute": (lambda: members(extra=(info(f"{TOP}/k", tarfile.SYMTYPE,
                                                     link="/lib/modules"),)),
                         f"refusing member '{TOP}/k': symlink to absolute path"),
    "write-through-link": (lambda: members(extra=(
        info(f"{TOP}/l", tarfile.SYMTYPE, link="bnxt_en"),
        info(f"{TOP}/l/x.c", data=b"x"))),
        f"refusing member '{TOP}/l/x.c': path goes through symlink"),
    "hardlink-outside": (lambda: members(extra=(info(f"{TOP}/h", tarfile.LNKTYPE,
                                                     link="/etc/shadow"),)),
                         f"refusing member '{TOP}/h': hard link to '/etc/shadow'"),
    "device": (lambda: members(extra=(info(f"{TOP}/sda", tarfile.BLKTYPE, major=8),)),
               f"refusing member '{TOP}/sda': device node"),
    "duplicate": (lambda: members(extra=(info(f"{TOP}/bnxt_en/bnxt.c", data=b"2"),)),
                  f"refusing member '{TOP}/bnxt_en/bnxt.c': duplicate member"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_tarball_refused_naming_archive_and_member(tmp_path: Path, case: str) -> None:
    make, words = HOSTILE[case]
    path = write(tmp_path, make())
    with pytest.raises(RefusedError) as exc:
        inspect_tarball(path, recipe())
    line = str(exc.value)
    assert line.startswith(f"{NAME}: ") and words in line and "\n" not in line, line


def test_huge_member_and_member_count_are_bounded(tmp_path: Path) -> None:
    """A member declaring more than the bound (no data behind it: the bound holds before
    anything is read) and more members than the bound are refused, the archive named."""
    huge = write(tmp_path, members(extra=(info(f"{TOP}/big", data=b"", size=3 << 30),)))
    with pytest.raises(RefusedError, match=f"^{NAME}: unpacks to more than"):
        inspect_tarball(huge, recipe())
    (tmp_path / "m").mkdir()
    many = write(tmp_path / "m", members())
    with pytest.raises(RefusedError, match=f"^{NAME}: more than 5 members"):
        check_tarball(many, max_members=5)


@pytest.mark.parametrize("blob", [b"\x1f\x8b\x08\x00garbage", b"", b"plain words",
                                  gzip.compress(b"\x00" * 10, mtime=0)[:-8]],
                         ids=["gzip-magic-then-garbage", "empty", "not-gzip", "cut-gzip"])
def test_bad_gzip_is_one_line_naming_the_file(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / NAME
    path.write_bytes(blob)
    with pytest.raises(HwmgrError) as exc:
        inspect_tarball(path, recipe())
    assert str(path) in str(exc.value) or NAME in str(exc.value)
    assert "\n" not in str(exc.value) and "Traceback" not in str(exc.value)


def test_truncated_tarball_refused(tmp_path: Path) -> None:
    whole = tar_bytes(members())
    path = tmp_path / NAME
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(HwmgrError, match=NAME):
        inspect_tarball(path, recipe())


def test_what_is_not_a_tarball_goes_to_rpm(tmp_path: Path) -> None:
    """Only a tarball's name makes a tarball; anything else is rpm's to refuse (exit 9, as
    before tarballs), and a FIFO named like a tarball is refused before it is opened."""
    path = tmp_path / "bnxt.zip"
    path.write_bytes(b"PK\x03\x04")
    assert kind_of(path) == "srpm"
    fifo = tmp_path / NAME
    os.mkfifo(fifo)
    with pytest.raises(BadInputError, match="not a file"):
        kind_of(fifo)


@pytest.mark.slow  # two CLI runs in process: a catalog load each (~1 s)
def test_cli_refuses_hostile_tarball_and_changes_nothing(tmp_path: Path) -> None:
    """`catalog trust` and `recipe check` from the directory holding the file: exit 9, one
    line naming the archive and member; no site file written, nothing cached."""
    make, words = HOSTILE["manifest-mismatch"]
    write(tmp_path, make())
    site = tmp_path / "catalog.d"
    site.mkdir()
    layer = {"schema_version": 3, "drivers": {"bnxt_en": {"versions": {VERSION: {
        "status": "known-good", "reason": "a generated test tarball",
        "evidence": [{"title": "generated by tests/test_vendor_tarball.py", "kind": "lab",
                      "observed": "laid out as Broadcom ships bnxt_en"}],
        "source": {"type": "tarball", "filename": NAME, "verified": False}}}}}}
    (site / "20-bnxt.json").write_text(json.dumps(layer))
    (tmp_path / "hwmgr.json").write_text("{}\n")
    env = {"HWMGR_SITE_CATALOG_DIR": str(site), "HWMGR_CACHE_DIR": str(tmp_path / "cache"),
           "HWMGR_STATE_DIR": str(tmp_path / "state"),
           "HWMGR_CONFIG": str(tmp_path / "hwmgr.json")}
    res = run_cli("catalog", "trust", "bnxt_en", VERSION, "--file", NAME, "--yes", env=env,
                  cwd=tmp_path)
    assert res.returncode == EXIT_REFUSED, res.stderr
    assert words in res.stderr and NAME in res.stderr
    assert not (site / "50-trusted.json").exists() and not (tmp_path / "cache").exists()
    kver = headers_kernel()
    if kver is None:
        return  # recipe check first asks for the kernel's headers (make test installs them)
    res = run_cli("recipe", "check", "bnxt_en", "--file", NAME, "--kernel", kver,
                  "--state-dir", str(tmp_path / "state"), env=env, cwd=tmp_path)
    assert res.returncode == EXIT_REFUSED, res.stderr
    assert words in res.stderr and NAME in res.stderr
    assert not any((tmp_path / "state" / "work").iterdir())  # the scratch trees are gone
