"""A rollout's health gate on one host: what hwmgr proves, measured against a baseline.

Before the change, `baseline` records what the host was (boot id and seconds since boot,
each link's state and speed, the items `check` found drifting) in the state dir, once per
rollout: a resumed rollout keeps the first one. After it, `evaluate` passes only when every
step holds: `verify` (an armed driver change is live, boot-id aware: a reboot still pending
fails), the links that were up are up at no lower speed, the quick throughput check
against the named peer meets its floor, the kernel log shows no known-bad line for a
driver of the host since the baseline (the whole log when the host rebooted since), and
`check` is not worse (no item drifts that did not before).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypedDict

from hwmgr import safejson
from hwmgr.catalog import kernellog as signatures
from hwmgr.catalog.load import Catalog
from hwmgr.compliance import kernellog
from hwmgr.compliance.check import check_host
from hwmgr.errors import BadInputError, NotFoundError, UsageError
from hwmgr.host.ifname import tool_safe
from hwmgr.host.seam import Host
from hwmgr.inventory.scan import Inventory
from hwmgr.numtext import to_int
from hwmgr.transaction.journal import utcnow
from hwmgr.verify import throughput

BOOT_ID = "/proc/sys/kernel/random/boot_id"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_BASELINE = 4 << 20


class Link(TypedDict):
    """An interface as the gate compares it: its state and speed (Mb/s) when known."""

    operstate: str | None
    speed: int | None


class _StepKeys(TypedDict):
    step: str
    passed: bool
    detail: str


class Step(_StepKeys, total=False):
    """One step of the gate's result, with the evidence of its kind."""

    verify_status: str
    links: dict[str, Link]
    since: str  # boot | baseline
    hits: list[dict[str, object]]
    drifting: int
    drifting_before: int
    new: list[list[str]]
    throughput: dict[str, object]


class GateResult(TypedDict):
    """The gate's verdict on this host (what `hwmgr gate check` prints and a rollout marks)."""

    passed: bool
    failed_steps: list[str]
    at: str
    boot_id: str | None
    rollout: object  # the baseline's, as recorded
    steps: list[Step]


@dataclass
class GateOptions:
    """What the gate measures besides the always-on steps."""

    peer: str | None = None  # iperf3 peer; no throughput step without one
    floor_mbps: float | None = None
    duration: float = 2.0
    port: int = 5201
    interface: str | None = None


def check_id(rollout: str) -> str:
    """A rollout id as a file name; UsageError naming it otherwise."""
    if not _ID.match(rollout or ""):
        raise UsageError(f"rollout id {rollout!r}: expected 1-64 letters, digits, '.', '_' "
                         "or '-', starting with a letter or digit")
    return rollout


def _path(state_dir: str, rollout: str) -> str:
    return f"{state_dir}/rollout/{check_id(rollout)}.json"


def _uptime(host: Host) -> float | None:
    text = host.read_attr("/proc/uptime")
    try:
        return float(text.split()[0]) if text else None
    except ValueError:
        return None


def links(host: Host) -> dict[str, Link]:
    """{ifname: {operstate, speed}} of every interface but lo."""
    out: dict[str, Link] = {}
    for ifname in host.listdir("/sys/class/net", tool_safe):
        if ifname == "lo":
            continue
        speed = to_int(host.read_attr(f"/sys/class/net/{ifname}/speed") or "")
        out[ifname] = {"operstate": host.read_attr(f"/sys/class/net/{ifname}/operstate"),
                       "speed": speed if speed is not None and speed > 0 else None}
    return out


def drivers(host: Host, cat: Catalog) -> set[str]:
    """The drivers the host runs: its PCI functions' and its interfaces'."""
    scan = Inventory(host, names=None, verdict=cat.verdict).scan()
    out = {d.driver for d in scan.devices if d.driver}
    return out | {i.driver for i in scan.interfaces if i.driver}


def _drifting(host: Host, cat: Catalog) -> list[list[str]]:
    """The (layer, device, interface, item) of every drifting check item, sorted."""
    result = check_host(host, cat, {"driver", "firmware", "setting", "sysctl"})
    return sorted([f.layer, f.device or "", f.interface or "", f.item]
                  for f in result.findings if f.status == "drift")


def baseline(host: Host, cat: Catalog, state_dir: str, rollout: str) -> dict[str, Any]:
    """The host before the change, recorded once per rollout (a resume keeps the first)."""
    path = _path(state_dir, rollout)
    if host.exists(path):
        return {**read_baseline(host, state_dir, rollout), "kept": True}
    base = {"rollout": rollout, "taken": utcnow(), "boot_id": host.read_attr(BOOT_ID),
            "uptime": _uptime(host), "links": links(host), "drifting": _drifting(host, cat)}
    host.makedirs(f"{state_dir}/rollout")
    host.write_bytes(path, json.dumps(base, indent=1).encode() + b"\n")
    return {**base, "kept": False}


