"""The rollout gate's steps (hwmgr/verify/gate.py) on recorded hosts: links against the
baseline, known-bad kernel log lines since the change (boot-id aware), and bad baselines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli

from hwmgr.host.snapshot import open_host
from hwmgr.verify import gate

FIX = Path(__file__).resolve().parent / "fixtures" / "kernellog"


def test_links_must_stay_up_at_their_speed() -> None:
    base = {"links": {"eth0": {"operstate": "up", "speed": 10000},
                      "eth1": {"operstate": "up", "speed": 1000},
                      "eth2": {"operstate": "down", "speed": None},
                      "eth3": {"operstate": "up", "speed": 1000}}}
    now = {"eth0": {"operstate": "up", "speed": 1000}, "eth1": {"operstate": "down",
                                                               "speed": None},
           "eth2": {"operstate": "down", "speed": None}}
    step = gate.links_step(base, now)
    assert step["passed"] is False
    assert step["detail"] == ("eth0 at 1000 Mb/s (was 10000); eth1 is down (was up); "
                              "eth3 is gone")
    same = {k: dict(v) for k, v in base["links"].items()}
    assert gate.links_step(base, same)["passed"] is True


@pytest.fixture()
def logged(copy_host):
    """seed 000 (e1000e) with a recorded dmesg holding the gislab#407 hang at 9327 and
    9329 s since boot."""
    snap = copy_host("seed000-ustor")
    (snap / "commands" / "dmesg.txt").write_text((FIX / "dmesg-e1000e-hang.txt").read_text())
    index = json.loads((snap / "commands" / "index.json").read_text())
    index.append({"argv": ["dmesg"], "rc": 0, "stdout": "commands/dmesg.txt"})
    (snap / "commands" / "index.json").write_text(json.dumps(index))
    host, _ = open_host(snap)
    return host


def test_kernel_log_step_counts_only_lines_since_the_baseline(logged) -> None:
    boot = logged.read_attr(gate.BOOT_ID)
    before = gate.log_step(logged, {"boot_id": boot, "uptime": 9328.0}, {"e1000e"})
    assert before["passed"] is False and before["since"] == "baseline"
    assert [h["seconds"] for h in before["hits"]] == [9329.46931]
    assert before["hits"][0]["source"] == "https://github.com/gislab-npo/gislab/issues/407"
    after = gate.log_step(logged, {"boot_id": boot, "uptime": 9330.0}, {"e1000e"})
    assert after["passed"] is True and after["detail"] == "no known-bad line since the baseline"
    other_driver = gate.log_step(logged, {"boot_id": boot, "uptime": 0.0}, {"veth"})
    assert other_driver["passed"] is True


def test_after_a_reboot_the_whole_log_counts(logged) -> None:
    step = gate.log_step(logged, {"boot_id": "an-earlier-boot", "uptime": 99999.0}, {"e1000e"})
    assert step["passed"] is False and step["since"] == "boot" and len(step["hits"]) == 2


def test_a_host_without_a_readable_log_fails_the_step(copy_host) -> None:
    host, _ = open_host(copy_host("seed000-ustor"))
    step = gate.log_step(host, {"boot_id": None, "uptime": 0.0}, {"e1000e"})
    assert step["passed"] is False and "could not be read" in step["detail"]


@pytest.mark.slow  # loads the catalog (~0.5 s)
def test_a_damaged_baseline_is_exit_8_and_a_bad_id_exit_2(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "rollout").mkdir(parents=True)
    (state / "rollout" / "r1.json").write_text('{"links": 1}')
    res = run_cli("gate", "check", "r1", "--state-dir", str(state))
    assert res.returncode == 8 and "not a gate baseline" in res.stderr
    assert res.stderr.count("\n") == 1
    res = run_cli("gate", "check", "../etc", "--state-dir", str(state))
    assert res.returncode == 2 and "rollout id" in res.stderr
    res = run_cli("gate", "check", "r2", "--state-dir", str(state))
    assert res.returncode == 3 and "no baseline for rollout r2" in res.stderr


@pytest.mark.slow  # a namespace of its own and three hwmgr processes in it
def test_gate_check_fails_on_a_link_gone_down_and_refuses_a_default_route_peer(ns) -> None:
    """Exit 1: v0 was up at the baseline and lost its carrier. Exit 9: the throughput step
    would run over the interface that carries the namespace's default route."""
    base = ns.hwmgr("gate", "baseline", "r1", "--state-dir", ns.state)
    assert base.returncode == 0, base.stderr
    ns.ip("link", "set", "v1", "down")  # v0's peer: v0 loses its carrier
    got = ns.hwmgr("gate", "check", "r1", "--state-dir", ns.state, "--json")
    assert got.returncode == 1, got.stderr
    doc = json.loads(got.stdout)
    assert "links" in doc["data"]["failed_steps"], doc["data"]
    ns.ip("link", "set", "v1", "up")
    ns.ip("addr", "add", "10.99.0.1/24", "dev", "v0")
    ns.ip("route", "add", "default", "via", "10.99.0.2", "dev", "v0")
    got = ns.hwmgr("gate", "check", "r1", "--state-dir", ns.state, "--peer", "10.99.0.2",
                   "--floor", "1", "--interface", "v0")
    assert got.returncode == 9, (got.returncode, got.stderr)
    assert "default route" in got.stderr
