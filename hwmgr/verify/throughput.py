"""The quick throughput check: real `iperf3 -J` against a peer, parsed defensively, judged.

A run skips TCP slow start (`-O`), sizes parallel streams to the link speed and reports the
receiver's rate, retransmits and both ends' CPU. iperf3 is known to print `-nan`, overflowed
counters, and errors outside (or inside, with rc 0) its JSON: all of those make the result
`unknown` with a reason, never a pass. Every run is bounded by a hard timeout.
"""

from __future__ import annotations

import ipaddress
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping, TypedDict

from hwmgr import safejson
from hwmgr.catalog.load import Catalog
from hwmgr.errors import NotFoundError, RefusedError
from hwmgr.host.runner import RC_NOT_AVAILABLE, RC_TIMEOUT
from hwmgr.host.seam import Host
from hwmgr.inventory import guard as safety
from hwmgr.inventory.scan import hex_id
from hwmgr.numtext import to_int
from hwmgr.transaction.journal import utcnow
from hwmgr.verify.iperf import IperfOutputError, parse_output

IPERF3 = "iperf3"
GRACE_SECONDS = 4.0  # end-of-test exchange and process start-up
RESTART_GRACE = 3.0  # a serving peer starts its next one-off server within this
# what iperf3 says to a client while the peer's one-off server is ending or not yet back
RESTARTING = ("Connection refused", "server is busy", "Connection reset by peer")
LISTEN_FAILS_WITHIN = 1.0  # a one-off server failing this fast could not listen at all
DIRECTIONS = {"send": False, "receive": True}  # direction -> iperf3 -R


@dataclass
class Run:
    """One iperf3 run in one direction and its verdict against the floor."""

    direction: str  # "send" (this host sends) or "receive" (-R: the peer sends)
    status: str  # ok | failed | unknown | measured (no floor to judge against)
    reason: str = ""
    mbps: float | None = None  # receiver's rate (what arrived)
    sender_mbps: float | None = None
    retransmits: int | None = None
    cpu_local_pct: float | None = None
    cpu_remote_pct: float | None = None
    seconds: float | None = None
    floor_mbps: float | None = None
    shortfall_mbps: float | None = None
    shortfall_pct: float | None = None
    wall_seconds: float | None = None
    argv: list[str] = field(default_factory=list)

    @property
    def gbps(self) -> float | None:
        return None if self.mbps is None else self.mbps / 1000

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["gbps"] = None if self.mbps is None else round(self.mbps / 1000, 3)
        return d


class Served(TypedDict, total=False):
    """One test `serve` ran: the argv and port, served / unknown / unavailable and why, and
    the server's numbers (IperfNumbers' keys) when it served one."""

    argv: list[str]
    port: int
    status: str
    reason: str
    mbps: float
    sender_mbps: float | None
    retransmits: int | None
    seconds: float
    cpu_local_pct: float | None
    cpu_remote_pct: float | None


@dataclass
class Options:
    """How to run the check (CLI flags over site config over defaults)."""

    peer: str
    port: int = 5201
    duration: float = 3.0
    bind_dev: str | None = None
    directions: tuple[str, ...] = ("send",)
    floor_mbps: float | None = None
    floor_source: str | None = None
    streams: int | None = None
    connect_timeout_ms: int = 3000
    timeout: float | None = None  # hard limit per run; default duration + connect + grace
    force: bool = False


@dataclass
class Report:
    """All runs of one check, the interface used and how the floor was set."""

    peer: str
    address: str | None
    interface: str | None
    link_speed_mbps: int | None
    streams: int
    floor_mbps: float | None
    floor_source: str | None
    runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """failed if any run failed, else unknown if any is, else ok/measured."""
        states = [r.status for r in self.runs] or ["unknown"]
        for s in ("failed", "unknown", "measured"):
            if s in states:
                return s
        return "ok"

    def as_dict(self) -> dict[str, object]:
        return {"peer": self.peer, "address": self.address, "interface": self.interface,
                "link_speed_mbps": self.link_speed_mbps, "streams": self.streams,
                "floor_mbps": self.floor_mbps, "floor_source": self.floor_source,
                "status": self.status, "runs": [r.as_dict() for r in self.runs],
                "notes": self.notes}

    def summary(self) -> dict[str, object]:
        """A compact record for history: rate per direction, status, when, where."""
        out: dict[str, object] = {"status": self.status, "interface": self.interface,
                               "peer": self.peer, "floor_mbps": self.floor_mbps}
        for r in self.runs:
            out[f"{r.direction}_mbps"] = None if r.mbps is None else round(r.mbps, 1)
        return out


