"""Tests for hwmgr.catalog.versions and `hwmgr vercmp`: rpm is the oracle for its scheme."""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.shipped import shipped_doc

from hwmgr.catalog.versions import (
    EVR,
    SCHEMES,
    compare,
    get_scheme,
    newest,
    parse,
    parse_driver_version,
    parse_evr,
    parse_firmware,
    rpmvercmp,
    sort_key,
)
from hwmgr.cli import main
from hwmgr.errors import EXIT_BAD_INPUT, EXIT_USAGE, VersionError
from hwmgr.host.runner import SubprocessRunner

RPM = shutil.which("rpm")
needs_rpm = pytest.mark.skipif(RPM is None, reason="rpm is not installed (the oracle)")

# rpm.vercmp parses full EVRs (rpmverParse + rpmverCmp); pairs are read from a file so no
# quoting or %-macro expansion touches them.
_LUA = (
    '%{lua: for line in io.lines("PATH") do '
    'local a, b = line:match("^(.-)\\t(.*)$"); print(rpm.vercmp(a, b) .. " ") end}'
)


def rpm_oracle(pairs: Sequence[tuple[str, str]]) -> list[int]:
    """rpm's own answers for all pairs, from ONE `rpm --eval` process."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pairs.txt"
        path.write_text("".join(f"{a}\t{b}\n" for a, b in pairs), encoding="ascii")
        res = SubprocessRunner().run(["rpm", "--eval", _LUA.replace("PATH", str(path))])
    assert res.ok, res.describe()
    answers = [int(x) for x in res.stdout.split()]
    assert len(answers) == len(pairs)
    return answers


# ---------------------------------------------------------------------------------------------
# generators: similar pairs (mutations of one another) so comparisons go deep into segments

_ATOMS = ["0", "00", "1", "01", "007", "2", "9", "10", "99", "100", "12345678901234567890",
          "a", "b", "z", "A", "Z", "rc", "beta", "git", "p", "el"]
_SEPS = [".", ".", ".", "_", "+", "~", "^", ""]


def _random_version(rng: random.Random, dash: bool = False) -> str:
    parts = [rng.choice(_ATOMS[:11])]  # start with a digit
    for _ in range(rng.randint(0, 5)):
        parts.append(rng.choice(_SEPS + (["-"] if dash else [])))
        parts.append(rng.choice(_ATOMS))
    if rng.random() < 0.15:
        parts.append(rng.choice(["~", "^", ".", "~~", "^^"]))
    return "".join(parts)


def _mutate(rng: random.Random, s: str) -> str:
    ops = rng.randint(1, 3)
    for _ in range(ops):
        i = rng.randint(0, len(s))
        op = rng.random()
        if op < 0.35:
            s = s[:i] + rng.choice(_ATOMS + _SEPS) + s[i:]
        elif op < 0.7 and len(s) > 1:
            s = s[:i] + s[i + 1 :]
        else:
            s = s[:i] + rng.choice("0123456789az~^._+") + s[i + 1 :]
    return s


def _valid_rpm(s: str) -> bool:
    try:
        parse_evr(s)
    except VersionError:
        return False
    return True


def _random_evr(rng: random.Random) -> str:
    epoch = rng.choice(["", "", "", "0:", "1:", "2:", "00:", "10:", ":"])
    rel = "" if rng.random() < 0.3 else "-" + _random_version(rng)
    return epoch + _random_version(rng) + rel


def _pairs(seed: int, count: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    while len(out) < count:
        kind = rng.random()
        if kind < 0.45:  # plain versions (pure rpmvercmp)
            a = _random_version(rng)
            b = _mutate(rng, a) if rng.random() < 0.8 else _random_version(rng)
        elif kind < 0.55:
            a = b = _random_version(rng)
        else:  # full EVR
            a = _random_evr(rng)
            b = _mutate(rng, a) if rng.random() < 0.7 else _random_evr(rng)
        if _valid_rpm(a) and _valid_rpm(b):
            out.append((a, b))
    return out


# from rpm's own test suite (tests/rpmvercmp.at) plus EVR cases; also checked against the oracle
KNOWN = [
    ("1.0", "1.0", 0), ("1.0", "2.0", -1), ("2.0.1", "2.0", 1), ("2.0.1a", "2.0.1", 1),
    ("5.5p1", "5.5p10", -1), ("10xyz", "10.1xyz", -1), ("xyz10", "xyz10.1", -1),
    ("xyz.4", "8", -1), ("5.5p2", "5.6p1", -1), ("6.0.rc1", "6.0", 1), ("10b2", "10a1", 1),
    ("1.0aa", "1.0a", 1), ("10.0001", "10.1", 0), ("10.0001", "10.0039", -1),
    ("4.999.9", "5.0", -1), ("20101121", "20101122", -1), ("2_0", "2_0", 0),
    ("2.0", "2_0", 0), ("a", "a", 0), ("a+", "a_", 0), ("+a", "_a", 0),
    ("1.0~rc1", "1.0", -1), ("1.0~rc1", "1.0~rc2", -1), ("1.0~rc1~git123", "1.0~rc1", -1),
    ("1.0^", "1.0", 1), ("1.0^git1", "1.0", 1), ("1.0^git1", "1.01", -1),
    ("1.0^20160101", "1.0.1", -1), ("1.0^20160101^git1", "1.0^20160101", 1),
    ("1.0~rc1^git1", "1.0~rc1", 1), ("1.0^git1~pre", "1.0^git1", -1),
    ("1.0^git1~pre", "1.0", 1), ("1:1.0", "2.0", 1), ("0:1.0", "1.0", 0),
    ("1.0-1", "1.0-2", -1), ("1.0-1", "1.0", 1), ("1.0-2", "1.0-10", -1), ("00:1", "0:1", 0),
    ("1.0-1-2", "1.0-1-10", -1), (":1.0", "0:1.0", 0), ("2:0.1-1", "1:9.9-9", 1),
]


@pytest.mark.parametrize(("a", "b", "expected"), KNOWN)
def test_known_rpm_answers(a: str, b: str, expected: int) -> None:
    assert compare(a, b, "rpm") == expected
    assert compare(b, a, "rpm") == -expected


@needs_rpm
def test_known_pairs_agree_with_rpm() -> None:
    pairs = [(a, b) for a, b, _ in KNOWN]
    assert [compare(a, b) for a, b in pairs] == rpm_oracle(pairs)
    assert [e for _, _, e in KNOWN] == rpm_oracle(pairs)


@needs_rpm
def test_rpm_scheme_matches_real_rpm_on_random_pairs() -> None:
    pairs = _pairs(seed=20261121, count=3000)
    assert sum(1 for a, _ in pairs if ":" in a or "-" in a) > 500  # EVRs really covered
    assert sum(1 for a, _ in pairs if "~" in a or "^" in a) > 500
    oracle = rpm_oracle(pairs)
    assert {-1, 0, 1} <= set(oracle)
    mismatches = [(a, b, compare(a, b), o) for (a, b), o in zip(pairs, oracle)
                  if compare(a, b) != o]
    assert not mismatches, mismatches[:10]


_plain = st.text(alphabet="0123456789aZz~^._+", min_size=1, max_size=14).filter(
    lambda s: any(c.isalnum() for c in s)
)
_evr = st.builds(
    lambda e, v, r: e + v + r,
    st.sampled_from(["", "0:", "1:", "01:", "3:"]),
    _plain,
    st.one_of(st.just(""), _plain.map(lambda r: "-" + r)),
)


@needs_rpm
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_evr, _evr), min_size=100, max_size=100))
def test_rpm_scheme_matches_real_rpm_hypothesis(pairs: list[tuple[str, str]]) -> None:
    # one rpm process per hypothesis example (100 pairs each)
    assert [compare(a, b) for a, b in pairs] == rpm_oracle(pairs)


@given(st.text(alphabet="0123456789abAZ~^._+-:!", max_size=12),
       st.text(alphabet="0123456789abAZ~^._+-:!", max_size=12))
def test_rpmvercmp_is_antisymmetric(a: str, b: str) -> None:
    assert rpmvercmp(a, b) == -rpmvercmp(b, a)
    assert rpmvercmp(a, a) == 0


def test_separator_only_strings() -> None:
    # rpmvercmp itself orders anything (rpm's test suite: '+' == '_'); compare() refuses them
    assert rpmvercmp("+", "_") == 0
    assert rpmvercmp("~", "") == -1 and rpmvercmp("^", "") == 1
    with pytest.raises(VersionError, match="no version part"):
        compare("+", "_")


def test_parse_evr_splits_like_rpm() -> None:
    assert parse_evr("1:2.0-3.el7") == EVR("1", "2.0", "3.el7")
    assert parse_evr("2.0") == EVR(None, "2.0", None)
    assert parse_evr("1.0-1-2") == EVR(None, "1.0-1", "2")
    assert parse_evr(":1.0") == EVR("0", "1.0", None)
    assert str(parse_evr("1:2.0-3")) == "1:2.0-3"


@pytest.mark.parametrize("bad", ["", "   ", None, 12, "1.0 2", "1.\x00", "1.0-", "1:", "~~",
                                 "1.0-~", "v\u00e9rsion1"])
def test_rpm_garbage_is_a_version_error(bad: object) -> None:
    with pytest.raises(VersionError) as exc:
        compare(bad, "1.0", "rpm")  # type: ignore[arg-type]
    assert "\n" not in str(exc.value) and str(exc.value)


# ---------------------------------------------------------------------------------------------
# driver scheme

DRIVER_PARSE = [
    # raw, base, in_kernel, distro, kernel_release
    ("5.1.0-k", "5.1.0", True, None, False),
    ("5.1.0-k-rh7.6", "5.1.0", True, "rh7.6", False),
    ("4.1.307r", "4.1.307", True, "rhel", False),
    ("10.2.470.14", "10.2.470.14", False, None, False),
    ("07.719.03.00-rc1", "07.719.03.00", False, None, False),
    ("07.719.03.00-rh1", "07.719.03.00", False, "rh1", False),
    ("3.0-1 (January 2015)", "3.0-1", False, None, False),
    ("  version:  2.3.2-k  ", "2.3.2", True, None, False),
    ("10.02.06.200-k", "10.02.06.200", True, None, False),
    ("7.3.21-k8-NAPI", "7.3.21", True, None, False),
    ("4.9-3.1.5", "4.9-3.1.5", False, None, False),
    ("5.14.0-362.13.1.el9_3", "5.14.0-362.13.1.el9_3", True, "el9_3", True),
    ("6.1.0-56-amd64", "6.1.0-56-amd64", True, None, True),
    ("3.10.0-957.5.1.el7.x86_64", "3.10.0-957.5.1.el7.x86_64", True, "el7", True),
    ("5.15.0-91-generic", "5.15.0-91-generic", True, None, True),
]


@pytest.mark.parametrize(("raw", "base", "in_kernel", "distro", "krel"), DRIVER_PARSE)
def test_parse_driver_version(raw: str, base: str, in_kernel: bool, distro: str | None,
                              krel: bool) -> None:
    dv = parse(raw, "emulex-driver")  # the vendor scheme: generic rows parse the same
    assert (dv.base, dv.in_kernel, dv.distro, dv.kernel_release) == (base, in_kernel, distro, krel)
    assert dv.raw == raw


def test_driver_details() -> None:
    assert parse_driver_version("3.0-1 (January 2015)").note == "January 2015"
    assert parse_driver_version("07.719.03.00-rc1").prerelease == "rc1"
    assert parse_driver_version("7.3.21-k8-NAPI").flavor == ("NAPI",)
    # a plain-looking version is a kernel release when it equals the running kernel
    assert not parse_driver_version("6.5.0-1").kernel_release
    assert parse_driver_version("6.5.0-1", kernel="6.5.0-1").kernel_release
    assert parse_driver_version("5.14.0-362", kernel="5.14.0-362.x86_64").kernel_release


DRIVER_CMP = [
    ("4.1.307r", "10.2.470.14", -1),  # seed 000: in-tree be2net vs vendor SRPM
    ("5.1.0-k-rh7.6", "5.1.0-k", 0),  # seed 002: distro suffix is not newer
    ("5.1.0-k", "5.1.0", 0),  # -k does not make it newer either
    ("5.1.0-k", "5.3.7", -1),
    ("5.1.0-k-rh7.6", "5.3.7", -1),
    ("5.1.0-k-rh7.6", "5.0.9", 1),
    ("07.719.03.00-rc1", "07.719.03.00", -1),  # pre-release sorts before the release
    ("07.719.03.00-rc1", "07.719.03.00-rc2", -1),
    ("07.719.03.00-rh1", "07.719.03.00", 0),
    ("3.0-1 (January 2015)", "3.0-1", 0),
    ("3.0-1", "3.0-2", -1),
    ("10.2.470.14", "10.2.470.9", 1),
    ("5.14.0-362.13.1.el9_3", "5.14.0-362.8.1.el9_3", 1),
    ("6.1.0-56-amd64", "6.1.0-9-amd64", 1),
    ("5.14.21-150500.55.39-default", "5.14.21-150500.55.7-default", 1),
]


@pytest.mark.parametrize(("a", "b", "expected"), DRIVER_CMP)
def test_driver_compare(a: str, b: str, expected: int) -> None:
    assert compare(a, b, "driver") == expected
    assert compare(b, a, "driver") == -expected


@pytest.mark.parametrize(("a", "b"), [
    ("5.14.0-362.13.1.el9_3", "5.1.0-k"),
    ("6.1.0-56-amd64", "10.2.470.14"),
    ("3.10.0-957.5.1.el7.x86_64", "4.1.307r"),
])
def test_driver_kernel_release_vs_vendor_is_refused(a: str, b: str) -> None:
    for x, y in ((a, b), (b, a)):
        with pytest.raises(VersionError, match="different schemes"):
            compare(x, y, "driver")
    # with the kernel named explicitly too
    with pytest.raises(VersionError):
        compare("6.5.0-1", "6.5.1", "driver", kernel="6.5.0-1")


@pytest.mark.parametrize("bad", ["", "  ", None, "N/A", "unknown", "1.0 beta", "5.1.0--k",
                                 "(note only)", "1.0-k-\u00fc"])
def test_driver_garbage(bad: object) -> None:
    with pytest.raises(VersionError) as exc:
        compare(bad, "1.0", "driver")  # type: ignore[arg-type]
    assert "\n" not in str(exc.value) and str(exc.value)


# ---------------------------------------------------------------------------------------------
# firmware scheme

FW_PARSE = [
    ("bc 5.2.3 NCSI 2.0.12", {"bc": "5.2.3", "ncsi": "2.0.12"}, "5.2.3"),
    ("6.00 0x800036cb 1.1747.0", {"nvm": "6.00", "etrack": "0x800036cb", "oem": "1.1747.0"},
     "6.00"),
    ("0x800008fd, 18.0.16", {"etrack": "0x800008fd", "orom": "18.0.16"}, "0x800008fd"),
    ("10.0.803.19", {"version": "10.0.803.19"}, "10.0.803.19"),
    ("2.1-0", {"version": "2.1-0"}, "2.1-0"),
    ("  2.1-0 (emulated)  ", {"version": "2.1-0"}, "2.1-0"),
]


@pytest.mark.parametrize(("raw", "parts", "principal"), FW_PARSE)
def test_parse_firmware(raw: str, parts: dict[str, str], principal: str) -> None:
    fw = parse(raw, "intel-firmware")  # Intel layouts on top of the generic firmware scheme
    assert fw.parts == parts
    assert fw.principal == principal
    assert fw.shape == tuple(parts)


FW_CMP = [
    ("bc 5.2.3 NCSI 2.0.12", "bc 5.2.10 NCSI 2.0.1", -1),  # principal (bc) decides
    ("bc 5.2.3 NCSI 2.0.12", "bc 5.2.3 NCSI 2.0.9", 1),  # then the other parts
    ("bc 5.2.3 NCSI 2.0.12", "bc 5.2.3 NCSI 2.0.12", 0),
    ("6.00 0x800036cb 1.1747.0", "6.01 0x80003000 1.1747.0", -1),
    ("6.80 0x800036cb 1.1747.0", "6.01 0x800036cb 1.1747.0", 1),
    ("0x800008fd, 18.0.16", "0x80000aee, 18.0.16", -1),  # eTrack compared as a number
    ("0x800008fd, 18.0.16", "0x800008fd 18.0.16", 0),
    ("10.0.803.19", "4.2.401.0", 1),
    ("2.1-0", "2.1-1", -1),
]


@pytest.mark.parametrize(("a", "b", "expected"), FW_CMP)
def test_firmware_compare(a: str, b: str, expected: int) -> None:
    assert compare(a, b, "intel-firmware") == expected
    assert compare(b, a, "intel-firmware") == -expected


@pytest.mark.parametrize(("a", "b"), [
    ("bc 5.2.3 NCSI 2.0.12", "10.0.803.19"),
    ("6.00 0x800036cb 1.1747.0", "0x800008fd, 18.0.16"),
    ("bc 5.2.3 NCSI 2.0.12", "bc 5.2.3 phy 1.34"),
    ("0x800008fd", "10.0.803.19"),
])
def test_firmware_shapes_refused(a: str, b: str) -> None:
    with pytest.raises(VersionError, match="different shapes"):
        compare(a, b, "intel-firmware")


@pytest.mark.parametrize("bad", ["", None, "N/A", "bc", "bc 5.2.3 NCSI", "bc 1 bc 2",
                                 "1.0 \u00e9"])
def test_firmware_garbage(bad: object) -> None:
    with pytest.raises(VersionError) as exc:
        parse_firmware(bad)  # type: ignore[arg-type]
    assert "\n" not in str(exc.value) and str(exc.value)


def test_vendor_rules_stay_in_their_schemes() -> None:
    """A vendor's suffix letters and firmware layouts (schemes.json) never leak into the
    generic schemes: 4.1.307r is a plain version to `driver`, Intel parts are unnamed."""
    generic = parse_driver_version("4.1.307r")
    assert (generic.base, generic.in_kernel, generic.distro) == ("4.1.307r", False, None)
    emulex = parse("4.1.307r", "emulex-driver")
    assert (emulex.base, emulex.in_kernel, emulex.distro) == ("4.1.307", True, "rhel")
    assert compare("4.1.307r", "4.1.307", "emulex-driver") == 0
    assert compare("4.1.307r", "4.1.307", "driver") == 1
    fw = parse_firmware("0x800008fd, 18.0.16")
    assert fw.shape == ("hex1", "version2")
    assert parse("0x800008fd, 18.0.16", "intel-firmware").shape == ("etrack", "orom")


# ---------------------------------------------------------------------------------------------
# registry

def test_registry() -> None:
    assert list(SCHEMES) == ["rpm", "driver", "firmware", "emulex-driver", "intel-firmware",
                            "broadcom-bnx2x", "adaptec-aacraid"]
    assert get_scheme("driver").name == "driver"
    with pytest.raises(VersionError) as exc:
        compare("1", "2", "deb")
    msg = str(exc.value)
    assert "'deb'" in msg and all(n in msg for n in ("rpm", "driver", "firmware"))
    assert isinstance(parse("1:2-3"), EVR)
    assert parse("5.1.0-k", "driver").in_kernel  # type: ignore[union-attr]
    assert sorted(["10.2.470.14", "4.1.307r", "5.1.0-k"], key=sort_key("driver")) == [
        "4.1.307r", "5.1.0-k", "10.2.470.14"]
    assert newest(["1.0", "1.0^git1", "1.0~rc1"]) == "1.0^git1"
    with pytest.raises(VersionError):
        newest([])


# ---------------------------------------------------------------------------------------------
# CLI

@pytest.mark.parametrize(("argv", "out"), [
    (["vercmp", "1.0", "2.0"], "<\n"),
    (["vercmp", "1:1.0", "2.0"], ">\n"),
    (["vercmp", "0:1.0-1", "1.0-1"], "=\n"),
    (["vercmp", "--scheme", "driver", "4.1.307r", "10.2.470.14"], "<\n"),
    (["vercmp", "5.1.0-k-rh7.6", "5.1.0-k", "--scheme", "driver"], "=\n"),
    (["vercmp", "--scheme", "firmware", "bc 5.2.3 NCSI 2.0.12", "bc 5.2.2 NCSI 2.0.12"], ">\n"),
])
def test_cli_prints_one_symbol(capsys: pytest.CaptureFixture[str], argv: list[str],
                               out: str) -> None:
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert cap.out == out
    assert cap.err == ""


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vercmp", "--json", "--scheme", "driver", "5.1.0-k", "5.3.7"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["format_version"] == 1 and env["command"] == "vercmp"
    assert env["status"] == "ok" and env["errors"] == []
    assert env["data"]["a"] == "5.1.0-k" and env["data"]["b"] == "5.3.7"
    assert env["data"]["scheme"] == "driver" and env["data"]["result"] == "<"


def test_an_unknown_scheme_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vercmp", "--scheme", "bogus", "1", "2"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "invalid choice: 'bogus'" in err


@pytest.mark.parametrize("argv", [
    ["vercmp", "", "1.0"],
    ["vercmp", "--scheme", "driver", "6.1.0-56-amd64", "5.1.0-k"],
    ["vercmp", "--scheme", "firmware", "bc 5.2.3 NCSI 2.0.12", "10.0.803.19"],
])
def test_cli_errors(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(argv) == EXIT_BAD_INPUT
    cap = capsys.readouterr()
    assert cap.out == ""
    assert len(cap.err.strip().splitlines()) == 1 and "error" in cap.err
    assert "Traceback" not in cap.err
    assert main([*argv, "--json"]) == EXIT_BAD_INPUT
    env = json.loads(capsys.readouterr().out)
    assert env["status"] == "error" and len(env["errors"]) == 1


def _hwmgr_binary() -> str:
    cand = Path(sys.executable).parent / "hwmgr"
    return str(cand) if cand.exists() else (shutil.which("hwmgr") or "hwmgr")


def test_cli_subprocess() -> None:
    runner = SubprocessRunner()
    res = runner.run([_hwmgr_binary(), "vercmp", "--scheme", "driver", "5.1.0-k", "5.3.7"])
    assert (res.rc, res.stdout, res.stderr) == (0, "<\n", "")
    res = runner.run([_hwmgr_binary(), "vercmp", "1.0", "1.0~rc1"])
    assert (res.rc, res.stdout) == (0, ">\n")
    res = runner.run([_hwmgr_binary(), "vercmp", "--scheme", "driver", "N/A", "1.0"])
    assert res.rc == EXIT_BAD_INPUT and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


# ----------------------------------------------------------- the shipped catalog's real strings
def _shipped_keys() -> list[tuple[str, str, str]]:
    """(driver, scheme, version) for every version key of the shipped catalog."""
    return [(name, e["version_scheme"], v) for name, e in shipped_doc()["drivers"].items()
            for v in e["versions"]]


SHIPPED_KEYS = _shipped_keys()
BY_DRIVER: dict[str, list[str]] = {}
for _name, _scheme, _v in SHIPPED_KEYS:
    BY_DRIVER.setdefault(f"{_name}:{_scheme}", []).append(_v)


def test_every_shipped_version_parses_under_its_scheme() -> None:
    assert len(SHIPPED_KEYS) > 300
    for _driver, scheme, ver in SHIPPED_KEYS:
        parse(ver, scheme)  # raises VersionError naming the string


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(BY_DRIVER)), st.data())
def test_shipped_versions_order_totally(key: str, data: st.DataObject) -> None:
    """Within one driver's scheme, the real keys compare as a total order: reflexive,
    antisymmetric and transitive (what plan's 'older than recommended' relies on)."""
    scheme = key.split(":", 1)[1]
    pool = BY_DRIVER[key]
    a, b, c = (data.draw(st.sampled_from(pool)) for _ in range(3))
    ab, ba = compare(a, b, scheme), compare(b, a, scheme)
    assert compare(a, a, scheme) == 0 and ab == -ba
    if ab <= 0 and compare(b, c, scheme) <= 0:
        assert compare(a, c, scheme) <= 0


@pytest.mark.parametrize("raw, scheme, normal", [
    ("5.1.0-k-rh7.7", "driver", "5.1.0-k-rh7.7"),  # ixgbe, RHEL 7.7 in-tree
    ("2.8.20-k", "driver", "2.8.20-k"),  # i40e
    ("3.0-1 (January 2015)", "driver", "3.0-1"),  # mlx5_core as ethtool -i prints it
    ("4.0-0", "driver", "4.0-0"),  # mlx4_en
    ("1.713.36-0 storm 7.13.15.0", "broadcom-bnx2x", "1.713.36-0"),
    ("1.2-1[41066]-ms", "adaptec-aacraid", "1.2-1.41066-ms"),
    ("11.4.0.0r", "emulex-driver", "11.4.0.0r"),
])
def test_field_strings_parse_and_normalise(raw: str, scheme: str, normal: str) -> None:
    assert parse(raw, scheme).normalized == normal


def test_field_firmware_strings_compare() -> None:
    assert compare("6.00 0x800036cb 1.1747.0", "5.05 0x80002892 1.1568.0",
                            "intel-firmware") > 0
    assert compare("2.130.353-1663", "2.130.403-4660", "firmware") < 0
