"""Control bytes from a host's tools (issue 25 §3): a snapshot whose `ethtool -i` output
holds a screen clear (ESC[2J), a colour, a carriage return, an OSC title and a C1 CSI in
its driver version and firmware string. Every verb shows them escaped in its tables and
one-line errors, `--json` carries them exactly as parsed (and writes no raw control byte),
and a \\r never splits a line into a key of its own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import run_cli
from support.hostile_snap import OUTPUT
from support.hostile_tree import base_tree, write_dir

from hwmgr.inventory.scan import parse_ethtool_i
from hwmgr.ui.lifecycle import ProgressUI

RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f\x80-\x9f]")  # what a terminal would act on
FIRMWARE = "\x1b[2J\x1b[31m10.0\rdriver: evil"
VERSION = "4.1\x9b31m\x1b]0;owned\x07.307r"
ETHTOOL_I = (f"driver: be2net\nversion: {VERSION}\nfirmware-version: {FIRMWARE}\n"
             "bus-info: 0000:02:00.0\n")


@pytest.fixture(scope="module")
def snap(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = dict(base_tree())
    tree[OUTPUT] = ETHTOOL_I.encode()
    return write_dir(tree, tmp_path_factory.mktemp("ctl") / "snap")


def test_a_carriage_return_is_part_of_the_value() -> None:
    got = parse_ethtool_i(ETHTOOL_I)
    assert got["driver"] == "be2net" and got["firmware-version"] == FIRMWARE
    assert got["version"] == VERSION


@pytest.mark.parametrize("verb", [["inventory"], ["check"], ["verify"]])
def test_tables_and_errors_show_control_bytes_escaped(snap: Path, verb: list[str]) -> None:
    res = run_cli(*verb, "--root", str(snap), env={"COLUMNS": "200"})
    assert res.returncode in (0, 1, 5, 11), res.stderr
    for text in (res.stdout, res.stderr):
        assert not RAW.search(text), RAW.findall(text)
    shown = res.stdout + res.stderr
    if verb == ["inventory"]:
        assert "\\x1b[2J\\x1b[31m10.0\\rdriver: evil" in shown
        assert "4.1\\u009b31m\\x1b]0;owned\\x07.307r" in shown
    else:  # check and verify quote the driver version the host reported
        assert "\\x1b]0;owned\\x07" in shown


@pytest.mark.parametrize("verb", [["inventory"], ["check"]])
def test_json_carries_them_exactly_and_raw_free(snap: Path, verb: list[str]) -> None:
    res = run_cli(*verb, "--json", "--root", str(snap))
    assert not RAW.search(res.stdout), RAW.findall(res.stdout)
    doc = json.loads(res.stdout)
    assert doc["format_version"] == 1
    if verb == ["inventory"]:
        nic = doc["data"]["interfaces"][0]
        assert nic["firmware_version"] == FIRMWARE and nic["driver_version"] == VERSION
        assert nic["driver"] == "be2net"
    else:
        actual = [f["actual"] for f in doc["data"]["findings"]]
        assert VERSION in actual and FIRMWARE in actual, actual


def test_progress_lines_escape_what_servers_and_tools_say() -> None:
    import io

    stream = io.StringIO()
    ui = ProgressUI(stream=stream)
    ui.retry("pkg.rpm: HTTP 503 \x1b[2Jbusy\r; retry 1 of 4 in 0.5 s")
    ui.close()
    assert not RAW.search(stream.getvalue()) and "\\x1b[2Jbusy\\r" in stream.getvalue()


def test_a_carriage_return_cannot_forge_a_line_in_modinfo_or_dkms_status() -> None:
    from hwmgr.lifecycle.builds.dkms import parse_status
    from hwmgr.lifecycle.builds.kmod import modinfo_fields

    got = modinfo_fields("filename: /lib/modules/k/extra/vend.ko\nversion: 1.0\rsrcversion: "
                         "FORGED\nsrcversion: 0123ABC\nvermagic: 6.1.0 SMP\n")
    assert got["version"] == "1.0\rsrcversion: FORGED" and got["srcversion"] == "0123ABC"
    status = parse_status("vend/1.0\rvend/2.0, 6.1.0, x86_64: installed\n"
                          "vend/1.0, 6.1.0, x86_64: built\n")
    assert [(e.version, e.state) for e in status] == [("1.0", "built")]
