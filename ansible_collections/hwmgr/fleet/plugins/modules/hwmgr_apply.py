#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v2.0+ (see https://www.gnu.org/licenses/old-licenses/gpl-2.0.txt)
"""Ansible module: bring NIC settings and sysctls to the catalog's values with `hwmgr apply`."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hwmgr_apply
short_description: Apply the hwmgr catalog's NIC settings and sysctls to a host
description:
  - Runs C(hwmgr apply --json --yes) on the managed host; hwmgr changes only what drifted
    from the catalog and records the old values so it can be undone.
  - Idempotent; when hwmgr has nothing to do (exit 4) the result is C(changed=false).
  - In check mode it runs C(hwmgr apply --dry-run --json) and reports what would change,
    with a before/after C(diff) for C(--diff).
  - Fails with a one-line O(msg) and hwmgr's exit code as RV(rc) when hwmgr fails
    (refused, locked, bad catalog, permission denied, ...).
version_added: "0.1.0"
author: hwmgr authors
options:
  layers:
    description: >-
      Only these layers (passed as one C(--layer) list), for example C(settings),
      C(sysctl).
    type: list
    elements: str
    default: []
  interfaces:
    description: Only these interfaces (repeated C(--interface)).
    type: list
    elements: str
    default: []
  catalogs:
    description: Catalog files on the managed host layered over the shipped catalog
      (repeated C(--site-catalog), so layers and never a replacement).
    type: list
    elements: path
    default: []
  catalog_content:
    description: Catalog layers given inline (file name to JSON text), passed after O(catalogs).
    type: dict
    default: {}
  persist_root:
    description: Write the persistence files (systemd .link, sysctl.d, NetworkManager) under
      this directory instead of C(/) (C(--persist-root)), for image builds and tests.
    type: path
  state:
    description:
      - C(applied) runs C(hwmgr apply); C(reverted) undoes an apply with C(hwmgr revert)
        (O(txn), default the newest not yet reverted); C(confirmed) keeps a forced apply,
        cancelling its timed revert (C(hwmgr apply --confirm TXN), O(txn) required).
      - C(reverted) and C(confirmed) have no dry run; in check mode they are not run and
        the result says so.
    type: str
    choices: [applied, reverted, confirmed]
    default: applied
  txn:
    description: The apply transaction to revert or confirm (RV(txn) of the apply).
    type: int
  force:
    description: Also change interfaces that carry the default route or the SSH session
      (C(--force)); those changes are made last and reverted unless confirmed within
      O(confirm_timeout) seconds (a later task with O(state=confirmed)).
    type: bool
    default: false
  confirm_timeout:
    description: With O(force), seconds before the timed revert (C(--confirm-timeout);
      hwmgr's default 120).
    type: int
  override:
    description: Write the values although another owner (sysctl.d, tuned, .link,
      NetworkManager) sets them differently (C(--override)).
    type: bool
    default: false
  state_dir:
    description: hwmgr's state dir (journal, lock; C(--state-dir)).
    type: path
  executable:
    description: The hwmgr command (a name searched in C(PATH), or an absolute path).
    type: str
    default: hwmgr
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Apply the catalog's NIC settings on the routers' uplinks
  hwmgr.fleet.hwmgr_apply:
    layers: [settings]
    interfaces: [enp1s0f0, enp1s0f1]
  register: applied

- name: What would change (ansible-playbook --check --diff)
  hwmgr.fleet.hwmgr_apply:
  check_mode: true

- name: Also the uplink, reverted by the host itself unless confirmed within 90 s
  hwmgr.fleet.hwmgr_apply:
    interfaces: [eno1]
    force: true
    confirm_timeout: 90
  register: uplink

- name: Still reachable after the change, so keep it
  hwmgr.fleet.hwmgr_apply:
    state: confirmed
    txn: "{{ uplink.txn }}"
  when: uplink.confirm_pending

- name: Undo the last apply
  hwmgr.fleet.hwmgr_apply:
    state: reverted
"""

RETURN = r"""
rc:
  description: hwmgr's exit code (0 applied, 4 nothing to do, 7 applied but a reboot is pending).
  returned: always
  type: int
changes:
  description: The changes made (or, in check mode, planned), each with item, interface,
    current and wanted.
  returned: success
  type: list
  elements: dict
reboot_pending:
  description: True when hwmgr exited 7 (an applied change is live only after a reboot).
  returned: success
  type: bool
txn:
  description: The transaction id of the apply or revert made (null in check mode).
  returned: success
  type: int
confirm_pending:
  description: True when a forced apply will be reverted unless confirmed (O(state=confirmed))
    within RV(confirm_timeout) seconds.
  returned: success
  type: bool
confirm_timeout:
  description: The seconds the host waits for the confirmation (null when none is pending).
  returned: success
  type: int
data:
  description: The whole data object of hwmgr's JSON output.
  returned: success
  type: dict
diff:
  description: before/after text, one line per item (interface, item, value).
  returned: changed and diff mode or check mode
  type: dict
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hwmgr.fleet.plugins.module_utils.hwmgr import (
    COMMON_ARGUMENT_SPEC,
    EXIT_NOTHING_TO_DO,
    EXIT_OK,
    EXIT_REBOOT_PENDING,
    base_argv,
    run_hwmgr,
)


def _value(v):
    """A setting's value as diff text (strings bare, everything else as JSON)."""
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def make_diff(changes):
    """Ansible's before/after diff: one line per changed item, sorted, same order both sides."""
    before, after = [], []
    for c in sorted(changes, key=lambda c: (str(c.get("interface") or ""), str(c.get("item")))):
        where = " ".join(str(p) for p in (c.get("interface"), c.get("item")) if p)
        before.append("%s: %s\n" % (where, _value(c.get("current"))))
        after.append("%s: %s\n" % (where, _value(c.get("wanted"))))
    return {"before": "".join(before), "after": "".join(after),
            "before_header": "hwmgr: current", "after_header": "hwmgr: catalog"}


