"""`hwmgr throughput` with the real iperf3 over a veth pair between two network namespaces.

hwmgr runs in namespace a, `iperf3 -s` in namespace b; nothing touches eth0. A fast link
passes a 1 Gbit/s floor, the same link shaped with tbf (seed 004) fails it in the shaped
direction only; bad peers, a missing iperf3, mangled output and a stalling server all come
back `unknown` with a reason, within a bounded time. The parser tests mangle a real iperf3 run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from netns import A_IP, B_IP, IP, UNUSED_IP, VethLink, free_port, leftover_namespaces
from support import REPO, run_cli

from hwmgr.errors import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, EXIT_UNKNOWN
from hwmgr.host.runner import Result
from hwmgr.verify.throughput import (
    IperfOutputError,
    Run,
    judge,
    parse_output,
    split_duration,
    streams_for,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]  # iperf3 runs between namespaces
HWMGR = [sys.executable, "-m", "hwmgr", "throughput"]
EMPTY_CONFIG = str(REPO / "tests" / "fixtures" / "verify" / "empty-config.json")


@pytest.fixture(scope="module")
def link():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    lk = VethLink.create("t")
    try:
        lk.iperf3_server()
        yield lk
    finally:
        lk.teardown()
        assert not [n for n in leftover_namespaces() if "t-" in n]


def hw(link: VethLink, *args: str, env: dict[str, str] | None = None,
       timeout: float = 60) -> tuple[int, dict, float]:
    """Run `hwmgr throughput ARGS --json` in namespace a: (rc, envelope, wall seconds)."""
    base = {"PYTHONPATH": str(REPO), "HWMGR_CONFIG": EMPTY_CONFIG,
            "HWMGR_STATE_DIR": "/nonexistent-hwmgr-state", "SSH_CONNECTION": ""}
    t0 = time.monotonic()
    res = link.run_a([*HWMGR, *args, "--json"], env={**base, **(env or {})}, timeout=timeout)
    wall = time.monotonic() - t0
    try:
        doc = json.loads(res.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"not JSON: {res.stdout!r} {res.stderr!r}") from exc
    return res.returncode, doc, wall


@pytest.fixture(scope="module")
def config_floor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("cfg") / "hwmgr.json"
    p.write_text(json.dumps({"throughput_floor_mbps": 1000, "on_failure": "report"}))
    return p


def test_fast_link_passes(link: VethLink) -> None:
    rc, doc, wall = hw(link, "--peer", B_IP, "--floor", "1000")
    assert rc == EXIT_OK, doc
    d = doc["data"]
    assert doc["status"] == "ok" and d["interface"] == link.if_a
    assert d["link_speed_mbps"] == 10000 and d["streams"] == streams_for(10000) == 2
    (run,) = d["runs"]
    assert run["direction"] == "send" and run["status"] == "ok"
    assert run["mbps"] > 1000 and run["gbps"] == round(run["mbps"] / 1000, 3)
    assert isinstance(run["retransmits"], int)
    assert run["cpu_local_pct"] >= 0 and run["cpu_remote_pct"] >= 0
    assert run["argv"][run["argv"].index("-O") + 1] == "1"  # slow start skipped
    assert run["argv"][run["argv"].index("-t") + 1] == "2"
    assert wall < 8, wall


def test_shaped_link_fails_in_the_shaped_direction(link: VethLink, config_floor: Path) -> None:
    """tbf 100mbit on a's egress: sending fails the 1 Gbit/s floor by ~90%, receiving passes."""
    link.shape("100mbit")
    try:
        rc, doc, _ = hw(link, "--peer", B_IP, "--both", env={"HWMGR_CONFIG": str(config_floor)})
    finally:
        link.unshape()
    assert rc == EXIT_FAILED, doc
    d = doc["data"]
    assert d["floor_mbps"] == 1000 and "throughput_floor_mbps" in d["floor_source"]
    send, recv = d["runs"]
    assert (send["direction"], recv["direction"]) == ("send", "receive")
    assert send["status"] == "failed" and 50 < send["mbps"] < 110, send
    assert send["shortfall_mbps"] == pytest.approx(1000 - send["mbps"], abs=0.1)
    assert send["shortfall_pct"] > 85
    assert f"{send['shortfall_mbps']:.0f} Mbit/s" in send["reason"]
    assert "below the floor of 1000 Mbit/s" in send["reason"]
    assert recv["status"] == "ok" and recv["mbps"] > 1000
    assert doc["errors"] == [send["reason"]]


