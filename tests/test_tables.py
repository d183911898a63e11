"""Tables that never cut a value: `check` at 80, 100 and 200 columns in a real terminal
(tmux) and piped, the layout rule on values that used to be cut, and a quiet closed pipe."""

from __future__ import annotations

import os
import subprocess

import pytest
from support import HOSTS, HWMGR, REPO, run_cli, run_json
from support.terminal import HAVE_TMUX, in_tmux

from hwmgr.ui.check_table import fit_widths, table_lines, value_text

SEED = str(HOSTS / "seed002-before")
BOX = set("─━│┃┏┓┗┛╇╋┼┡┩┳┻╭╮╯╰")


def _findings() -> list[dict]:
    code, env = run_json("check", "--root", SEED)
    assert code == 5
    return env["data"]["findings"]


def _assert_whole(text: str, findings: list[dict]) -> None:
    """Every fix on one line, every value's words in order, every status word whole."""
    lines = text.splitlines()
    flat = " ".join(text.split())
    for f in findings:
        if f["fix"]:
            assert any(f["fix"] in ln for ln in lines), f"fix split: {f['fix']!r}\n{text}"
        for value in (f["status"], f["item"], value_text(f["actual"]), value_text(f["expected"])):
            for word in value.split():
                assert any(word in ln.split() for ln in lines), f"{word!r} cut:\n{text}"
        if f["status"] == "uncatalogued":
            assert " ".join(f["reason"].split()) in flat, f"reason lost: {f['reason']}"


# 100 columns in the slow lane: 80 and 200 bracket it
WIDTHS = [80, pytest.param(100, marks=pytest.mark.slow), 200]


@pytest.mark.skipif(not HAVE_TMUX, reason="needs tmux")
@pytest.mark.parametrize("columns", WIDTHS)
def test_check_in_a_real_terminal_keeps_every_value_whole(columns: int) -> None:
    code, screen = in_tmux([*HWMGR, "check", "--root", SEED], columns,
                           env={"TERM": "xterm-256color"})
    assert code == 5, screen
    assert all(len(ln) <= columns for ln in screen.splitlines())
    _assert_whole(screen, _findings())
    assert "To fix:" in screen and "  ethtool -G enp1s0f1 rx 4096 tx 4096" in screen


