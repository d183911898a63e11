"""catalog-src/kernel_builds.py: Debian and Ubuntu kernel changelogs (unmodified excerpts in
tests/fixtures/catalog-src/kernel-builds/, see its README) to ABI -> upstream base pairs;
no network."""

from __future__ import annotations

import json
import lzma
import tarfile
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from support.catalog_src import load

# the miners run by hand on fetched sources, not on a host: make test runs these, make
# check (the editing lane) leaves them out
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
FIX = Path(__file__).resolve().parent / "fixtures" / "catalog-src" / "kernel-builds"




kb = load("kernel_builds")


def _entries(name: str) -> list[Any]:
    return kb.parse_changelog((FIX / name).read_text(encoding="utf-8"))


def _code(version: str) -> Any:
    return kb.Gencontrol.from_code(version, (FIX / f"gencontrol-{version}.py.txt").read_text())


def test_bookworm_bump_lines() -> None:
    """'Bump ABI to 18' in linux (6.1.76-1): 6.1.0-18 is 6.1.76; likewise 17, 16, 15."""
    found = kb.debian_numbered(_entries("debian-bookworm-6.1.76-1..6.1.66-1.changelog"))
    assert found.table() == {"6.1.0-15": "6.1.66", "6.1.0-16": "6.1.67",
                             "6.1.0-17": "6.1.69", "6.1.0-18": "6.1.76"}
    assert found.builds["6.1.0-18"] == {"6.1.76-1": "6.1.76"}


def test_bookworm_automatic_abi_needs_gencontrol() -> None:
    """6.1.147-1 bumps to 38; 6.1.148-1 says the name is generated automatically, and
    gencontrol.py (counting from 6.1.147-1 = 38) makes it 39. Without gencontrol.py the
    automatic ABI is left out, not guessed."""
    entries = _entries("debian-bookworm-6.1.148-1..6.1.147-1.changelog")
    code = _code("6.1.176-1")
    assert code.anchor == ("6.1.147-1", 38)
    assert code.serial is None
    assert kb.debian_numbered(entries, [code]).table() == {"6.1.0-38": "6.1.147",
                                                            "6.1.0-39": "6.1.148"}
    assert kb.debian_numbered(entries).table() == {"6.1.0-38": "6.1.147"}


def test_bookworm_anchor_mismatch_is_an_error() -> None:
    entries = _entries("debian-bookworm-6.1.148-1..6.1.147-1.changelog")
    wrong = kb.Gencontrol("6.1.176-1", None, ("6.1.147-1", 37))
    with pytest.raises(kb.SourceError):
        kb.debian_numbered(entries, [wrong])


def test_bullseye_abi_shared_by_uploads() -> None:
    """5.10.179-1 bumps to 23 (179-2, 179-3 keep it), 5.10.179-4 bumps to 24."""
    found = kb.debian_numbered(_entries("debian-bullseye-5.10.179-5..5.10.179-1.changelog"))
    assert found.table() == {"5.10.0-23": "5.10.179", "5.10.0-24": "5.10.179"}
    assert sorted(found.builds["5.10.0-23"]) == ["5.10.179-1", "5.10.179-2", "5.10.179-3"]
    assert sorted(found.builds["5.10.0-24"]) == ["5.10.179-4", "5.10.179-5"]


def test_trixie_marker_entry() -> None:
    """6.12.33-1 (unstable) introduces the release number: ABI 6.12.33+deb13."""
    entries = _entries("debian-trixie-6.12.33-1.changelog")
    assert kb.debian_numbered(entries).table() == {}
    assert kb.debian_release_named(entries).table() == {"6.12.33+deb13": "6.12.33"}


def test_trixie_serial_suffix_follows_gencontrol() -> None:
    """A second upload of one upstream version: 6.12.74-2 is 6.12.74+deb13+1 (gencontrol.py
    of 6.12.74-2 appends '+'), 6.12.90-2 is 6.12.90+deb13.1 (6.12.90-2 appends '.')."""
    codes = [_code("6.12.74-2"), _code("6.12.90-2")]
    assert [c.serial for c in codes] == ["+", "."]
    e74 = _entries("debian-trixie-6.12.74-2..6.12.74-1.changelog")
    e90 = _entries("debian-trixie-6.12.90-2..6.12.90-1.changelog")
    assert kb.debian_release_named(e74, codes, marked=True).table() == {
        "6.12.74+deb13": "6.12.74", "6.12.74+deb13+1": "6.12.74"}
    assert kb.debian_release_named(e90, codes, marked=True).table() == {
        "6.12.90+deb13": "6.12.90", "6.12.90+deb13.1": "6.12.90"}
    # no gencontrol.py settles the separator: the second upload is left out
    assert kb.debian_release_named(e90, marked=True).table() == {"6.12.90+deb13": "6.12.90"}
    assert kb.serial_separator("6.12.85-2", codes) is None  # between '+' and '.': unknown
    assert kb.serial_separator("6.12.115-2", codes) == "."  # newer than every sample


