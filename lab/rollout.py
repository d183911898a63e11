"""The driver rollout over two lab guests (issue 42): the record on the host, the gate inside.

The host is the control node: it keeps the rollout record with the real `hwmgr rollout`
(start, claim, mark, report), as the Ansible module does on a site's control node, and hands
each guest its part of the change; each guest takes the gate's baseline before its change and
runs `hwmgr gate check` after the reboot. Two guests, the lab image booted twice:

  guest-a  chain a, the canary: a#2 baseline, upgrade e1000e to 3.8.8 (the catalog's
           recommended version) from source (DKMS) | a#3 the gate passes → marked done; the
           record hands out the next batch
  guest-b  chain b, the image booted fresh once the canary passed: b#1 baseline, the binary
           package built once on the host (lab/binpkg.py) installed with `upgrade --package`:
           a build made to fail its gate (its probe refuses the NIC: the link stays down)
           | b#2 the boot verify reports the failure (this guest's site config does not roll
           back by itself), the gate fails → the host rolls the change back (`rollback`), as the
           module does on a failed gate; the record, its budget of 1 spent, hands out nothing
           more (guest-c never starts) | b#3 the rollback gated again: passes → rolled-back

The record's change names the canary's version; the second guest's package is a different
lab build on purpose: identical emulated NICs cannot make one driver fail on one guest only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from lab import binpkg
from lab.vm import HOST_IP, PKGS

HOSTS = ("guest-a", "guest-b", "guest-c")  # guest-c stands for the fleet the halt spares
CANARY, SECOND, SPARED = HOSTS
CHANGE = "upgrade e1000e --to 3.8.8_lab"
BATCHES, BUDGET = "1,1", "1"
CATALOG_D = "/etc/hwmgr/catalog.d"


def baseline(rid: str) -> str:
    """The guest step that records the gate's baseline before the change."""
    return f"rec gate-baseline hwmgr gate baseline {rid} --json\n"


def gate(rid: str, port: int, name: str = "gate") -> str:
    """The guest step that gates the host after the change (verify, links, iperf3 to the
    host's server for this VM, kernel log, check not worse)."""
    return (f"rec {name} hwmgr gate check {rid} --peer {HOST_IP} --port {port} "
            f"--floor 50 --json\n")


def second_plan(rid: str, port: int) -> list[tuple[str, dict[str, Any]]]:
    """guest-b's three boots (step script, boot() keywords)."""
    pkg = f"{PKGS}/{binpkg.PACKAGES[0][0]}-*.deb"
    install = (f"install -D -m644 -t {CATALOG_D} {PKGS}/*.json\n" + baseline(rid) +
               f"rec upgrade hwmgr upgrade e1000e --to {binpkg.BROKEN} --package {pkg} "
               "--kernel \"$(uname -r)\" --yes --json\n"
               "rec pkg-status dpkg-query -W -f '${Package} ${Version} ${Status}\\n' "
               "'*-modules-*'\nfacts_end\nreboot_after")
    rollback = (gate(rid, port) +
                "if [ \"$(cat $OUT/gate.rc)\" != 0 ]; then\n"
                "  rec rollback hwmgr rollback e1000e --yes --json\n  reboot_after\nfi")
    regate = (gate(rid, port, "regate") +
              "rec pkg-status dpkg-query -W -f '${Package} ${Version} ${Status}\\n' "
              "'*-modules-*'\nrec history hwmgr history e1000e --json")
    return [(install, {"timeout": 900}), (rollback, {"timeout": 900}),
            (regate, {"timeout": 600})]


class Record:
    """The rollout record on the host, through the real CLI (`python -m hwmgr rollout`)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir / "rollout"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "record.json"
        self.log: list[tuple[list[str], int, dict[str, Any]]] = []

    def cli(self, *args: str) -> tuple[int, dict[str, Any]]:
        argv = [sys.executable, "-m", "hwmgr", "rollout", args[0], str(self.path), *args[1:],
                "--json"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        try:
            doc = json.loads(p.stdout)
        except ValueError:
            doc = {"errors": [p.stdout[-500:], p.stderr[-500:]]}
        self.log.append((argv[3:], p.returncode, doc))
        return p.returncode, doc

    def start(self) -> str:
        rc, doc = self.cli("start", "--change", CHANGE, "--hosts", ",".join(HOSTS),
                           "--batches", BATCHES, "--budget", BUDGET)
        if rc != 0:
            raise AssertionError(f"rollout start exited {rc}: {doc}")
        return str(doc["data"]["id"])

    def claim(self, host: str) -> list[str]:
        rc, doc = self.cli("claim", "--hosts", host)
        if rc != 0:
            raise AssertionError(f"rollout claim {host} exited {rc}: {doc}")
        return list(doc["data"].get("start") or []) + list(doc["data"].get("resume") or [])

    def mark(self, host: str, state: str, evidence: dict[str, Any] | None) -> dict[str, Any]:
        ev = self.dir / f"{host}-{state}.json"
        ev.write_text(json.dumps(evidence or {}))
        rc, doc = self.cli("mark", "--host", host, "--state", state, "--evidence", f"@{ev}")
        if rc != 0:
            raise AssertionError(f"rollout mark {host} {state} exited {rc}: {doc}")
        return doc["data"]

    def report(self) -> tuple[int, dict[str, Any]]:
        return self.cli("report", "--out", str(self.dir / "report"))

    def transcript(self) -> str:
        return "\n".join(f"hwmgr rollout {' '.join(a)} -> exit {rc}" for a, rc, _ in self.log)
