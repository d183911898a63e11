"""Bench inputs: a synthetic host snapshot with many PCI functions (PFs with SR-IOV VFs), a big
catalog, and a fleet's results made from real `hwmgr check --json` outputs.

Each function also gets a 64-byte `config` file so pciutils' lspci can read the same tree
(`lspci -A linux-sysfs -O sysfs.path=TREE/sys/bus/pci`); hwmgr itself never reads `config`.
The fleet (`real_fleet`) is built from what the installed hwmgr prints for the fixture hosts,
varied per host only by picking among those real outputs, as the playbook records them.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any, Iterable, Iterator

from hwmgr.catalog.load import load_catalog
from hwmgr.config import config_from

PF = ("8086", "1528", "8086", "0001", "020000", "01", "ixgbe", "5.1.0-k")
VF = ("8086", "1515", "8086", "0001", "020000", "01", "ixgbevf", "4.1.0-k")


def _config(vendor: str, device: str, svendor: str, sdevice: str, cls: str, rev: str) -> bytes:
    head = struct.pack("<HHHHB", int(vendor, 16), int(device, 16), 0x0406, 0x0010, int(rev, 16))
    head += bytes([int(cls[4:6], 16), int(cls[2:4], 16), int(cls[0:2], 16), 0, 0, 0, 0])
    head += b"\0" * 24 + b"\0" * 4
    head += struct.pack("<HH", int(svendor, 16), int(sdevice, 16))
    return head.ljust(64, b"\0")


def uevent(addr: str, spec: tuple[str, ...]) -> str:
    """The function's `uevent` as the kernel writes it (dev_uevent + pci_uevent)."""
    vendor, device, svendor, sdevice, cls, _, driver, _ = (s.upper() for s in spec)
    return (
        f"DRIVER={spec[6]}\nPCI_CLASS={int(cls, 16):04X}\nPCI_ID={vendor}:{device}\n"
        f"PCI_SUBSYS_ID={svendor}:{sdevice}\nPCI_SLOT_NAME={addr}\n"
        f"MODALIAS=pci:v0000{vendor}d0000{device}sv0000{svendor}sd0000{sdevice}"
        f"bc{cls[0:2]}sc{cls[2:4]}i{cls[4:6]}\n"
    )


def _function(root: Path, addr: str, spec: tuple[str, ...], ifname: str, ue: bool) -> Path:
    vendor, device, svendor, sdevice, cls, rev, driver, _ = spec
    d = root / "sys/bus/pci/devices" / addr
    d.mkdir(parents=True)
    for name, value in (
        ("vendor", f"0x{vendor}"), ("device", f"0x{device}"),
        ("subsystem_vendor", f"0x{svendor}"), ("subsystem_device", f"0x{sdevice}"),
        ("class", f"0x{cls}"), ("revision", f"0x{rev}"), ("numa_node", "0"),
        ("current_link_speed", "5.0 GT/s PCIe"), ("current_link_width", "8"),
    ):
        (d / name).write_text(value + "\n")
    if ue:
        (d / "uevent").write_text(uevent(addr, spec))
    (d / "config").write_bytes(_config(vendor, device, svendor, sdevice, cls, rev))
    os.symlink(f"../../../bus/pci/drivers/{driver}", d / "driver")
    (d / "net" / ifname).mkdir(parents=True)
    n = root / "sys/class/net" / ifname
    n.mkdir(parents=True)
    for name, value in (("address", "a0:36:9f:3e:c4:38"), ("mtu", "1500"), ("speed", "10000"),
                        ("duplex", "full"), ("operstate", "up"), ("tx_queue_len", "1000")):
        (n / name).write_text(value + "\n")
    return d