@pytest.mark.parametrize("peer,port,expect", [
    (UNUSED_IP, None, "Connection timed out"),   # nobody answers ARP
    (B_IP, "1", "Connection refused"),           # host there, no server on the port
    ("no-such-peer.invalid", None, "cannot resolve peer"),
])
def test_bad_peer_is_unknown_quickly(link: VethLink, peer: str, port: str | None,
                                     expect: str) -> None:
    extra = ["--port", port] if port else []
    rc, doc, wall = hw(link, "--peer", peer, "--connect-timeout", "1000", *extra)
    assert rc == EXIT_UNKNOWN, doc
    (run,) = doc["data"]["runs"]
    assert run["status"] == "unknown" and expect in run["reason"]
    assert run["mbps"] is None
    assert wall < 6, wall


def test_iperf3_missing(link: VethLink, tmp_path: Path) -> None:
    """PATH has `ip` but no iperf3: a clear unknown, not a traceback."""
    (tmp_path / "ip").symlink_to(IP)
    rc, doc, _ = hw(link, "--peer", B_IP, env={"PATH": str(tmp_path)})
    assert rc == EXIT_UNKNOWN, doc
    assert "iperf3 is not installed" in doc["data"]["runs"][0]["reason"]


WRAPPERS = {
    # the real iperf3, its JSON cut short
    "truncated": ("/usr/bin/iperf3 \"$@\" | head -c 900", "truncated or invalid"),
    # the real iperf3, the receiver's rate replaced by -nan as iperf3 prints it
    "nan": ("/usr/bin/iperf3 \"$@\" | sed -E 's/(\"bits_per_second\":[[:space:]]*)[0-9.e+]+/"
            "\\1-nan/'", "nan"),
}


