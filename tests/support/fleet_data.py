"""A realistic fleet for the fleet-report tests: ~30 hosts of `hwmgr check` results.

Routers with the seed-002 Intel X540-AT2 on ixgbe 5.1.0-k-rh7.6 whose tuning drifted (pause,
rings, channels, LRO, txqueuelen, tcp_rmem), compliant ones, hosts where items are unknown,
unreachable hosts, one where hwmgr failed, one reboot pending, and one host whose name tries
to inject markup. Deterministic: the same call gives the same files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# a host name (= results file stem, so no '/') that tries to inject markup
HOSTILE = 'rtr-<script>alert("pwned")<\\script><img src=x onerror=alert(1)>"&'
X540 = "0000:01:00.0"
CATALOG = "2026.11.0"

# (layer, item, expected, drifted actual, fix) — seed 002's X540 on a 10G router
TUNING = [
    ("setting", "pause.rx", "on", "off", "ethtool -A {i} rx on"),
    ("setting", "ring.rx", 4096, 512, "ethtool -G {i} rx 4096"),
    ("setting", "channels.combined", 8, 63, "ethtool -L {i} combined 8"),
    ("setting", "features.large-receive-offload", "off", "on",
     "ethtool -K {i} large-receive-offload off"),
    ("setting", "txqueuelen", 10000, 1000, "ip link set dev {i} txqueuelen 10000"),
    ("setting", "mtu", 9000, 9000, "ip link set dev {i} mtu 9000"),
    ("sysctl", "sysctl.net.ipv4.tcp_rmem", "4096 87380 16777216", "4096 87380 6291456",
     "sysctl -w net.ipv4.tcp_rmem='4096 87380 16777216'"),
    ("sysctl", "sysctl.net.core.rmem_max", 16777216, 16777216,
     "sysctl -w net.core.rmem_max=16777216"),
]


def finding(layer: str, item: str, expected: Any, actual: Any, status: str, *,
            iface: str | None = "enp1s0f0", fix: str | None = None,
            reason: str | None = None) -> dict[str, Any]:
    """One check finding as the `hwmgr check --json` contract defines it."""
    return {"layer": layer, "device": X540 if layer != "sysctl" else None,
            "interface": iface if layer not in ("sysctl", "driver", "firmware") else None,
            "item": item, "expected": expected, "actual": actual, "status": status,
            "reason": reason, "fix": fix if status == "drift" else None,
            "evidence": {"command": f"ethtool {iface}" if layer == "setting" else None}}


def check_data(findings: list[dict[str, Any]]) -> dict[str, Any]:
    """The `data` of a check envelope, with the summary the findings imply."""
    summary = {k: sum(1 for f in findings if f["status"] == k)
               for k in ("ok", "drift", "unknown", "uncatalogued", "unsupported")}
    return {"compliant": summary["drift"] == 0 and summary["unknown"] == 0,
            "catalog_version": CATALOG, "summary": summary, "findings": findings}


def host_findings(drifted: set[str], unknown: set[str] = frozenset(),
                  iface: str = "enp1s0f0", driver: str = "5.1.0-k-rh7.6") -> list[dict[str, Any]]:
    """One host's findings; a `driver` other than 5.1.0-k-rh7.6 is one the catalog has no
    verdict on (uncatalogued)."""
    out = [
        finding("driver", "driver_version", driver, driver, "ok", iface=None)
        if driver == "5.1.0-k-rh7.6" else
        finding("driver", "driver_version", None, driver, "uncatalogued", iface=None,
                reason=f"ixgbe {driver} is not judged by the catalog: ixgbe {driver} is not "
                       "in the catalog"),
        finding("firmware", "firmware_version", "0x80000609", "0x80000609", "ok", iface=None),
    ]
    for layer, item, exp, bad, fix in TUNING:
        if item in unknown:
            out.append(finding(layer, item, exp, None, "unknown", iface=iface,
                               reason="ethtool -g printed no 'Current hardware settings'"))
        elif item in drifted:
            out.append(finding(layer, item, exp, bad, "drift", iface=iface,
                               fix=fix.format(i=iface), reason="differs from the catalog tuning"))
        else:
            out.append(finding(layer, item, exp, exp, "ok", iface=iface))
    out.append(finding("setting", "features.generic-receive-offload", "on", None, "unsupported",
                       iface=iface, reason="[fixed] on this driver"))
    return out


def fleet() -> dict[str, dict[str, Any]]:
    """host name -> {status, check, error} for 31 hosts."""
    hosts: dict[str, dict[str, Any]] = {}
    for i in range(1, 15):  # the last two run a driver build the catalog does not judge
        driver = "5.1.0-k-rh7.6" if i < 13 else "5.1.0-k-rh7.9"
        hosts[f"rtr-{i:02d}.dc1"] = {"status": "compliant", "check": {
            "format_version": 1, "command": "check", "status": "ok",
            "data": check_data(host_findings(set(), driver=driver)), "errors": []},
            "error": None}
    drifts = [
        {"pause.rx"}, {"ring.rx", "channels.combined"}, {"features.large-receive-offload"},
        {"txqueuelen"}, {"sysctl.net.ipv4.tcp_rmem"},
        {"pause.rx", "ring.rx", "channels.combined", "features.large-receive-offload",
         "txqueuelen", "sysctl.net.ipv4.tcp_rmem"},
        {"ring.rx"}, {"channels.combined", "txqueuelen"},
    ]
    for i, d in enumerate(drifts, start=1):
        hosts[f"rtr-{20 + i:02d}.dc2"] = {"status": "drift",
                                          "check": check_data(host_findings(d)), "error": None}
    for i in range(1, 4):
        hosts[f"edge-{i:02d}.dc3"] = {"status": "unknown", "check": check_data(
            host_findings(set(), unknown={"ring.rx"})), "error": None}
    hosts["rtr-31.dc2"] = {"status": "reboot-pending", "check": check_data(
        host_findings(set())), "error": None}
    for i in range(1, 4):
        hosts[f"old-{i:02d}.dc1"] = {"status": "unreachable", "check": None,
                                     "error": "ssh: connect to host port 22: No route to host"}
    hosts["db-07.dc1"] = {"status": "failed", "check": None,
                          "error": "hwmgr check: error: /etc/hwmgr/catalog.json: not valid JSON"}
    # hostile: markup in the name, an interface name and the reason
    evil = host_findings({"ring.rx"}, iface='eth0"><img src=x onerror=alert(2)>')
    evil[-1]["reason"] = "</script><script>alert(3)</script>"
    hosts[HOSTILE] = {"status": "drift", "check": check_data(evil), "error": None}
    return hosts


def write_results(directory: Path) -> dict[str, dict[str, Any]]:
    """One <host>.json per host in `directory`; returns what was written."""
    directory.mkdir(parents=True, exist_ok=True)
    hosts = fleet()
    for name, result in hosts.items():
        (directory / f"{name}.json").write_text(json.dumps(result, indent=1))
    return hosts


EXTRA_FEATURES = ("rx-checksumming", "tx-checksumming", "scatter-gather",
                  "tcp-segmentation-offload", "generic-segmentation-offload", "rx-vlan-offload",
                  "tx-vlan-offload", "receive-hashing")


def big_fleet(n: int, seed: int = 26) -> dict[str, dict[str, Any]]:
    """`n` hosts as a large site's night looks: ~45 % drifting on a few of the tuning items
    (some items much more often than others), ~3 % unknown, ~1 % without a result, the rest
    compliant; 40 sites in the names (`web0001.dc07.example.net`), values varied per host.
    For the report's logic (paging, filters, counts): its findings are compact (~4.6 KB a
    host), so figures of size and speed come from `bench/fleet --report`, which builds its
    hosts from real check output (bench/synth.py `real_fleet`)."""
    import random

    rnd = random.Random(seed)
    # the items that can drift (their drifted value differs), some much more often
    weights = [(t[1], w) for t, w in zip([t for t in TUNING if t[2] != t[3]], (9, 6, 4, 3, 2, 1))]
    items = [name for name, _ in weights]
    hosts: dict[str, dict[str, Any]] = {}
    for i in range(n):
        name = f"{('web', 'db', 'rtr', 'app')[i % 4]}{i:05d}.dc{i % 40:02d}.example.net"
        iface = f"enp{1 + i % 3}s0f{i % 2}"
        roll = rnd.random()
        if roll < 0.01:
            hosts[name] = {"status": ("unreachable", "failed")[i % 2], "check": None,
                           "error": "ssh: connect to host port 22: No route to host"}
            continue
        drifted: set[str] = set()
        unknown: set[str] = set()
        if roll < 0.46:
            k = 1 + int(rnd.random() ** 3 * 4)
            drifted = set(rnd.choices(items, weights=[w for _, w in weights], k=k))
        elif roll < 0.49:
            unknown = {"ring.rx"}
        found = host_findings(drifted, unknown, iface=iface,
                              driver="5.1.0-k-rh7.6" if i % 50 else "5.1.0-k-rh7.9")
        found += [finding("setting", f"features.{feat}", "on", "on", "ok", iface=iface)
                  for feat in EXTRA_FEATURES]  # 19 items a host, as the fleet had
        status = "drift" if drifted else "unknown" if unknown else "compliant"
        hosts[name] = {"status": status, "check": check_data(found), "error": None}
    return hosts