@pytest.mark.parametrize("columns", WIDTHS)
def test_check_piped_is_plain_ascii_layout_and_keeps_values(columns: int) -> None:
    env = {**os.environ, "COLUMNS": str(columns)}
    res = subprocess.run([*HWMGR, "check", "--root", SEED], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 5 and res.stderr == ""
    assert "\x1b" not in res.stdout and not BOX & set(res.stdout)
    _assert_whole(res.stdout, _findings())
    # only a whole command may be wider than the line
    fixes = {f["fix"] for f in _findings() if f["fix"]}
    for ln in res.stdout.splitlines():
        assert len(ln) <= columns or ln.strip() in fixes, ln


@pytest.mark.parametrize("width", [80, 100, 200])
def test_values_that_used_to_be_cut_stay_whole(width: int) -> None:
    """67108864 and `unsupported` lost characters at 80 columns; an unknown row's reason was
    dropped with the FIX / NOTE column; long fixes wrapped mid-command."""
    fix = "ip link set dev enp129s0f1np1 txqueuelen 10000"
    rows = [
        ["drift", "sysctl.net.core.rmem_max", "≥ 67108864", "212992",
         "sysctl -w net.core.rmem_max=67108864", "fix"],
        ["unsupported", "features.rx-udp-gro-forwarding", "on", "off [fixed]",
         "the device cannot change it (fixed by the driver)", ""],
        ["unknown", "ring.rx", "4096", "-", "ethtool -g enp129s0f1np1 failed: exit 76", ""],
        ["drift", "txqueuelen", "≥ 10000", "1000", fix, "fix"],
    ]
    head = ["STATUS", "ITEM", "EXPECTED", "ACTUAL"]
    widths = fit_widths([head] + [r[:4] for r in rows], width - 10)
    text = "\n".join(line for line, _ in table_lines(rows, widths, width))
    lines = text.splitlines()
    for r in rows:
        for cell in r[:4]:
            assert all(any(w in ln.split() for ln in lines) for w in cell.split()), (cell, text)
        if r[5]:
            assert any(r[4] in ln for ln in lines), text
        else:
            assert r[4] in " ".join(text.split()), text
    assert all(len(ln) <= width for ln in lines), text


def test_closed_pipe_keeps_the_exit_code_and_says_nothing() -> None:
    """`hwmgr check | head -1` under `set -o pipefail` gets check's own 5, no stderr."""
    for extra in ([], ["--json"]):
        proc = subprocess.Popen([*HWMGR, "check", "--root", SEED, *extra], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before hwmgr writes a byte
        err = proc.stderr.read()
        assert proc.wait(timeout=120) == 5 and err == b"", err
    res = subprocess.run(["bash", "-o", "pipefail", "-c",
                          f"{' '.join(HWMGR)} check --root {SEED} | head -1"], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 5 and res.stderr == "" and "NOT compliant" in res.stdout


def test_catalog_show_and_history_piped_have_no_box_drawing(tmp_path) -> None:
    """The README says piped output is plain text: rich's box characters only on a tty."""
    import sqlite3

    from hwmgr.transaction.journal import Journal

    res = run_cli("catalog", "show", "be2net")
    assert res.returncode == 0 and "19a2:0710" in res.stdout
    assert not BOX & set(res.stdout), res.stdout
    state = tmp_path / "state"
    state.mkdir()
    db = state / "journal.sqlite"
    j = Journal(db, lambda **kw: sqlite3.connect(str(db), **kw))
    j.begin("upgrade", "be2net", {"version": "1.0"}, [("fetch", True, False)])
    j.close()
    res = run_cli("history", "--steps", "--state-dir", str(state))
    assert res.returncode == 0 and "be2net" in res.stdout and "fetch" in res.stdout
    assert not BOX & set(res.stdout), res.stdout


@pytest.mark.skipif(not HAVE_TMUX, reason="needs tmux")
def test_catalog_show_on_a_terminal_is_still_box_drawn() -> None:
    code, screen = in_tmux([*HWMGR, "catalog", "show", "be2net"], 120)
    assert code == 0 and BOX & set(screen), screen


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_TMUX, reason="needs tmux")
def test_refusals_are_printed_once_on_a_terminal() -> None:
    """The plan lists its refusals; on a terminal stderr does not repeat them."""
    seed = str(HOSTS / "seed000-ustor")
    argv = [*HWMGR, "plan", "upgrade", "be2net", "--to", "10.2.470.14", "--root", seed]
    code, screen = in_tmux(argv, 200, env={"HWMGR_STATE_DIR": "/var/lib/hwmgr-test-none",
                                           "SSH_CONNECTION": ""})
    assert code == 9, screen
    flat = " ".join(screen.split())
    assert flat.count("is not verified (no known sha256/size)") == 1, screen
    assert flat.count("eth2 carries the default route, and be2net drives it") == 1, screen
    # piped, stderr still carries every refusal for the log
    res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120,
                         check=False, env={**os.environ, "SSH_CONNECTION": "",
                                           "HWMGR_STATE_DIR": "/var/lib/hwmgr-test-none"})
    assert res.returncode == 9 and res.stderr.count("hwmgr plan: ") == 2, res.stderr


def test_the_uplink_guard_refuses_in_a_few_sentences() -> None:
    from hwmgr.inventory.guard import cut_off_refusal

    text = cut_off_refusal({
        "eth0": ("carries the default route", ["channels.combined", "pause.rx", "ring.rx"]),
        "eth1": ("carries an SSH session from 10.0.0.9", ["ring.tx"])})
    assert text == (
        "eth0 carries the default route: changing its channels.combined, pause.rx and ring.rx "
        "may reset the link and cut this host off. eth1 carries an SSH session from 10.0.0.9: "
        "changing its ring.tx may reset the link and cut this host off. Nothing was changed. "
        "Arrange console access, then add --force: these changes are then applied last and "
        "reverted unless confirmed from a new session.")