# ----------------------------------------------------------------------------- planning
def streams_for(speed_mbps: int | None) -> int:
    """Parallel streams sized to the link: one TCP stream rarely fills more than ~10 Gbit/s."""
    if not speed_mbps or speed_mbps <= 1000:
        return 1
    if speed_mbps <= 10000:
        return 2
    if speed_mbps <= 25000:
        return 4
    return 8


def split_duration(duration: float) -> tuple[int, int]:
    """(omit, measured) whole seconds for iperf3 -O/-t within `duration` (3 s → 1 + 2)."""
    total = max(2, int(round(duration)))
    omit = 1 if total <= 5 else 2
    return omit, total - omit


def build_argv(address: str, opts: Options, streams: int, reverse: bool) -> list[str]:
    """The iperf3 client command line for one direction."""
    omit, secs = split_duration(opts.duration)
    argv = [IPERF3, "-c", address, "-p", str(opts.port), "-J", "-O", str(omit), "-t", str(secs),
            "-P", str(streams), "--connect-timeout", str(opts.connect_timeout_ms)]
    if opts.bind_dev:
        argv += ["--bind-dev", opts.bind_dev]
    if reverse:
        argv.append("-R")
    return argv


def hard_timeout(opts: Options) -> float:
    """The wall-clock limit of one run: a stalled peer must never hang the check."""
    if opts.timeout is not None:
        return opts.timeout
    return float(sum(split_duration(opts.duration))) + opts.connect_timeout_ms / 1000 \
        + GRACE_SECONDS


def judge(run: Run, floor: float | None) -> Run:
    """Set run.status from its rate and the floor; the reason says by how much it fell short."""
    if run.status == "unknown" or run.mbps is None:
        return run
    run.floor_mbps = floor
    if floor is None:
        run.status = "measured"
        run.reason = "no floor to judge against (set --floor or throughput_floor_mbps)"
        return run
    if run.mbps >= floor:
        run.status, run.reason = "ok", f"{run.mbps:.0f} Mbit/s >= floor {floor:.0f} Mbit/s"
        return run
    run.shortfall_mbps = round(floor - run.mbps, 1)
    run.shortfall_pct = round(100 * (floor - run.mbps) / floor, 1)
    run.status = "failed"
    run.reason = (f"{run.direction}: {run.mbps:.0f} Mbit/s is {run.shortfall_mbps:.0f} Mbit/s "
                  f"({run.shortfall_pct:.0f}%) below the floor of {floor:.0f} Mbit/s")
    return run


def run_once(host: Host, address: str, opts: Options, streams: int, direction: str,
             *, restart_grace: float = 0.0) -> Run:
    """One bounded iperf3 run; tool failures come back as an `unknown` Run, never raised.
    `restart_grace`: for a second direction, how long a refused connection is retried while
    the peer's `hwmgr throughput --serve` starts its next one-off server."""
    argv = build_argv(address, opts, streams, DIRECTIONS[direction])
    t0 = time.monotonic()
    res = host.run(argv, timeout=hard_timeout(opts))
    while (any(m in res.stdout + res.stderr for m in RESTARTING)
           and time.monotonic() - t0 < restart_grace):
        time.sleep(0.1)
        res = host.run(argv, timeout=hard_timeout(opts))
    wall = round(time.monotonic() - t0, 3)
    run = Run(direction, "unknown", wall_seconds=wall, argv=argv)
    try:
        nums = parse_output(res)
    except IperfOutputError as exc:
        run.reason = str(exc)
        return run
    for k, v in nums.items():
        setattr(run, k, v)
    run.status = "measured"
    return run


# ----------------------------------------------------------------------------- the host side
def resolve_peer(host: Host, peer: str) -> str | None:
    """The peer's address: an IP literal as is, else the first `getent ahosts` answer."""
    try:
        return str(ipaddress.ip_address(peer))
    except ValueError:
        pass
    res = host.run(["getent", "ahosts", peer], timeout=10)
    for line in res.stdout.splitlines() if res.ok else []:
        f = line.split()
        if f:
            try:
                return str(ipaddress.ip_address(f[0]))
            except ValueError:
                continue
    return None


