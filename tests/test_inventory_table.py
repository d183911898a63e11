"""The human inventory table, run through the real CLI: piped (plain text) and under a
pseudo-terminal (box-drawn), at 80 and 200 columns, on every fixture host."""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import shutil
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest
from support import HOSTS, HWMGR, REPO, run_json

from hwmgr.ui.inventory_table import wrap

FIXTURES = sorted(p.name for p in HOSTS.iterdir() if (p / "snapshot.json").is_file())
BOX = set("─━│┃┏┓┗┛╇╋┼┡┩")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # rich's own colours; anything else is a leak
LEGEND_WORDS = ("ok =", "outdated =", "known-bad =", "uncatalogued =", "unknown =", "- =")


def _env(columns: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env.update(COLUMNS=str(columns), LINES="50", TERM="xterm-256color")
    return env


def piped(root: Path | str, columns: int, *extra: str) -> str:
    res = subprocess.run([*HWMGR, "inventory", "--root", str(root), *extra], cwd=REPO,
                         env=_env(columns), capture_output=True, text=True, timeout=120,
                         check=False)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return res.stdout


def on_tty(root: Path | str, columns: int, *extra: str) -> str:
    """Run under a pseudo-terminal of `columns` width; returns the raw output (\\r removed)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen([*HWMGR, "inventory", "--root", str(root), *extra], cwd=REPO,
                            env=_env(columns), stdin=slave, stdout=slave,
                            stderr=subprocess.PIPE)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        rc = proc.wait(timeout=60)
    assert rc == 0, proc.stderr.read() if proc.stderr else rc
    return b"".join(chunks).decode().replace("\r\n", "\n")


def data_of(root: Path | str) -> dict:
    rc, doc = run_json("inventory", "--root", str(root))
    assert rc == 0, doc
    return doc["data"]


def main_devices(data: dict) -> list[dict]:
    return [d for d in data["devices"]
            if (d["class"] or "")[:2] in ("01", "02") or d["catalog"]]


def tokens(devs: list[dict]) -> set[str]:
    """What must never be split: addresses, vendor:device IDs, versions (each word)."""
    out: set[str] = set()
    for d in devs:
        out |= {d["address"], f"{d['vendor_id']}:{d['device_id']}"}
        for v in (d["driver_version"], d["firmware_version"],
                  (d["catalog"] or {}).get("recommended_version")):
            out |= set((v or "").split())
    return out


def check_layout(text: str, columns: int, data: dict, *, show_all: bool = False) -> list[str]:
    lines = text.splitlines()
    wide = [ln for ln in lines if len(ln) > columns]
    assert not wide, f"{len(wide)} lines wider than {columns}: {wide[:3]}"
    devs = data["devices"] if show_all else main_devices(data)
    for tok in tokens(devs):
        assert any(tok in ln for ln in lines), f"{tok!r} is not on one line:\n{text}"
    # no value is cut: never an ellipsis, every word of every device name shown whole (but
    # one wider than what the address column leaves: at 30 columns wrap must split it)
    assert "…" not in text, f"a value was cut:\n{text}"
    shown = set(text.replace("│", " ").split())
    for d in devs:
        for word in (d.get("device_name") or "").split():
            assert word in shown or len(word) > columns - 17, \
                f"{word!r} of {d['device_name']!r} is not shown whole"
    flat = " ".join(text.split())
    assert all(w in flat for w in LEGEND_WORDS), "legend line missing"
    reasons = {(d["catalog"] or {}).get("reason") for d in devs} - {None, ""}
    for reason in reasons:
        assert flat.count(" ".join(reason.split())) == 1, f"reason not printed once: {reason}"
    hidden = len(data["devices"]) - len(devs)
    collapse = re.findall(r"\+(\d+) other functions?: --all to list", flat)
    assert collapse == ([str(hidden)] if hidden else []), (collapse, hidden)
    return lines



def widths(*fast: int, slow: list[int]) -> list:
    """Terminal widths to test: `fast` ones in make check, the rest in the slow lane (each
    width is a full inventory run; the narrow and the common ones catch most layouts)."""
    return [*fast, *(pytest.param(c, marks=pytest.mark.slow) for c in slow)]

@pytest.mark.parametrize("columns", widths(80, slow=[200]))
@pytest.mark.parametrize("name", FIXTURES)
def test_piped_is_plain_and_fits(name: str, columns: int) -> None:
    data = data_of(HOSTS / name)
    text = piped(HOSTS / name, columns)
    lines = check_layout(text, columns, data)
    assert not BOX & set(text), "piped output has box drawing"
    assert "\x1b" not in text, "piped output has escape sequences"
    assert all(ln == ln.rstrip() for ln in lines), "trailing blanks"
    assert lines[1].split()[:2] == ["ADDRESS", "DEVICE"], "one table, one header"
    assert sum(ln.startswith("ADDRESS") for ln in lines) == 1


@pytest.mark.parametrize("columns", widths(60, slow=[80, 200]))
@pytest.mark.parametrize("name", FIXTURES)
def test_terminal_is_box_drawn_and_fits(name: str, columns: int) -> None:
    data = data_of(HOSTS / name)
    raw = on_tty(HOSTS / name, columns)
    text = ANSI.sub("", raw)
    assert "\x1b" not in text, "an escape other than rich's colours reached the terminal"
    check_layout(text, columns, data)
    assert BOX & set(text), "no box drawing on a terminal"
    assert sum("ADDRESS" in ln for ln in text.splitlines()) == 1


def test_seed000_at_80_columns_reads_well() -> None:
    text = piped(HOSTS / "seed000-ustor", 80)
    lines = text.splitlines()
    assert lines[0] == "Ustor  kernel 2.6.32-279.el6.x86_64  17 PCI functions"
    assert "+11 other functions: --all to list" in lines
    be3 = [ln for ln in lines if ln.startswith("0000:02:00.")]
    assert len(be3) == 2 and all("be2net" in ln and "4.1.307r" in ln and "known-bad [1]" in ln
                                 for ln in be3)
    assert any("[19a2:0710]" in ln and "fw 10.0.803.19" in ln for ln in lines)
    note = " ".join(text[text.index("[1] be2net"):].split())
    assert note.startswith("[1] be2net 4.1.307r is known-bad (recommended: 10.2.470.14): "
                           "about 100 MB/s")
    assert "[2] e1000e 1.9.5-k is uncatalogued: uncatalogued kernel build: in-tree e1000e " \
        "1.9.5-k on 2.6.32-279.el6.x86_64;" in " ".join(text.split())
    assert lines[-1] == "Next: hwmgr plan upgrade be2net --to 10.2.470.14  (dry run of the upgrade)"
    assert not any("RAID bus controller" in ln or "PCI bridge" in ln for ln in lines)


def test_wide_terminal_shows_every_column_on_one_line() -> None:
    lines = piped(HOSTS / "seed000-ustor", 200).splitlines()
    assert lines[1].split() == ["ADDRESS", "DEVICE", "ID", "DRIVER", "VERSION", "FIRMWARE",
                                "LINK", "VERDICT"]
    row = next(ln for ln in lines if ln.startswith("0000:02:00.0"))
    assert row.split() == ["0000:02:00.0", "Emulex", "OneConnect", "10Gb", "NIC", "(be3)",
                           "19a2:0710", "be2net", "4.1.307r", "10.0.803.19", "eth2", "up",
                           "10Gb/s", "known-bad", "[1]"]
    assert not any(ln.startswith(" ") for ln in lines[2:8]), "no detail lines at 200 columns"


@pytest.mark.parametrize("name", FIXTURES)
def test_all_lists_every_function_in_one_table(name: str) -> None:
    data = data_of(HOSTS / name)
    text = piped(HOSTS / name, 80, "--all")
    check_layout(text, 80, data, show_all=True)
    rows = [ln.split()[0] for ln in text.splitlines() if re.match(r"[0-9a-f]{4,}:", ln)]
    main = {d["address"] for d in main_devices(data)}
    assert sorted(rows) == sorted(d["address"] for d in data["devices"])
    assert set(rows[: len(main)]) == main, "NICs and storage controllers come first"


def test_no_hint_when_nothing_is_flagged() -> None:
    text = piped(HOSTS / "seed002-router", 80)
    assert "Next:" not in text and re.search(r"\bok \[\d\]", text)


def test_class_filter_lists_what_it_matched() -> None:
    text = piped(HOSTS / "seed000-ustor", 80, "--class", "06")
    rows = [ln for ln in text.splitlines() if ln.startswith("0000:")]
    assert len(rows) == 7 and "other function" not in text


def test_all_does_not_change_the_json() -> None:
    root = str(HOSTS / "seed000-ustor")
    assert run_json("inventory", "--root", root) == run_json("inventory", "--root", root,
                                                             "--all")


@pytest.mark.parametrize("columns", widths(30, 100, slow=[40, 60, 120, 160]))
def test_other_widths_fit_without_splitting(columns: int) -> None:
    for name in ("seed000-ustor", "seed002-router"):
        check_layout(piped(HOSTS / name, columns), max(columns, 30), data_of(HOSTS / name))


def hostile_snapshot(tmp_path: Path) -> Path:
    """seed000 with ESC sequences in the hostname, an interface name and a driver version
    (driver names cannot carry one: the scanner only accepts module-name characters)."""
    snap = tmp_path / "hostile"
    shutil.copytree(HOSTS / "seed000-ustor", snap, symlinks=True)
    meta = json.loads((snap / "snapshot.json").read_text())
    meta["hostname"] = "Ustor\x1b[2J\x1b]0;pwned\x07"
    (snap / "snapshot.json").write_text(json.dumps(meta))
    new = "eth\x1b[31m0"
    (snap / "sys/class/net/eth0").rename(snap / "sys/class/net" / new)
    (snap / "sys/bus/pci/devices/0000:03:00.0/net/eth0").rename(
        snap / "sys/bus/pci/devices/0000:03:00.0/net" / new)
    eth1 = snap / "commands/ethtool-i-eth1.txt"
    eth1.write_text(eth1.read_text().replace("version: 1.9.5-k", "version: 1.9.5\x1b[5m"))
    return snap


def test_escape_characters_from_the_host_are_shown_escaped(tmp_path: Path) -> None:
    snap = hostile_snapshot(tmp_path)
    data = data_of(snap)
    assert data["host"]["hostname"].startswith("Ustor\x1b")  # JSON keeps the real value
    assert "1.9.5\x1b[5m" in {d["driver_version"] for d in data["devices"]}
    for text in (piped(snap, 80), piped(snap, 200, "--all")):
        assert "\x1b" not in text
        assert text.startswith("Ustor\\x1b[2J\\x1b]0;pwned\\x07  kernel")
        assert "eth\\x1b[31m0 up" in text
        assert "1.9.5\\x1b[5m" in text
    raw = on_tty(snap, 80)
    for leak in ("\x1b[2J", "\x1b]0;", "\x07", "\x1b[31m0", "\x1b[5m"):
        assert leak not in raw
    shown = ANSI.sub("", raw)
    assert "Ustor\\x1b[2J" in shown and "eth\\x1b[31m0" in shown


def test_wrap_never_splits_a_word_that_fits() -> None:
    text = "a 10.0.803.19 b 0000:02:00.0 c 19a2:0710 " * 5
    for w in range(14, 60):
        lines = wrap(text, w, indent=2)
        assert all(len(ln) <= w for ln in lines)
        assert " ".join(" ".join(lines).split()) == " ".join(text.split())
    assert wrap("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]  # only a word wider than w
    assert wrap("漢字漢字", 3) == ["漢", "字", "漢", "字"]  # wide characters: cut by cells
    assert wrap("a b", 4, indent=8) == ["a b"] and wrap("aa bb", 3, indent=8)  # no hang