def test_packages_cross_check() -> None:
    archive = kb.packages_abis((FIX / "Packages-bookworm-security.excerpt").read_text())
    assert archive == {"6.1.0-57": "6.1.192-3"}
    trixie = kb.packages_abis((FIX / "Packages-trixie-security.excerpt").read_text())
    assert trixie == {"6.12.115+deb13": "6.12.115-1", "6.12.115+deb13.1": "6.12.115-2"}
    found = kb.Found()
    found.add("6.1.0-57", "6.1.192-3", "6.1.192")
    assert kb.cross_check(found, archive) == []
    other = kb.Found()
    other.add("6.1.0-57", "6.1.192-2", "6.1.192")
    assert kb.cross_check(other, archive) == [
        "6.1.0-57: archive 6.1.192-3, changelog ['6.1.192-2']"]


def test_jammy_update_sections() -> None:
    """5.15.0-184.194 applies v5.15.200 ('- Linux 5.15.200'); 5.15.0-185.195 keeps it."""
    found = kb.ubuntu_found(_entries("ubuntu-jammy-5.15.0-185.195..5.15.0-184.194.changelog"))
    assert found.table() == {"5.15.0-184": "5.15.200", "5.15.0-185": "5.15.200"}


def test_jammy_partial_update_is_not_a_base() -> None:
    """5.15.0-75.82 states 'Jammy update: v5.15.102' for one revert, without 'Linux 5.15.102':
    its base stays 5.15.99 from 5.15.0-74.81."""
    entries = _entries("ubuntu-jammy-5.15.0-75.82..5.15.0-74.81.changelog")
    assert kb.released_updates(entries[0].body) == []
    assert kb.released_updates(entries[1].body) == ["5.15.99"]
    assert kb.ubuntu_found(entries).table() == {"5.15.0-74": "5.15.99", "5.15.0-75": "5.15.99"}


def test_focal_update_sections() -> None:
    found = kb.ubuntu_found(_entries("ubuntu-focal-5.4.0-164.181.changelog"))
    assert found.table() == {"5.4.0-164": "5.4.248"}
    assert found.builds["5.4.0-164"] == {"5.4.0-164.181": "5.4.248"}


NOBLE = "ubuntu-noble-6.8.0-45.45..6.8.0-40.40.changelog"


def test_noble_update_sections_and_patchsets() -> None:
    """6.8.0-40.40 applies v6.8.9 .. v6.8.12 whole; 6.8.0-44.44 on, 6.8 ended upstream and
    Ubuntu takes dated patchsets from newer stable series: no upstream release is their base."""
    entries = _entries(NOBLE)
    assert [e.version for e in entries] == ["6.8.0-45.45", "6.8.0-44.44", "6.8.0-40.40"]
    assert sorted(kb.released_updates(entries[2].body), key=kb.vkey) == [
        "6.8.9", "6.8.10", "6.8.11", "6.8.12"]
    found = kb.ubuntu_found(entries)
    assert found.table() == {"6.8.0-40": "6.8.12"}
    assert found.picked == ["6.8.0-44.44", "6.8.0-45.45"]
    # focal's "upstream stable patchset v5.4.192" is its own series, not a dated pick
    assert not kb._PATCHSET.match("  * Focal update: upstream stable patchset v5.4.192 (LP: #1)")


def test_update_keeps_the_other_sections(tmp_path: Path) -> None:
    """--update rewrites the distributions given sources for and keeps the rest (the
    hand-kept lifecycle, Debian's table when only Ubuntu changelogs are given)."""
    out = tmp_path / "kernel-builds.json"
    keep = {"debian": {"abi": {"6.1.0-18": "6.1.76"}, "evidence": []},
            "lifecycle": {"as_of": "2026-11"}}
    out.write_text(json.dumps({"schema_version": 3, "kernel_builds": keep}))
    args = ["--source", "ubuntu", str(FIX / NOBLE), "https://example.invalid/noble",
            "-o", str(out)]
    assert kb.main([*args, "--update"]) == 0
    doc = json.loads(out.read_text())
    assert doc["kernel_builds"]["debian"] == keep["debian"]
    assert doc["kernel_builds"]["lifecycle"] == keep["lifecycle"]
    ubu = doc["kernel_builds"]["ubuntu"]
    assert ubu["abi"] == {"6.8.0-40": "6.8.12"}
    assert "6.8.0-44.44 .. 6.8.0-45.45" in ubu["evidence"][0]["observed"]
    assert kb.main(args) == 0  # without --update: the file is the run's output alone
    assert list(json.loads(out.read_text())["kernel_builds"]) == ["ubuntu"]


