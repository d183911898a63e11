#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v2.0+ (see https://www.gnu.org/licenses/old-licenses/gpl-2.0.txt)
"""Ansible module: one host's step of a rollout: baseline, change, gate, exact rollback."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hwmgr_rollout
short_description: "One host of an hwmgr rollout: change, gate, exact rollback if it fails"
description:
  - O(action=run) records the host's baseline (C(hwmgr gate baseline), kept on a resume),
    makes the change (C(hwmgr apply) of catalog settings layers, or C(hwmgr upgrade DRIVER
    --to V)), runs the health gate (C(hwmgr gate check)) and, when it fails, rolls the host
    back exactly (C(hwmgr revert) / C(hwmgr rollback)) and gates it again.
  - A change that needs a reboot (an upgrade, an apply that exits 7) returns
    RV(reboot_required) before gating; reboot the host, then call O(action=gate), which
    gates, and rolls back and gates again when the gate fails (O(action=regate) gates a host
    rolled back by a change that itself needed a reboot).
  - A change already in effect (a resumed rollout after a crash of the control node) is
    nothing to do for hwmgr (exit 4), so nothing is changed twice.
  - The module never fails for a failed gate; RV(passed) says it and RV(gate) holds the
    evidence, for C(hwmgr rollout mark) on the control node.
version_added: "0.2.0"
author: hwmgr authors
options:
  rollout:
    description: The rollout's id (C(hwmgr rollout start) prints it).
    type: str
    required: true
  change:
    description: The change, as in C(hwmgr rollout start --change), e.g. C(apply --layer
      settings) or C(upgrade igb --to 5.18.7).
    type: str
    required: true
  action:
    description: C(run) the whole step, C(gate) after the change's reboot, C(regate) after
      the rollback's reboot.
    type: str
    choices: [run, gate, regate]
    default: run
  rollback:
    description: Roll a host that fails its gate back exactly.
    type: bool
    default: true
  peer:
    description: iperf3 peer for the gate's throughput step (none without it).
    type: str
  floor:
    description: The throughput step's floor in Mbit/s.
    type: float
  duration:
    description: Seconds of each throughput run (2 to 60).
    type: float
    default: 2
  interface:
    description: Interface for the throughput step.
    type: str
  persist_root:
    description: C(--persist-root) of apply (persistence files under this directory).
    type: path
  state_dir:
    description: hwmgr's state dir (journal, lock, baselines).
    type: path
  catalogs:
    description: Catalog files on the managed host layered over the shipped catalog.
    type: list
    elements: path
    default: []
  catalog_content:
    description: Catalog layers given inline (file name to JSON text).
    type: dict
    default: {}
  executable:
    description: The hwmgr command. With the default, hwmgr runs inside this module's
      process when its Python can import it.
    type: str
    default: hwmgr
"""

EXAMPLES = r"""
- name: Change, gate and (if it fails) revert this host
  hwmgr.fleet.hwmgr_rollout:
    rollout: "{{ rollout_id }}"
    change: apply --layer settings
    peer: 10.0.0.9
    floor: 5000
  register: step
"""

RETURN = r"""
passed:
  description: The gate passed (after the change; a rolled-back host stays not passed).
  returned: always
  type: bool
gate:
  description: The gate's evidence (C(hwmgr gate check --json) data), or the change's error.
  returned: always
  type: dict
rollback:
  description: What the rollback did (action, txn, its own gate), or null.
  returned: always
  type: dict
reboot_required:
  description: The change (or rollback) is live only after a reboot; gate after it.
  returned: always
  type: bool
txn:
  description: The change's transaction id (null when it was already in effect).
  returned: always
  type: int
"""

import shlex

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hwmgr.fleet.plugins.module_utils.hwmgr import (
    COMMON_ARGUMENT_SPEC,
    EXIT_FAILED,
    EXIT_NOTHING_TO_DO,
    EXIT_OK,
    EXIT_REBOOT_PENDING,
    base_argv,
    importable_hwmgr,
    one_line,
    run_hwmgr,
)