def route_interface(host: Host, address: str) -> str | None:
    """The interface the kernel would send to `address` on (`ip route get`)."""
    res = host.run(["ip", "-o", "route", "get", address], timeout=10)
    if not res.ok:
        return None
    f = res.stdout.split()
    if "dev" in f and f.index("dev") + 1 < len(f):
        return f[f.index("dev") + 1]
    return None


def link_speed(host: Host, iface: str) -> int | None:
    """Negotiated speed in Mbit/s from sysfs (None when unknown or link down)."""
    speed = to_int(host.read_attr(f"/sys/class/net/{iface}/speed"))
    return speed if speed and speed > 0 else None


def device_ids(host: Host, iface: str) -> dict[str, str | None] | None:
    """Catalog-matchable IDs of the PCI function behind `iface` (None for virtual links)."""
    base = f"/sys/class/net/{iface}/device"
    vendor = hex_id(host.read_attr(f"{base}/vendor"), 4)
    if vendor is None:
        return None
    cls = hex_id(host.read_attr(f"{base}/class"), 6)
    return {"vendor_id": vendor, "device_id": hex_id(host.read_attr(f"{base}/device"), 4),
            "subsystem_vendor_id": hex_id(host.read_attr(f"{base}/subsystem_vendor"), 4),
            "subsystem_device_id": hex_id(host.read_attr(f"{base}/subsystem_device"), 4),
            "class": cls[:4] if cls else None}


def catalog_fraction(catalog: Catalog | None, driver: str | None,
                     ids: Mapping[str, object] | None
                     ) -> tuple[float, str] | None:
    """(min_fraction_of_link, entry name) from the catalog by driver name or device IDs."""
    entry: Mapping[str, object] | None = None
    name = None
    if driver and catalog is not None and driver in catalog.names():
        entry, name = catalog.entry(driver), driver
    elif ids and catalog is not None:
        m = catalog.match(ids)
        if m is not None:
            entry, name = m.entry, m.driver
    limits = (entry or {}).get("throughput")
    frac = limits.get("min_fraction_of_link") if isinstance(limits, dict) else None
    if isinstance(frac, (int, float)) and not isinstance(frac, bool) and 0 < frac <= 1:
        return float(frac), str(name)
    return None


def refuse_critical(host: Host, iface: str, force: bool) -> str | None:
    """RefusedError when `iface` carries the default route or SSH session (unless force)."""
    why = None
    if iface in safety.default_route_interfaces(host):
        why = f"{iface} carries the default route"
    elif safety.ssh_interface(host) == iface:
        why = f"{iface} carries the current SSH session"
    if why and not force:
        raise RefusedError(f"{why}: a throughput test would load it; use a dedicated test "
                           "link (--interface) or --force")
    return f"{why} (--force given)" if why else None


def check(host: Host, opts: Options, *, catalog: Catalog | None = None, driver: str | None = None
          ) -> Report:
    """Measure and judge: find the interface, refuse critical ones, size streams, run iperf3.

    Raises RefusedError / NotFoundError for bad requests; measurement problems come back as
    `unknown` runs with a reason.
    """
    address = resolve_peer(host, opts.peer)
    iface = opts.bind_dev
    if iface and not host.exists(f"/sys/class/net/{iface}"):
        raise NotFoundError(f"interface {iface} does not exist (--interface)")
    if iface is None and address is not None:
        iface = route_interface(host, address)
    report = Report(opts.peer, address, iface, None, 1, opts.floor_mbps, opts.floor_source)
    if address is None:
        report.runs = [Run(d, "unknown", f"cannot resolve peer {opts.peer!r}")
                       for d in opts.directions]
        return report
    if iface is None:
        report.runs = [Run(d, "unknown", f"no route to peer {address}")
                       for d in opts.directions]
        return report
    note = refuse_critical(host, iface, opts.force)
    if note:
        report.notes.append(note)
    report.link_speed_mbps = link_speed(host, iface)
    report.streams = opts.streams or streams_for(report.link_speed_mbps)
    if report.floor_mbps is None:
        frac = catalog_fraction(catalog, driver, device_ids(host, iface))
        if frac and report.link_speed_mbps:
            report.floor_mbps = round(frac[0] * report.link_speed_mbps, 1)
            report.floor_source = (f"catalog {frac[1]}: {frac[0]:g} x {iface} link "
                                   f"{report.link_speed_mbps} Mbit/s")
        elif frac:
            report.notes.append(f"{iface} link speed unknown: cannot apply the catalog's "
                                f"{frac[0]:g} x link floor")
    for n, direction in enumerate(opts.directions):
        run = run_once(host, address, opts, report.streams, direction,
                       restart_grace=RESTART_GRACE if n else 0.0)
        report.runs.append(judge(run, report.floor_mbps))
    return report


