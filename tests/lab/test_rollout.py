"""A driver rollout over two lab guests that stops itself (issue 42), on the lab's own boots.

lab/rollout.py says who does what: the host keeps the record with the real `hwmgr rollout`;
guest-a (chain a, the canary) upgrades from source to 3.8.8 on a#2 and passes its gate on
a#3; guest-b (chain b, the image booted fresh once the canary passed) installs a binary
package built once on the host (lab/binpkg.py), a build made to fail: its gate fails, the
host rolls it back exactly, the budget of 1 stops the rollout (guest-c never starts), and
the rollback is gated again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lab import binpkg, rollout
from lab.chain import Chain, wanted
from lab.vm import Boot, Lab, e1000e_versions

pytestmark = [pytest.mark.lab, pytest.mark.skipif(
    not wanted("b"), reason="HWMGR_LAB_CHAINS without b: the rollout's second guest left out")]

WAIT = 3600  # chain b starts after a#2 and queues for the lab's slots behind the others


def module_state(b: Boot) -> dict[str, Any]:
    """e1000e as the guest's own tools saw it at boot, and the module files it has."""
    v = e1000e_versions(b.boot_facts)
    return {"file": v["file"], "modinfo": v["modinfo"], "sys": v["sys"],
            "eth0": "eth0" in b.boot_facts["ethtool"]}


@pytest.mark.timeout(WAIT)
def test_rollout_halts_on_the_second_guest(lab: Lab, chains: dict[str, Chain]) -> None:
    a = chains["a"]
    record: rollout.Record | None = a.data.get("rollout")
    a3 = a.data.get("boot3")
    assert record is not None and a3 is not None, "chain a did not reach boot 3 (the canary)"
    # the canary: baseline on a#2 before its upgrade, the gate on a#3 passed, marked done
    assert a.data["boot2"].ok("gate-baseline")["data"]["rollout"] == a.data["rollout_id"]
    canary = a3.ok("gate")["data"]
    assert canary["passed"], canary
    assert {s["step"] for s in canary["steps"]} == {"verify", "links", "throughput",
                                                   "kernel_log", "check"}, canary

    c = chains["b"]
    b1 = c.wait(1)
    inbox = module_state(b1)
    assert inbox["modinfo"] is None and inbox["eth0"], inbox  # the fresh image: in-tree e1000e
    assert b1.ok("gate-baseline")["data"]["rollout"] == a.data["rollout_id"]
    up = b1.ok("upgrade")["data"]
    assert up["transaction"]["state"] == "committed", up
    names = [s["name"] for s in up["transaction"]["steps"]]
    assert not any(n.startswith("dkms") for n in names), names  # nothing built in the guest
    deb = lab.binpkg.result().debs[binpkg.BROKEN]
    assert deb.name.split("_")[0] in (b1.text("pkg-status.out") or ""), b1.text("pkg-status.out")
    assert b1.facts["modules"]["e1000e"]["modinfo"].get("version") == binpkg.BROKEN
    # built and signed on the host with the site key, not in the guest
    assert b1.facts["modules"]["e1000e"]["modinfo"].get("signer") == binpkg.SIGNER

    # b#2: the package's build binds nothing; the boot verify reports, the gate fails
    b2 = c.wait(2)
    now = module_state(b2)
    assert now["sys"] == binpkg.BROKEN and not now["eth0"], now
    assert b2.rc_of("gate") == 1, b2.text("gate.out")
    failed = b2.json("gate.out")["data"]
    assert {"verify", "links"} <= set(failed["failed_steps"]), failed
    rb = b2.ok("rollback")["data"]
    assert rb["plan"]["to_version"] == "inbox" and rb["transaction"]["state"] == "committed", rb
    record.mark(rollout.SECOND, "failed", failed)
    # the budget of 1 is spent: nothing more starts
    assert record.claim(rollout.SPARED) == [], record.transcript()

    # b#3: exactly the host before the change: in-tree e1000e, no package, the gate passes
    b3 = c.wait(3)
    assert module_state(b3) == inbox, (module_state(b3), inbox)
    assert deb.name.split("_")[0] not in (b3.text("pkg-status.out") or "")
    regate = b3.ok("regate")["data"]
    assert regate["passed"], regate
    record.mark(rollout.SECOND, "rolled-back", regate)
    kinds = [(t["kind"], t["state"]) for t in reversed(b3.ok("history")["data"]["transactions"])]
    assert kinds == [("upgrade", "committed"), ("rollback", "committed")], kinds

    rc, rep = record.report()
    assert rc == 1, (rc, rep)  # a gate failed
    data = rep["data"]
    states = {h: v["state"] for h, v in data["hosts"].items()}
    assert states == {rollout.CANARY: "done", rollout.SECOND: "rolled-back",
                      rollout.SPARED: "pending"}, json.dumps(rep)[:2000]
    assert "failure budget reached" in data["halted"]["reason"], data["halted"]
    assert data["hosts"][rollout.SECOND]["gate"]["failed_steps"] == failed["failed_steps"]
    assert (record.dir / "report" / "rollout-report.html").is_file()