class Step:
    """The hwmgr commands of one rollout step on this host, in this process or as commands."""

    def __init__(self, module):
        self.module = module
        p = module.params
        self.p = p
        self.main = importable_hwmgr() if p["executable"] == "hwmgr" else None
        self.exe = "hwmgr" if self.main else None
        words = shlex.split(p["change"])
        if not words or words[0] not in ("apply", "upgrade") or (
                words[0] == "upgrade" and (len(words) != 4 or words[2] != "--to")):
            module.fail_json(msg="change %r: expected 'apply [--layer L] [--interface IF]' or "
                                 "'upgrade DRIVER --to VERSION'" % p["change"], rc=None)
        self.words = words
        # once: the inline catalog layers are written to the module's temp dir one time
        self.head = base_argv(module, "VERB", executable=self.exe)

    def hwmgr(self, verb, args, ok):
        argv = [self.head[0], verb] + self.head[2:] + list(args)
        if self.p["state_dir"]:
            argv += ["--state-dir", self.p["state_dir"]]
        return run_hwmgr(self.module, argv, ok_codes=ok, main=self.main)

    def baseline(self):
        return self.hwmgr("gate", ["baseline", self.p["rollout"]], (EXIT_OK,))[1]["data"]

    def change(self):
        """(txn or None, reboot needed, error or None) of the change."""
        if self.words[0] == "apply":
            args = self.words[1:] + ["--yes"]
            if self.p["persist_root"]:
                args += ["--persist-root", self.p["persist_root"]]
            ok = (EXIT_OK, EXIT_NOTHING_TO_DO, EXIT_REBOOT_PENDING)
        else:
            args = self.words[1:] + ["--yes"]
            ok = (EXIT_OK, EXIT_NOTHING_TO_DO)
        rc, env = self.try_hwmgr(self.words[0], args, ok)
        if rc not in ok:
            return None, False, env
        txn = (env.get("data") or {}).get("transaction") or {}
        reboot = rc == EXIT_REBOOT_PENDING or (self.words[0] == "upgrade" and rc == EXIT_OK)
        return (txn.get("id") if isinstance(txn, dict) else None), reboot, None

    def try_hwmgr(self, verb, args, ok):
        """Like hwmgr(), but a failure comes back as (rc, {"error": msg}), not a failed module."""
        saved = self.module.fail_json
        caught = {}

        def fail_json(**kw):
            caught.update(kw)
            raise _Failed()

        self.module.fail_json = fail_json
        try:
            return self.hwmgr(verb, args, ok)
        except _Failed:
            return caught.get("rc"), {"error": one_line(caught.get("msg", "failed"))}
        finally:
            self.module.fail_json = saved

    def gate(self):
        args = ["check", self.p["rollout"], "--duration", str(self.p["duration"])]
        for opt in ("peer", "floor", "interface"):
            if self.p[opt] is not None:
                args += ["--" + opt, str(self.p[opt])]
        rc, env = self.try_hwmgr("gate", args, (EXIT_OK, EXIT_FAILED))
        if "error" in env:
            return {"passed": False, "failed_steps": ["gate"], "steps": [
                {"step": "gate", "passed": False, "detail": env["error"]}]}
        return env["data"]

    def rollback(self, txn):
        """{action, txn, reboot_required, error} of the exact rollback."""
        if self.words[0] == "apply":
            args = ["--yes"] + (["--txn", str(txn)] if txn is not None else [])
            rc, env = self.try_hwmgr("revert", args, (EXIT_OK, EXIT_NOTHING_TO_DO))
            action, reboot = "revert", False
        else:
            rc, env = self.try_hwmgr("rollback", [self.words[1], "--yes"],
                                     (EXIT_OK, EXIT_NOTHING_TO_DO))
            action, reboot = "rollback", rc == EXIT_OK
        data = env.get("data") or {}
        tx = data.get("transaction") if isinstance(data, dict) else None
        return {"action": action, "rc": rc, "error": env.get("error"),
                "txn": tx.get("id") if isinstance(tx, dict) else None,
                "of": data.get("of") if isinstance(data, dict) else None,
                "reboot_required": reboot}


class _Failed(Exception):
    pass


def main():
    """Baseline, change, gate; a failed gate rolls back and gates again."""
    module = AnsibleModule(
        argument_spec=dict(
            rollout=dict(type="str", required=True),
            change=dict(type="str", required=True),
            action=dict(type="str", choices=["run", "gate", "regate"], default="run"),
            rollback=dict(type="bool", default=True),
            peer=dict(type="str"),
            floor=dict(type="float"),
            duration=dict(type="float", default=2.0),
            interface=dict(type="str"),
            persist_root=dict(type="path"),
            state_dir=dict(type="path"),
            **COMMON_ARGUMENT_SPEC
        ),
        supports_check_mode=False,
    )
    step = Step(module)
    p = module.params
    result = dict(changed=False, passed=False, gate=None, rollback=None, txn=None,
                  reboot_required=False, via="import" if step.main else "command")
    if p["action"] == "regate":
        result["rollback"] = {"gate": step.gate()}
        module.exit_json(**result)
    if p["action"] == "run":
        result["baseline"] = step.baseline()
        txn, reboot, err = step.change()
        result.update(txn=txn, changed=txn is not None)
        if err is not None:  # the change failed and hwmgr undid it: nothing to roll back
            result["gate"] = {"passed": False, "failed_steps": ["change"], "steps": [
                {"step": "change", "passed": False, "detail": err["error"]}]}
            module.exit_json(**result)
        if reboot:
            result["reboot_required"] = True
            module.exit_json(**result)
    gate = step.gate()
    result.update(gate=gate, passed=bool(gate.get("passed")))
    if not result["passed"] and p["rollback"]:
        rb = step.rollback(result["txn"])
        result["changed"] = True
        if rb["error"] is None and not rb["reboot_required"]:
            rb["gate"] = step.gate()
        result["rollback"] = rb
        result["reboot_required"] = rb["reboot_required"]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