def serve(host: Host, port: int = 5201, timeout: float = 300.0,
          bind: str | None = None) -> Served:
    """A one-off `iperf3 -s -1` on this host, bounded by `timeout`; the server's own summary."""
    argv = [IPERF3, "-s", "-1", "-J", "-p", str(port)]
    if bind:
        argv += ["-B", bind]
    res = host.run(argv, timeout=timeout)
    out: Served = {"argv": argv, "port": port, "status": "unknown", "reason": ""}
    if res.rc == RC_TIMEOUT:
        out["reason"] = f"no client finished a test within {timeout:g}s"
        return out
    try:
        nums = parse_output(res)
    except IperfOutputError as exc:
        out["reason"] = str(exc)
        if res.rc == RC_NOT_AVAILABLE:
            out["status"] = "unavailable"
        return out
    out["status"] = "served"
    out.update(nums)
    return out


def serve_many(host: Host, port: int = 5201, *, count: int | None = None,
               idle: float = 300.0, bind: str | None = None,
               each: Callable[[Served], None] | None = None) -> list[Served]:
    """Serve tests one after another until `count` were served (None: until interrupted), so
    a client's send-then-receive (`--both`) finds the server again. Each test is a one-off
    iperf3 server (its own JSON summary); a wait longer than `idle` just starts a new one.
    `each` sees every test as it ends (a failed one too). Stops, the failure last, when iperf3
    cannot serve at all (not installed, port taken: it fails at once)."""
    served: list[Served] = []
    while count is None or len(served) < count:
        t0 = time.monotonic()
        out = serve(host, port, idle, bind)
        if out["status"] == "unknown" and out["reason"].startswith("no client finished"):
            continue  # nobody came: keep listening
        if out["status"] == "unavailable" or (
                out["status"] != "served" and time.monotonic() - t0 < LISTEN_FAILS_WITHIN):
            return [*served, out]
        served.append(out)
        if each is not None:
            each(out)
    return served


# ----------------------------------------------------------------------------- history
RECORD_DIR = "throughput"
RECORD_KEEP = 20


def record(host: Host, state_dir: str, report: Report) -> dict[str, object] | None:
    """Append a judged report to `<state>/throughput/<iface>.json` (last 20 kept).

    `hwmgr verify --throughput` takes the newest record older than an upgrade as its
    "before". Best effort: returns None when the state dir is not writable.
    """
    if not report.interface:
        return None
    entry = {**report.summary(), "at": utcnow()}
    path = f"{state_dir.rstrip('/')}/{RECORD_DIR}/{report.interface}.json"
    try:
        old = safejson.parse(host.read_text(path) or "[]")
    except ValueError:
        old = []
    old = [e for e in old if isinstance(e, dict)] if isinstance(old, list) else []
    try:
        host.write_bytes(path, (json.dumps((old + [entry])[-RECORD_KEEP:], indent=1) + "\n")
                         .encode())
    except OSError:
        return None
    return entry


def previous(host: Host, state_dir: str, iface: str, before: str
             ) -> dict[str, object] | None:
    """The newest recorded measurement on `iface` taken before the ISO time `before`."""
    path = f"{state_dir.rstrip('/')}/{RECORD_DIR}/{iface}.json"
    try:
        entries = safejson.parse(host.read_text(path) or "[]")
    except ValueError:
        return None
    if not isinstance(entries, list):
        return None
    older = [e for e in entries if isinstance(e, dict) and isinstance(e.get("at"), str)
             and e["at"] < before]
    return older[-1] if older else None