def read_baseline(host: Host, state_dir: str, rollout: str) -> dict[str, Any]:
    """The recorded baseline; NotFoundError when there is none, BadInputError if damaged."""
    path = _path(state_dir, rollout)
    raw = host.read_bytes(path, limit=MAX_BASELINE)
    if raw is None:
        raise NotFoundError(f"{path}: no baseline for rollout {rollout} (run `hwmgr gate "
                            f"baseline {rollout}` before the change)")
    doc = safejson.load(raw, path)
    if not isinstance(doc, dict) or not isinstance(doc.get("links"), dict) or not isinstance(
            doc.get("drifting"), list):
        raise BadInputError(f"{path}: not a gate baseline (links, drifting)")
    return doc


# ----------------------------------------------------------------------------- the steps
def links_step(base: Mapping[str, object], now: dict[str, Link]) -> Step:
    """Every link up before is up now, at no lower speed."""
    bad = []
    before = base.get("links")
    for ifname, was in sorted(before.items()) if isinstance(before, dict) else ():
        if not isinstance(was, dict) or was.get("operstate") != "up":
            continue
        cur = now.get(ifname)
        if cur is None:
            bad.append(f"{ifname} is gone")
        elif cur["operstate"] != "up":
            bad.append(f"{ifname} is {cur['operstate'] or 'in an unknown state'} (was up)")
        elif was.get("speed") and cur["speed"] is not None and cur["speed"] < was["speed"]:
            bad.append(f"{ifname} at {cur['speed']} Mb/s (was {was['speed']})")
    up = sum(1 for v in now.values() if v["operstate"] == "up")
    return Step(step="links", passed=not bad,
                detail="; ".join(bad) or f"{up} link(s) up at their speed", links=now)


def log_step(host: Host, base: Mapping[str, object], host_drivers: set[str]) -> Step:
    """No known-bad kernel log line for the host's drivers since the baseline."""
    text = kernellog.read_log(host)
    if text is None:
        return Step(step="kernel_log", passed=False,
                    detail="the kernel log could not be read (dmesg, journalctl -k)")
    rebooted = host.read_attr(BOOT_ID) != base.get("boot_id")
    uptime = base.get("uptime")
    after = None if rebooted or not isinstance(uptime, (int, float)) else float(uptime)
    hits = signatures.for_drivers(signatures.scan(text, after=after), host_drivers)
    detail = (f"{len(hits)} known-bad line(s): " + ", ".join(sorted(
        {f"{h.signature.id} ({h.driver})" for h in hits}))) if hits else (
        "no known-bad line since " + ("boot" if rebooted else "the baseline"))
    return Step(step="kernel_log", passed=not hits, detail=detail,
                since="boot" if rebooted else "baseline", hits=[h.to_json() for h in hits[:20]])


def check_step(host: Host, cat: Catalog, base: Mapping[str, object]) -> Step:
    """`check` is not worse: no item drifts that did not drift before."""
    now = _drifting(host, cat)
    was = base.get("drifting")
    before = {tuple(x) for x in (was if isinstance(was, list) else ()) if isinstance(x, list)}
    new = [x for x in now if tuple(x) not in before]
    detail = ("newly drifting: " + ", ".join("/".join(p for p in x if p) for x in new[:10])
              ) if new else f"{len(now)} drifting item(s), {len(before)} before"
    return Step(step="check", passed=not new, detail=detail, drifting=len(now),
                drifting_before=len(before), new=new[:50])


def throughput_step(host: Host, opts: GateOptions) -> Step:
    """The quick iperf3 check against the named peer meets its floor."""
    topts = throughput.Options(peer=opts.peer or "", port=opts.port, duration=opts.duration,
                               bind_dev=opts.interface, floor_mbps=opts.floor_mbps,
                               floor_source="--floor" if opts.floor_mbps else None)
    report = throughput.check(host, topts)
    rates = ", ".join(f"{r.direction} {r.mbps:.0f} Mbit/s" for r in report.runs
                      if r.mbps is not None)
    why = "; ".join(r.reason for r in report.runs if r.reason)
    floor = f" (floor {opts.floor_mbps:g})" if opts.floor_mbps else ""
    return Step(step="throughput", passed=report.status == "ok",
                detail=f"{report.status}: {rates or 'no rate'}{floor}"
                + (f": {why}" if why else ""), throughput=report.summary())


def evaluate(host: Host, cat: Catalog, base: Mapping[str, object], opts: GateOptions,
             verify: Callable[[], Mapping[str, object]]) -> GateResult:
    """Every step of the gate, in order; passed only when all pass."""
    status = str(verify()["status"])
    steps = [Step(step="verify", passed=status in ("verified", "nothing-armed"),
                  detail=status, verify_status=status)]
    steps.append(links_step(base, links(host)))
    if opts.peer:
        steps.append(throughput_step(host, opts))
    steps.append(log_step(host, base, drivers(host, cat)))
    steps.append(check_step(host, cat, base))
    failed = [s["step"] for s in steps if not s["passed"]]
    return {"passed": not failed, "failed_steps": failed, "at": utcnow(),
            "boot_id": host.read_attr(BOOT_ID), "rollout": base.get("rollout"),
            "steps": steps}