def _txn_id(data):
    """The id of the transaction hwmgr ran (data.transaction.id), or None."""
    txn = data.get("transaction")
    return txn.get("id") if isinstance(txn, dict) else None


def revert_or_confirm(module):
    """state=reverted: `hwmgr revert`; state=confirmed: `hwmgr apply --confirm TXN`. Exit 4
    (nothing to revert, no timed revert pending) is not changed."""
    p = module.params
    if module.check_mode:  # neither verb has a dry run: say so instead of guessing
        module.exit_json(changed=False, skipped=True, rc=None, txn=None,
                         msg="check mode: hwmgr %s has no dry run; nothing was run" % (
                             "revert" if p["state"] == "reverted" else "apply --confirm"))
    if p["state"] == "reverted":
        argv = base_argv(module, "revert") + ["--yes"]
        if p["txn"] is not None:
            argv += ["--txn", str(p["txn"])]
    else:
        argv = base_argv(module, "apply") + ["--confirm", str(p["txn"])]
    if p["state_dir"]:
        argv += ["--state-dir", p["state_dir"]]
    rc, envelope = run_hwmgr(module, argv, ok_codes=(EXIT_OK, EXIT_NOTHING_TO_DO))
    data = envelope["data"]
    done = rc == EXIT_OK
    module.exit_json(changed=done, failed=False, rc=rc, data=data,
                     txn=_txn_id(data) if p["state"] == "reverted" else p["txn"],
                     reverted_txn=data.get("of"), confirm_pending=False, confirm_timeout=None,
                     msg="" if done else "; ".join(str(e) for e in envelope.get("errors", [])))


def main():
    """Dry run in check mode, else apply; exit 4 (nothing to do) means not changed."""
    module = AnsibleModule(
        argument_spec=dict(
            layers=dict(type="list", elements="str", default=[]),
            interfaces=dict(type="list", elements="str", default=[]),
            persist_root=dict(type="path"),
            state=dict(type="str", choices=["applied", "reverted", "confirmed"],
                       default="applied"),
            txn=dict(type="int"),
            force=dict(type="bool", default=False),
            confirm_timeout=dict(type="int"),
            override=dict(type="bool", default=False),
            state_dir=dict(type="path"),
            **COMMON_ARGUMENT_SPEC,
        ),
        required_if=[("state", "confirmed", ("txn",))],
        required_by={"confirm_timeout": ("force",)},
        supports_check_mode=True,
    )
    p = module.params
    if p["confirm_timeout"] is not None and not p["force"]:
        module.fail_json(msg="confirm_timeout is only for force: true (a forced apply's timed "
                             "revert)", rc=None)
    if p["state"] != "applied":
        revert_or_confirm(module)
    argv = base_argv(module, "apply")
    argv += ["--dry-run"] if module.check_mode else ["--yes"]
    if p["force"]:
        argv += ["--force"]
        if p["confirm_timeout"] is not None:
            argv += ["--confirm-timeout", str(p["confirm_timeout"])]
    if p["override"]:
        argv += ["--override"]
    if p["state_dir"]:
        argv += ["--state-dir", p["state_dir"]]
    if p["layers"]:
        argv += ["--layer", ",".join(p["layers"])]
    for ifname in p["interfaces"]:
        argv += ["--interface", ifname]
    if p["persist_root"]:
        argv += ["--persist-root", p["persist_root"]]
    ok = (EXIT_OK, EXIT_NOTHING_TO_DO, EXIT_REBOOT_PENDING)
    rc, envelope = run_hwmgr(module, argv, ok_codes=ok)
    data = envelope["data"]
    changes = (data.get("changes") or []) if rc != EXIT_NOTHING_TO_DO else []
    if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
        module.fail_json(msg="hwmgr apply printed data.changes that is not a list of objects",
                         rc=rc)
    # failed=False: Ansible treats a result whose rc is not 0 as failed unless told otherwise
    pending = bool(changes) and not module.check_mode and any(
        c.get("risky") for c in changes) and data.get("confirm_timeout") is not None
    result = dict(changed=bool(changes) or rc == EXIT_REBOOT_PENDING, failed=False, rc=rc,
                  changes=changes, reboot_pending=rc == EXIT_REBOOT_PENDING, data=data,
                  txn=_txn_id(data), confirm_pending=pending,
                  confirm_timeout=data.get("confirm_timeout") if pending else None)
    if changes and (module._diff or module.check_mode):
        result["diff"] = make_diff(changes)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
