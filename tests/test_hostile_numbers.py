"""Huge and odd integers in untrusted text (issue 41 §1): sysfs attributes and ethtool -g/-l
values holding decimal, hex, octal or binary literals past Python's 4,300-digit limit (and
just past hwmgr's own bound), through inventory, check and apply --dry-run on a copy of
seed002-router, held to tests/hostile.py's rules; and hwmgr.numtext, their one owner, on
generated variants."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest
from hostile import Case, Sandbox, run_kind, sandbox_dir
from support import HOSTS

from hwmgr.numtext import MAX_NUMBER_CHARS, NumberError, digits_key, parse_int, to_int

BASE = HOSTS / "seed002-router"
DEV = "sys/bus/pci/devices/0000:01:00.0"
NET = "sys/class/net/enp1s0f0"
# what an attacker writes: each past the conversion limit or past hwmgr's bound
LITERALS = {
    "dec": "9" * 5000,
    "neg-dec": "-" + "1" * 4301,
    "hex": "0x" + "f" * 5000,
    "bin": "0b" + "1" * 20000,
    "oct": "0o" + "7" * 5000,
    "just-past-bound": "0x" + "f" * (MAX_NUMBER_CHARS - 1),
    "zeros": "0" * 10000 + "1",
}
# digits Python's int() takes that are not ASCII (Arabic-Indic, fullwidth, mathematical): one
# verb each, as unknown is all they can be
UNICODE_DIGITS = {
    "arabic-indic": "\u0663" * 5000,
    "fullwidth-short": "\uff11\uff15\uff10\uff10",
    "math-bold": "\U0001d7d7" * 40,
    "hex-unicode-digits": "0x" + "\u0661" * 30,
}
SYSFS = [f"{DEV}/numa_node", f"{DEV}/current_link_width", f"{DEV}/sriov_totalvfs",
         f"{DEV}/sriov_numvfs", f"{NET}/mtu", f"{NET}/speed", f"{NET}/carrier",
         f"{NET}/tx_queue_len"]
TOOL = [("commands/ethtool-g-enp1s0f0.txt", "RX:\t\t256"),
        ("commands/ethtool-g-enp1s0f0.txt", "RX:\t\t4096"),
        ("commands/ethtool-l-enp1s0f0.txt", "Combined:\t8"),
        ("commands/ethtool-l-enp1s0f0.txt", "Combined:\t63")]
VERBS = {
    "inventory": (lambda r: ["inventory", "--root", r], {0}),
    "inventory-json": (lambda r: ["inventory", "--json", "--root", r], {0}),
    "check": (lambda r: ["check", "--root", r], {0, 5, 11}),
    "check-json": (lambda r: ["check", "--json", "--root", r], {0, 5, 11}),
    "apply": (lambda r: ["apply", "--dry-run", "--yes", "--root", r], {0, 4, 8, 9, 11}),
}


def _copy(work: Path) -> Path:
    root = work / "snap"
    shutil.copytree(BASE, root, symlinks=True)
    return root


def _sysfs_case(rel: str, lit: str, verb: str) -> Case:
    argv, codes = VERBS[verb]

    def build(work: Path, sb: Sandbox) -> list[str]:
        root = _copy(work)
        target = Path(os.path.realpath(root / rel))
        assert str(target).startswith(str(root)), target
        target.write_text(lit + "\n")
        return argv(str(root))

    return Case("huge-int-sysfs", f"{rel}/{lit[:6]!a}{len(lit)}/{verb}", build, frozenset(codes))


def _tool_case(rel: str, line: str, lit: str, verb: str) -> Case:
    argv, codes = VERBS[verb]

    def build(work: Path, sb: Sandbox) -> list[str]:
        root = _copy(work)
        text = (root / rel).read_text()
        label = line.split(":")[0]
        assert line in text
        (root / rel).write_text(text.replace(line, f"{label}:\t{lit}", 1))
        return argv(str(root))

    return Case("huge-int-ethtool", f"{rel}/{line}/{lit[:6]!a}{len(lit)}/{verb}", build,
                frozenset(codes))


def _cases() -> dict[str, list[Case]]:
    sysfs = [_sysfs_case(rel, lit, verb) for rel in SYSFS for lit in LITERALS.values()
             for verb in ("inventory-json", "check")]
    sysfs += [_sysfs_case(rel, lit, "check") for rel in SYSFS for lit in UNICODE_DIGITS.values()]
    sysfs += [_sysfs_case(rel, LITERALS["hex"], verb) for rel in SYSFS
              for verb in ("inventory", "check-json", "apply")]
    tool = [_tool_case(rel, line, lit, verb) for rel, line in TOOL for lit in LITERALS.values()
            for verb in ("check", "check-json")]
    tool += [_tool_case(rel, line, lit, "check") for rel, line in TOOL
             for lit in UNICODE_DIGITS.values()]
    tool += [_tool_case(rel, line, LITERALS["hex"], "apply") for rel, line in TOOL]
    return {"huge-int-sysfs": sysfs, "huge-int-ethtool": tool}


KINDS = _cases()


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    with sandbox_dir(tmp_path_factory.mktemp("hostile-num")) as base:
        yield Sandbox(base)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_huge_integers_in_a_snapshot(kind: str, sandbox: Sandbox) -> None:
    n, failures = run_kind(KINDS[kind], sandbox)
    assert not failures, f"{len(failures)} of {n} {kind} cases failed:\n" + "\n".join(
        failures[:20])


@pytest.mark.parametrize("rel,verb", [(f"{NET}/mtu", "check-json"),
                                      (f"{DEV}/numa_node", "inventory-json")])
def test_one_huge_hex_per_verb_fast(rel: str, verb: str, sandbox: Sandbox) -> None:
    """The cheap subset `make check` runs: the hex form was the one that converted and then
    could not be printed (exit 70)."""
    n, failures = run_kind([_sysfs_case(rel, LITERALS["hex"], verb),
                            _tool_case(*TOOL[0], LITERALS["hex"], "check")], sandbox)
    assert not failures, failures


def _variants() -> Iterator[str]:
    digits = {"10": "9", "16": "f", "8": "7", "2": "1"}
    prefixes = {"10": "", "16": "0x", "8": "0o", "2": "0b"}
    for base, d in digits.items():
        for n in (1, MAX_NUMBER_CHARS - 3, MAX_NUMBER_CHARS - 2, MAX_NUMBER_CHARS,
                  MAX_NUMBER_CHARS + 1, 4300, 4301, 50_000):
            for sign in ("", "-", "+"):
                for pad in ("", " ", "\n", "\t "):
                    yield f"{pad}{sign}{prefixes[base]}{d * n}{pad}"
    yield from ("", " ", "0x", "-", "1_000", "\u0663", "\u00b2", "1e3", "0x-1", "--1",
                "12abc", "\x1b[2J", "9" * 4301 + "\x00")


@pytest.mark.parametrize("base", [0, 10, 16])
def test_to_int_never_raises_and_stays_printable(base: int) -> None:
    seen = 0
    for text in _variants():
        value = to_int(text, base)
        if value is None:
            with pytest.raises(NumberError) as err:
                parse_int(text, "sys/x/mtu", base)
            msg = str(err.value)
            assert msg.startswith("sys/x/mtu: ") and "\n" not in msg and len(msg) < 120
            continue
        seen += 1
        assert len(str(value)) < 80  # printable in decimal: no 4,300-digit trap later
        assert len(text.strip()) <= MAX_NUMBER_CHARS
    assert seen > 10


def test_to_int_reads_what_the_kernel_and_tools_print() -> None:
    assert to_int("1500\n") == 1500
    assert to_int("-1") == -1
    assert to_int("0x1f", 0) == 31 and to_int("0x1f", 16) == 31 and to_int("1f", 16) == 31
    assert to_int("0x1f") is None  # a decimal-only source does not take hex
    assert to_int("0b101", 0) == 5 and to_int("0o17", 0) == 15 and to_int("010", 0) == 10
    assert to_int("\u0663") is None and to_int("1_000") is None and to_int(None) is None
    assert to_int("755", 8) == 0o755


def test_digits_key_orders_like_numbers_without_converting() -> None:
    huge = "9" * 50_000
    items = ["10", "9", "0009", huge, "0", "100"]
    assert sorted(items, key=digits_key) == ["0", "9", "0009", "10", "100", huge]
