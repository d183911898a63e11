#!/usr/bin/env python3
"""Propose each known issue's `only_when`: the condition its source states the defect needs
(an XDP program, enabled VFs, PTP, an NVM update, device removal, an error path, ...).

The condition is read from the issue's own symptom line (the catalog's words for what the
source states: a CVE record's title, a release note's bug-fix line), by the patterns below;
the review (the printed table) decides, and `REVIEWED_NOT` drops a pattern's false hits. Run
by hand from the checkout, then look at the diff:

    .venv/bin/python catalog-src/conditions.py            # the proposals, one per line
    .venv/bin/python catalog-src/conditions.py --write    # into catalogs/drivers/*.json

An existing `only_when` is kept (a person set or reviewed it). Only known-bad severities get a
condition: it is what turns them into `outdated` on a host not seen to meet it
(docs/known-issues.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hwmgr.catalog.model import BAD_SEVERITIES, CONDITIONS  # noqa: E402  (one owner)

DRIVERS = REPO / "catalogs" / "drivers"

# Drivers that are themselves virtual functions: "VF" in their symptoms is the host itself.
VF_DRIVERS = frozenset({"iavf", "i40evf", "ixgbevf", "igbvf"})

# First match wins; each pattern reads the symptom (lower-cased) and the id.
PATTERNS: tuple[tuple[str, str], ...] = (
    ("xdp", r"\bxdp|af_xdp|\bxsk\b"),
    ("nvm", r"\bnvm\b|nvram|eeprom|\bflash\b|nvmupdate|firmware update|fw update"),
    ("sriov", r"\bvfs?\b|sr-?iov|virtual function|\bvf_|_vf\b|\bvf-|-vfs?-"),
    ("ptp", r"\bptp|timestamp|\bphc\b|extts|settime|adjfine|\bpps\b|1588"),
    ("crypto-offload", r"ipsec|xfrm|macsec|\bktls\b|\btls\b"),
    ("switching-offload", r"eswitch|e-switch|switchdev|representor|"
                          r"connection-tracking|conntrack|\btc\b|flower|bridge mode|ovs bridge"),
    ("rfs", r"\brps\b|\brfs\b|\barfs\b|flow_steer|n-?tuple"),
    ("bond", r"\blag\b|\bbond"),
    ("rdma", r"\brdma|\broce\b|iwarp|\bclient_subtask|\bi40e_client"),
    ("debug", r"debugfs|\bdbg|blktrace|kdump|lockdep|devcoredump"),
    ("removal", r"\bremov(e|al|ing)\b(?! of)(?! .*\bmac\b)|unload|unregister|unbind|"
                r"hot-?unplug|surprise|teardown|\brmmod\b"),
    ("multipath", r"multipath|path fail"),
    ("module-parameter", r"module param"),
    ("error-path", r"error path|err(or)? flow|error handling|\berr path|after a failed|"
                   r"on failure|fails? to (allocate|probe|load|open)|allocation failure|"
                   r"probe failure|error unwind|in the reset path"),
)

# (A shutdown is not a condition: every reboot shuts the driver down.)
# The review's word where a pattern reads the symptom wrongly: the condition the source does
# state, or None where it states none the host could lack (why, per id).
OVERRIDES: dict[str, str | None] = {
    # module EEPROM (ethtool -m) is read routinely by optics monitoring: no condition
    "CVE-2022-49581": None, "CVE-2023-53142": None,
    # PTP words that are not about timestamping being in use
    "ena-1.1.2-keepalive-uninit-reset": None,  # the keep-alive timestamp, not PTP
    "CVE-2024-42107": None,  # strikes when PTP is disabled
    "CVE-2026-23210": None, "CVE-2026-68133": None,  # VSI rebuild, PTP release: default
    "CVE-2026-43447": None,  # during a reset
    "CVE-2025-68215": "removal", "ena-2.11.1g-phc-info-use-after-free": "removal",
    # a drive or SAS port going away is routine on a storage controller: no condition
    "CVE-2025-40115": None, "CVE-2022-50768": None, "CVE-2025-68371": None,
    "smartpqi-2.1.22-040-hot-remove-bad-tag-crash": None,
    "smartpqi-2.1.36-026-lun-reset-after-removal": None,
    "smartpqi-2.1.26-030-rescan-null-deref": None,
    "smartpqi-2.1.20-035-multi-actuator-slave-destroy": None,  # any multi-actuator drive
    "smartpqi-2.1.8-040-iobypass-read-failures": None,  # the bypass is the normal I/O path
    "ena-2.2.9g-kernel-5-7-load-failure": None,  # every load on 5.7+ fails
    "ena-2.17.2g-eni-hot-unplug-use-after-free": None,  # ENI detach is routine on EC2
    "CVE-2026-31395": None,  # a firmware async event, not a debug interface
    "CVE-2024-46770": None,  # the PF reset flow, not removal
    # bridge offload (hwmode, OVS over a VF LAG): the switching, not the VFs, is the condition
    "CVE-2024-46857": "switching-offload", "mlx5_core-3070027": "switching-offload",
}


def propose(driver: str, issue: dict[str, Any]) -> str | None:
    """The condition the symptom states, or None."""
    if issue.get("severity") not in BAD_SEVERITIES:
        return None
    if issue["id"] in OVERRIDES:
        return OVERRIDES[issue["id"]]
    text = f"{issue.get('symptom', '')} {issue.get('id', '')}".lower()
    for name, pattern in PATTERNS:
        if name == "sriov" and driver in VF_DRIVERS:
            continue
        if re.search(pattern, text):
            return name
    return None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write into catalogs/drivers")
    args = ap.parse_args(argv)
    for name in [n for n, _ in PATTERNS] + [c for c in OVERRIDES.values() if c]:
        if name not in CONDITIONS:
            raise SystemExit(f"conditions.py: {name!r} is not in hwmgr.catalog.model.CONDITIONS")
    total = 0
    for path in sorted(DRIVERS.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        changed = False
        for driver, entry in data["drivers"].items():
            for issue in entry.get("known_issues", []):
                if "only_when" in issue:
                    continue
                cond = propose(driver, issue)
                if cond is None:
                    continue
                total += 1
                print(f"{cond}\t{driver}\t{issue['id']}\t{issue['symptom']}")
                if args.write:
                    issue["only_when"] = cond
                    changed = True
        if changed:
            path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n",
                            encoding="utf-8")
    print(f"{total} proposal(s){' written' if args.write else ''}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