def build(root: Path, pfs: int = 64, vfs_per_pf: int = 15, ue: bool = True) -> int:
    """Write the tree under `root`; returns the number of PCI functions. `ue=False` leaves
    out the `uevent` files, like snapshots taken before hwmgr read them."""
    index, count = [], 0
    (root / "commands").mkdir(parents=True)
    for i in range(pfs):
        bus, dom = 0x10 + i % 240, 2 * (i // 240)  # PFs on even domains, their VFs on odd
        pf_addr = f"{dom:04x}:{bus:02x}:00.0"
        pf = _function(root, pf_addr, PF, f"p{i}", ue)
        (pf / "sriov_totalvfs").write_text("63\n")
        (pf / "sriov_numvfs").write_text(f"{vfs_per_pf}\n")
        specs = [(pf_addr, PF, f"p{i}")]
        for v in range(vfs_per_pf):
            vf_addr = f"{dom + 1:04x}:{bus:02x}:{0x10 + v // 8:02x}.{v % 8}"
            vf = _function(root, vf_addr, VF, f"p{i}v{v}", ue)
            os.symlink(f"../{vf_addr}", pf / f"virtfn{v}")
            os.symlink(f"../{pf_addr}", vf / "physfn")
            specs.append((vf_addr, VF, f"p{i}v{v}"))
        for addr, spec, ifname in specs:
            out = f"commands/ethtool-i-{ifname}.txt"
            (root / out).write_text(
                f"driver: {spec[6]}\nversion: {spec[7]}\nfirmware-version: 0x800003df\n"
                f"bus-info: {addr}\n"
            )
            index.append({"argv": ["ethtool", "-i", ifname], "rc": 0, "stdout": out})
            count += 1
    (root / "commands/index.json").write_text(json.dumps(index))
    for m, ver in (("ixgbe", PF[7]), ("ixgbevf", VF[7])):
        (root / "sys/module" / m).mkdir(parents=True)
        (root / "sys/module" / m / "version").write_text(ver + "\n")
    (root / "snapshot.json").write_text(json.dumps({
        "format": "hwmgr-snapshot", "version": 1, "hostname": "synthetic",
        "kernel": "3.10.0-957.5.1.el7.x86_64", "captured": "2026-11-21T00:00:00Z"}))
    return count


def big_catalog(dest: Path, shipped: Path, rules: int = 3_000) -> int:
    """Write the shipped catalog (a directory, merged into one file) plus one driver with
    `rules` subsystem rules; returns the number of device rules in the file (shipped ones
    included)."""
    data = json.loads(json.dumps(load_catalog([shipped], config=config_from(None)).doc))
    template = data["drivers"]["ixgbe"]
    devices = [
        {"vendor": "1d6c", "device": f"{0x1000 + i // 1000:04x}", "subvendor": "1d6c",
         "subdevice": f"{i % 1000:04x}", "name": f"Synthetic adapter {i}"}
        for i in range(rules)
    ]
    data["drivers"]["synthnic"] = {
        "version_scheme": template["version_scheme"],
        "description": f"synthetic driver for benches ({rules:,} subsystem rules)",
        "versions": {"1.0.0": {"status": "recommended", "reason": "bench",
                               "evidence": [{"title": "bench/synth.py", "kind": "lab",
                                             "observed": "synthetic"}]}},
        "devices": devices,
    }
    dest.write_text(json.dumps(data, indent=1))
    return sum(len(d["devices"]) for d in data["drivers"].values())


# ------------------------------------------------------------------ real-shaped fleet results
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
# Ansible's own words for a host it cannot reach (the playbook keeps `msg` as the error)
UNREACHABLE = ("Failed to connect to the host via ssh: ssh: connect to host {name} port 22: "
               "No route to host")
CHECK_STATUS = {0: "compliant", 5: "drift", 7: "reboot-pending", 11: "unknown"}


def real_roots(which: str = "all") -> list[Path]:
    """The fixture trees `hwmgr check` can run on: the seed hosts (tests/fixtures/hosts), and
    with `all` also the defect hosts and the field hosts (real machines, each README naming
    its public source)."""
    roots = sorted(p for p in (FIXTURES / "hosts").iterdir() if p.is_dir())
    if which == "all":
        roots += sorted((FIXTURES / "defects").glob("*/snapshot"))
        roots += sorted((FIXTURES / "field").glob("*/snapshot"))
    return roots


def real_outputs(roots: list[Path], hwmgr: list[str], jobs: int = 2) -> list[dict[str, Any]]:
    """`hwmgr check --json --root R` once per root, `jobs` at a time: [{root, rc, envelope}]
    exactly as the installed hwmgr printed them."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    def one(root: Path) -> dict[str, Any]:
        res = subprocess.run([*hwmgr, "check", "--json", "--root", str(root)],
                             capture_output=True, text=True, check=False)
        return {"root": str(root), "rc": res.returncode, "envelope": json.loads(res.stdout)}

    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, roots))


def playbook_entry(out: dict[str, Any]) -> dict[str, Any]:
    """A check's output as fleet-check.yml records it (results.json.j2): the module's status
    and the check's data, or `failed` with hwmgr's error when the check itself failed."""
    env = out["envelope"]
    if out["rc"] in CHECK_STATUS and env.get("data") is not None:
        return {"status": CHECK_STATUS[out["rc"]], "check": env["data"], "error": None}
    why = "; ".join(map(str, env.get("errors") or [])) or f"hwmgr check exited {out['rc']}"
    return {"status": "failed", "check": None, "error": f"hwmgr check: error: {why}"}


def _drifted_values(outputs: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[Any]]:
    """(layer, item, expected as JSON) → the distinct drifted actual values the real outputs
    hold for it: what another host of the fleet could plausibly read instead."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for out in outputs:
        for f in ((out["envelope"].get("data") or {}).get("findings") or []):
            if f.get("status") == "drift" and f.get("actual") is not None:
                key = (f["layer"], f["item"], json.dumps(f["expected"], sort_keys=True))
                seen.setdefault(key, {})[json.dumps(f["actual"], sort_keys=True)] = f["actual"]
    return {k: list(v.values()) for k, v in seen.items() if len(v) > 1}


def source_shape(entry: dict[str, Any]) -> dict[str, Any]:
    """The same entry in check's schema-3 shape, SIMULATED for a labelled comparison only:
    each finding's evidence text replaced by `source` {ref, url}, the url the first one the
    text names, the ref made from the item. Output that has `source` already (a check of
    schema 3) is left as it is."""
    import re

    data = entry["check"]
    if data is None:
        return entry
    findings = []
    for f in data.get("findings") or []:
        if "source" in f:
            findings.append(f)
            continue
        g = {k: v for k, v in f.items() if k != "evidence"}
        ev = f.get("evidence")
        if ev is None:
            g["source"] = None
        else:
            m = re.search(r"https?://[^\s<>\"']+", json.dumps(ev))
            kind = f["item"].split(".", 1)[0]
            ref = (f"{kind}:{f['item'].split('.', 1)[-1]}"
                   if kind in ("known_issue", "firmware_min") else f"rule:{f['item']}")
            g["source"] = {"ref": ref, "url": m.group(0) if m else None}
        findings.append(g)
    return {**entry, "check": {**data, "schema_version": max(3, data.get("schema_version") or 1),
                               "findings": findings}}


def real_fleet(outputs: list[dict[str, Any]], n: int, seed: int = 38,
               unreachable: float = 0.01) -> Iterator[tuple[str, dict[str, Any]]]:
    """`n` hosts (name, results.json entry) made from real check outputs: each host one of
    them picked at random, named `web00042.dc07.example.net`, with its own host name and, on
    about a third of its drifting items, a drifted value another real host read for that
    item (never a new finding); `unreachable` of them unreachable as the playbook records
    it. Deterministic for a seed; one entry at a time (10,000 do not need holding)."""
    import random

    rnd = random.Random(seed)
    pool = _drifted_values(outputs)
    for i in range(n):
        name = f"{('web', 'db', 'rtr', 'app')[i % 4]}{i:05d}.dc{i % 40:02d}.example.net"
        if rnd.random() < unreachable:
            yield name, {"status": "unreachable", "check": None,
                         "error": UNREACHABLE.format(name=name)}
            continue
        entry = playbook_entry(rnd.choice(outputs))
        data = entry["check"]
        if data is not None:
            findings = []
            for f in data.get("findings") or []:
                key = (f["layer"], f["item"], json.dumps(f["expected"], sort_keys=True))
                if f["status"] == "drift" and key in pool and rnd.random() < 0.33:
                    f = {**f, "actual": rnd.choice(pool[key])}
                findings.append(f)
            host = {**(data.get("host") or {}), "hostname": name.split(".", 1)[0]}
            entry = {**entry, "check": {**data, "host": host, "findings": findings}}
        yield name, entry


def write_results_json(path: Path, hosts: Iterable[tuple[str, dict[str, Any]]]) -> int:
    """`{"hosts": {name: entry}}` as fleet-check.yml writes it, one host at a time; the
    number of hosts written."""
    count = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"hosts": {\n')
        for name, entry in hosts:
            fh.write(("" if count == 0 else ",\n") + json.dumps(name) + ": " + json.dumps(entry))
            count += 1
        fh.write("\n}}\n")
    return count