def test_natural_order() -> None:
    keys = ["6.1.0-10", "6.12.74+deb13+1", "5.10.0-9", "6.1.0-9", "6.12.74+deb13",
            "6.12.100+deb13"]
    assert sorted(keys, key=kb.natural_key) == [
        "5.10.0-9", "6.1.0-9", "6.1.0-10", "6.12.74+deb13", "6.12.74+deb13+1",
        "6.12.100+deb13"]


def _tarball(tmp: Path, name: str, changelog: str, gencontrol: str) -> Path:
    buf = BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for member, text in (("debian/changelog", changelog),
                             ("debian/bin/gencontrol.py", gencontrol)):
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, BytesIO(data))
    path = tmp / name
    path.write_bytes(lzma.compress(buf.getvalue()))
    return path


def test_main_writes_the_catalog(tmp_path: Path) -> None:
    """The whole run: changelogs, a gencontrol.py source and a Packages index in; the
    schema-3 document out, keys in natural order, indent=1, the same twice."""
    src = _tarball(tmp_path, "linux_6.1.176-1.debian.tar.xz",
                   (FIX / "debian-bookworm-6.1.148-1..6.1.147-1.changelog").read_text(),
                   (FIX / "gencontrol-6.1.176-1.py.txt").read_text())
    args = ["--source", "debian", str(FIX / "debian-bookworm-6.1.76-1..6.1.66-1.changelog"),
            "https://example.invalid/bookworm-a",
            "--source", "debian", str(src), "https://example.invalid/bookworm-b",
            "--source", "gencontrol", str(src), "https://example.invalid/gencontrol",
            "--source", "debian", str(FIX / "debian-trixie-6.12.33-1.changelog"),
            "https://example.invalid/trixie",
            "--source", "ubuntu",
            str(FIX / "ubuntu-jammy-5.15.0-185.195..5.15.0-184.194.changelog"),
            "https://example.invalid/jammy",
            "--source", "ubuntu", str(FIX / "ubuntu-focal-5.4.0-164.181.changelog"),
            "https://example.invalid/focal"]
    out = tmp_path / "kernel-builds.json"
    assert kb.main([*args, "-o", str(out)]) == 0
    text = out.read_text()
    doc = json.loads(text)
    assert doc["schema_version"] == 3
    deb = doc["kernel_builds"]["debian"]
    assert list(deb["abi"]) == ["6.1.0-15", "6.1.0-16", "6.1.0-17", "6.1.0-18", "6.1.0-38",
                                "6.1.0-39"]
    assert deb["abi"]["6.1.0-18"] == "6.1.76"
    # trixie's names carry their upstream version: evidence, no table row
    assert [e["url"] for e in deb["evidence"]] == ["https://example.invalid/trixie",
                                                   "https://example.invalid/bookworm-b",
                                                   "https://example.invalid/bookworm-a",
                                                   "https://example.invalid/gencontrol"]
    assert "6.12.33+deb13" in deb["evidence"][0]["observed"]
    assert all(set(e) == {"title", "url", "observed"} for e in deb["evidence"])
    ubu = doc["kernel_builds"]["ubuntu"]
    assert ubu["abi"] == {"5.4.0-164": "5.4.248", "5.15.0-184": "5.15.200",
                          "5.15.0-185": "5.15.200"}
    assert text == json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    again = tmp_path / "again.json"
    assert kb.main([*args, "-o", str(again)]) == 0
    assert again.read_text() == text


def test_main_rejects_disagreeing_archive(tmp_path: Path) -> None:
    index = tmp_path / "Packages"
    index.write_text("Package: linux-headers-6.1.0-18-common\nSource: linux\n"
                     "Version: 6.1.69-1\n\n")
    assert kb.main(["--source", "debian",
                    str(FIX / "debian-bookworm-6.1.76-1..6.1.66-1.changelog"), "u",
                    "--source", "packages", str(index), "u2"]) == 1