@pytest.mark.parametrize("case", sorted(WRAPPERS))
def test_mangled_output_is_unknown(link: VethLink, tmp_path: Path, case: str) -> None:
    script, expect = WRAPPERS[case]
    wrapper = tmp_path / "iperf3"
    wrapper.write_text(f"#!/bin/sh\n{script}\n")
    wrapper.chmod(0o755)
    rc, doc, _ = hw(link, "--peer", B_IP, "--floor", "1",
                    env={"PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert rc == EXIT_UNKNOWN, doc
    run = doc["data"]["runs"][0]
    assert run["status"] == "unknown" and expect in run["reason"], run
    assert run["mbps"] is None


def test_stalling_server_is_bounded(link: VethLink) -> None:
    """A server that accepts and never answers: killed at the hard timeout, unknown."""
    port = free_port()
    link.stall_server(port)
    rc, doc, wall = hw(link, "--peer", B_IP, "--port", str(port), "--timeout", "2.5",
                       "--connect-timeout", "1000")
    assert rc == EXIT_UNKNOWN, doc
    reason = doc["data"]["runs"][0]["reason"]
    assert "did not finish in time" in reason and "2.5s" in reason
    assert wall < 6, wall


def test_refuses_default_route_interface(link: VethLink) -> None:
    subprocess.run([IP, "-n", link.ns_a, "route", "add", "default", "via", B_IP], check=True)
    try:
        rc, doc, _ = hw(link, "--peer", B_IP)
        assert rc == EXIT_REFUSED, doc
        assert f"{link.if_a} carries the default route" in doc["errors"][0]
        rc, doc, _ = hw(link, "--peer", B_IP, "--force", "--duration", "2", "--floor", "10")
        assert rc == EXIT_OK, doc
        assert any("--force given" in n for n in doc["data"]["notes"])
    finally:
        subprocess.run([IP, "-n", link.ns_a, "route", "del", "default"], check=False)


def test_serve_one_off(link: VethLink) -> None:
    """`--serve` on side b, the client on side a: both ends are hwmgr."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HWMGR_CONFIG": EMPTY_CONFIG}
    server = subprocess.Popen(link.argv(link.ns_b, [*HWMGR, "--serve", "--port", str(port),
                                                    "--count", "1", "--timeout", "20",
                                                    "--json"]),
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        link.wait_port(port, server)
        rc, doc, _ = hw(link, "--peer", B_IP, "--port", str(port), "--duration", "2")
        assert rc == EXIT_OK, doc
        out, _ = server.communicate(timeout=20)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    served = json.loads(out)
    assert server.returncode == 0 and served["status"] == "served"
    assert served["data"]["serve"]["mbps"] > 100


def test_serve_until_stopped_answers_a_clients_both(link: VethLink) -> None:
    """One `--serve` (no --count) serves both directions of a client's `--both`, then stops
    on Ctrl-C with exit 0 and what it served (it used to serve one test: the second
    direction got "Connection refused")."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HWMGR_CONFIG": EMPTY_CONFIG}
    server = subprocess.Popen(link.argv(link.ns_b, [*HWMGR, "--serve", "--port", str(port),
                                                    "--json"]),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, start_new_session=True)
    try:
        link.wait_port(port, server)
        rc, doc, _ = hw(link, "--peer", B_IP, "--port", str(port), "--duration", "2",
                        "--both", "--interface", link.if_a)
        assert rc == EXIT_OK, (doc["errors"], doc["data"]["runs"])
        assert [r["direction"] for r in doc["data"]["runs"]] == ["send", "receive"]
        assert all(r["mbps"] > 100 for r in doc["data"]["runs"]), doc
        link.wait_port(port, server)  # still serving after both tests
        os.killpg(server.pid, signal.SIGINT)
        out, err = server.communicate(timeout=20)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    served = json.loads(out)
    assert server.returncode == 0 and served["status"] == "served", err
    assert [t["status"] for t in served["data"]["tests"]] == ["served", "served"]


def test_serve_refuses_client_options() -> None:
    """`--serve --both` was accepted and ignored; --count without --serve means nothing."""
    res = run_cli("throughput", "--serve", "--both")
    assert res.returncode == 2 and "--both: client options, not --serve's" in res.stderr
    res = run_cli("throughput", "--peer", "10.0.0.2", "--count", "2")
    assert res.returncode == 2 and "add --serve" in res.stderr


def test_records_measurement_for_verify(link: VethLink, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    rc, doc, _ = hw(link, "--peer", B_IP, "--floor", "100", "--duration", "2",
                    "--bind-dev", link.if_a, env={"HWMGR_STATE_DIR": str(state)})
    assert rc == EXIT_OK, doc
    saved = json.loads((state / "throughput" / f"{link.if_a}.json").read_text())
    assert saved[-1]["send_mbps"] == round(doc["data"]["runs"][0]["mbps"], 1)
    assert saved[-1]["status"] == "ok" and saved[-1]["interface"] == link.if_a


# ------------------------------------------------------------------------- parser, real JSON
@pytest.fixture(scope="module")
def real_json(link: VethLink) -> str:
    res = subprocess.run(link.argv(link.ns_a, ["iperf3", "-c", B_IP, "-J", "-O", "1", "-t",
                                               "1", "--bind-dev", link.if_a]),
                         capture_output=True, text=True, timeout=30, check=True)
    assert A_IP in res.stdout
    return res.stdout


def _res(stdout: str, rc: int = 0, stderr: str = "") -> Result:
    return Result(("iperf3",), rc, stdout, stderr)


def test_parser_accepts_the_real_output(real_json: str) -> None:
    nums = parse_output(_res(real_json))
    doc = json.loads(real_json)
    assert nums["mbps"] == doc["end"]["sum_received"]["bits_per_second"] / 1e6
    assert nums["retransmits"] == doc["end"]["sum_sent"]["retransmits"]


def _mangle(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def _raw_number(text: str, anchor: str, key: str) -> str:
    """The number after `"key":` that follows `anchor`, exactly as iperf3 printed it (its
    float formatting is not Python's repr, so json.dumps of the parsed value may not match)."""
    start = text.index(f'"{anchor}"')
    m = re.compile(rf'"{key}":\s*(-?[0-9.]+(?:[eE][-+]?[0-9]+)?)').search(text, start)
    assert m, (anchor, key)
    return m.group(1)


def _bps(real: str) -> str:
    return _raw_number(real, "sum_received", "bits_per_second")


@pytest.mark.parametrize("case", [
    "truncated-early", "truncated-late", "nan", "minus-nan-cpu", "NaN", "overflow", "negative",
    "wrapped-retransmits", "bytes-disagree", "text-before", "text-after", "error-rc0",
    "empty", "rc-nonzero", "timeout", "missing",
])
def test_parser_rejects(real_json: str, case: str) -> None:
    doc = json.loads(real_json)
    recv = doc["end"]["sum_received"]
    if case == "truncated-early":
        res = _res(real_json[:200])
    elif case == "truncated-late":
        res = _res(real_json[: len(real_json) - 40])
    elif case == "nan":
        res = _res(real_json.replace(_bps(real_json), "nan"))
    elif case == "minus-nan-cpu":
        cpu = _raw_number(real_json, "cpu_utilization_percent", "host_total")
        res = _res(_mangle(real_json, f'"host_total":\t{cpu}', '"host_total":\t-nan')
                   if f'"host_total":\t{cpu}' in real_json
                   else _mangle(real_json, cpu, "-nan"))
    elif case == "NaN":  # valid for Python's json, never for us
        res = _res(real_json.replace(_bps(real_json), "NaN"))
    elif case == "overflow":
        recv["bits_per_second"] = 18446744073709551615
        res = _res(json.dumps(doc))
    elif case == "negative":
        recv["bits_per_second"] = -12.0
        res = _res(json.dumps(doc))
    elif case == "wrapped-retransmits":
        doc["end"]["sum_sent"]["retransmits"] = 4294967295
        res = _res(json.dumps(doc))
    elif case == "bytes-disagree":
        recv["bytes"] = recv["bytes"] * 3
        res = _res(json.dumps(doc))
    elif case == "text-before":
        res = _res("iperf3: error - unable to send control message\n" + real_json)
    elif case == "text-after":
        res = _res(real_json + "\niperf3: error - control socket has closed unexpectedly\n")
    elif case == "error-rc0":
        doc["error"] = "unable to connect to server: Connection refused"
        res = _res(json.dumps(doc))
    elif case == "empty":
        res = _res("", 1, "iperf3: error - unable to connect")
    elif case == "rc-nonzero":
        res = _res(real_json, 1, "iperf3: interrupt - the client has terminated")
    elif case == "timeout":
        res = _res(real_json[:100], 124, "iperf3: timed out after 3s")
    else:
        res = _res("", 127, "iperf3: command not found")
    with pytest.raises(IperfOutputError) as exc:
        parse_output(res)
    assert str(exc.value).strip() and "\n" not in str(exc.value)


def test_judge_and_sizing() -> None:
    r = judge(Run("send", "measured", mbps=95.0), 1000.0)
    assert r.status == "failed" and r.shortfall_mbps == 905.0 and r.shortfall_pct == 90.5
    assert judge(Run("send", "measured", mbps=1000.0), 1000.0).status == "ok"
    assert judge(Run("send", "measured", mbps=5.0), None).status == "measured"
    assert judge(Run("send", "unknown", reason="x"), 1.0).status == "unknown"
    assert [streams_for(s) for s in (None, 100, 1000, 10000, 25000, 100000)] == [1, 1, 1, 2,
                                                                                  4, 8]
    assert split_duration(3) == (1, 2) and split_duration(20) == (2, 18)


def test_iperf3_flooding_stderr_does_not_block(link: VethLink, tmp_path: Path) -> None:
    """An iperf3 that writes 1 MiB to stderr before it runs (16 pipe buffers' worth): the
    runner drains both pipes as they fill, so the measurement goes on and passes."""
    wrapper = tmp_path / "iperf3"
    wrapper.write_text("#!/bin/sh\nhead -c 1048576 /dev/zero | tr '\\0' e >&2\n"
                       "exec /usr/bin/iperf3 \"$@\"\n")
    wrapper.chmod(0o755)
    rc, doc, _ = hw(link, "--peer", B_IP, "--floor", "1",
                    env={"PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert rc == EXIT_OK, doc
    (run,) = doc["data"]["runs"]
    assert run["status"] == "ok" and run["mbps"] > 1, run
