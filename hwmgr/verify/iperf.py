"""iperf3's `-J` output read as hostile input: the numbers of one run, or the reason they
cannot be trusted (`-nan`, overflowed counters, errors outside or inside its JSON, numbers that
disagree). The throughput check (`throughput`) runs iperf3 and judges what this returns.
"""

from __future__ import annotations

import json
import math
import re
from typing import TypedDict

from hwmgr import safejson
from hwmgr.host.runner import RC_NOT_AVAILABLE, RC_TIMEOUT, Result
from hwmgr.output import printable

MAX_SANE_BPS = 10e12  # 10 Tbit/s: above that a counter overflowed
MAX_SANE_COUNT = 1 << 31  # retransmits beyond this are a wrapped counter
MAX_IPERF_DIGITS = 20  # iperf3's counters are 64-bit: 20 digits at most
_NAN = re.compile(r"(?<![\w\"])[-+]?(nan|inf(inity)?)(?![\w\"])", re.IGNORECASE)


class IperfOutputError(Exception):
    """iperf3's output cannot be trusted; the message is the reason (the check reports it)."""


class IperfNumbers(TypedDict):
    """What one iperf3 -J run measured, once its numbers are trusted (`parse_output`)."""

    mbps: float
    sender_mbps: float | None
    retransmits: int | None
    seconds: float
    cpu_local_pct: float | None
    cpu_remote_pct: float | None


# ----------------------------------------------------------------------------- parsing
def _num(node: object, key: str, where: str, *, required: bool = True) -> float | None:
    """A finite, non-negative, non-overflowed number from a JSON object."""
    val = node.get(key) if isinstance(node, dict) else None
    if val is None:
        if required:
            raise IperfOutputError(f"iperf3 JSON has no {where}.{key}")
        return None
    if isinstance(val, bool) or not isinstance(val, (int, float)):
        shown = json.dumps(val)[:40] if isinstance(val, str) else safejson.type_name(val)
        raise IperfOutputError(f"iperf3 JSON {where}.{key} is {shown}, not a number")
    if not math.isfinite(val):
        raise IperfOutputError(f"iperf3 JSON {where}.{key} is {val}")
    if val < 0:
        raise IperfOutputError(f"iperf3 JSON {where}.{key} is negative ({val}): overflowed")
    return float(val)


def _reject_constant(name: str) -> float:
    raise IperfOutputError(f"iperf3 printed {name} in its JSON")


def _iperf_int(text: str) -> int:
    """json's integer hook: over MAX_IPERF_DIGITS digits is an overflow (float() raises)."""
    if len(text.lstrip("-")) > MAX_IPERF_DIGITS:
        raise IperfOutputError(f"iperf3 printed a {len(text.lstrip('-'))}-digit number: "
                               "overflowed")
    return int(text)


def _outside(text: str) -> str:
    """iperf3's own words for a reason: one line of 160 characters, control bytes escaped."""
    line = printable(" ".join(text.split()))
    return line if len(line) <= 160 else line[:157] + "..."


def parse_output(res: Result) -> IperfNumbers:
    """The numbers of one iperf3 -J run; IperfOutputError(reason) when they cannot be trusted."""
    if res.rc == RC_NOT_AVAILABLE:
        raise IperfOutputError("iperf3 is not installed (install the iperf3 package)")
    if res.rc == RC_TIMEOUT:
        raise IperfOutputError(
            f"iperf3 did not finish in time ({_outside(res.stderr)}): the peer accepted the "
            "connection but never answered, or the link stalled")
    text = res.stdout
    start = text.find("{")
    if start < 0:
        tail = _outside(res.stderr or text) or "no output"
        raise IperfOutputError(f"iperf3 printed no JSON (rc {res.rc}): {tail}")
    if text[:start].strip():
        raise IperfOutputError(f"iperf3 printed text before its JSON: {_outside(text[:start])}")
    try:
        doc, end = json.JSONDecoder(parse_constant=_reject_constant,
                                    parse_int=_iperf_int).raw_decode(text, start)
    except RecursionError:
        raise IperfOutputError("iperf3 JSON is nested too deep to be iperf3's") from None
    except ValueError as exc:
        if _NAN.search(text):
            raise IperfOutputError("iperf3 printed nan/inf in its JSON (not a number)") from None
        raise IperfOutputError(f"iperf3 JSON is truncated or invalid ({exc})") from None
    if text[end:].strip():
        raise IperfOutputError(f"iperf3 printed text after its JSON: {_outside(text[end:])}")
    if not isinstance(doc, dict):
        raise IperfOutputError("iperf3 JSON is not an object")
    if doc.get("error"):
        raise IperfOutputError(f"iperf3: {_outside(str(doc['error']))}")
    if res.rc != 0:
        raise IperfOutputError(f"iperf3 exited {res.rc}: {_outside(res.stderr) or 'no error'}")
    end_ = doc.get("end")
    if not isinstance(end_, dict) or not end_:
        raise IperfOutputError("iperf3 JSON has no end-of-test summary")
    recv, sent = end_.get("sum_received"), end_.get("sum_sent")
    if not isinstance(recv, dict) or not isinstance(sent, dict):
        raise IperfOutputError("iperf3 JSON has no end.sum_received/sum_sent")
    bps = _num(recv, "bits_per_second", "end.sum_received")
    nbytes = _num(recv, "bytes", "end.sum_received")
    secs = _num(recv, "seconds", "end.sum_received")
    sbps = _num(sent, "bits_per_second", "end.sum_sent")
    retr = _num(sent, "retransmits", "end.sum_sent", required=False)
    assert bps is not None and nbytes is not None and secs is not None
    if bps > MAX_SANE_BPS or (sbps or 0) > MAX_SANE_BPS:
        raise IperfOutputError(f"iperf3 reports {max(bps, sbps or 0):.3g} bit/s: overflowed")
    if secs <= 0:
        raise IperfOutputError("iperf3 measured for 0 seconds")
    if abs(nbytes * 8 / secs - bps) > 0.02 * max(bps, 1.0):
        raise IperfOutputError(
            f"iperf3 numbers disagree: {nbytes:.0f} bytes in {secs:.2f} s is not "
            f"{bps:.0f} bit/s (overflowed counter?)")
    if retr is not None and retr >= MAX_SANE_COUNT:
        raise IperfOutputError(f"iperf3 reports {retr:.0f} retransmits: overflowed counter")
    cpu = end_.get("cpu_utilization_percent")
    local = _num(cpu, "host_total", "end.cpu_utilization_percent", required=False)
    remote = _num(cpu, "remote_total", "end.cpu_utilization_percent", required=False)
    return {"mbps": bps / 1e6, "sender_mbps": None if sbps is None else sbps / 1e6,
            "retransmits": None if retr is None else int(retr), "seconds": secs,
            "cpu_local_pct": local, "cpu_remote_pct": remote}
