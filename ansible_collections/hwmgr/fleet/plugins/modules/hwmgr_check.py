#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v2.0+ (see https://www.gnu.org/licenses/old-licenses/gpl-2.0.txt)
"""Ansible module: run `hwmgr check --json` and return its verdict as results and facts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hwmgr_check
short_description: Check drivers, firmware, NIC settings and sysctls against the hwmgr catalog
description:
  - Runs C(hwmgr check --json) on the managed host, or on a snapshot given by O(root), and
    returns the check's data once (RV(data)); also sets a small C(ansible_facts.hwmgr)
    (status and counts, not the findings again).
  - Where hwmgr is installed for the module's own Python (the hwmgr RPM or deb), the check
    runs inside the module's process (O(via)), sparing a second interpreter's start-up and
    imports on every host; the verdict is the same as the command's.
  - Read-only, so never C(changed) and the same in check mode.
  - Drift (hwmgr exit 5), reboot pending (7) and unknown (11) are results, not failures.
    The module fails only when hwmgr itself fails (usage, bad input, not found, internal
    error, ...), with a one-line O(msg) and hwmgr's exit code as RV(rc).
version_added: "0.1.0"
author: hwmgr authors
options:
  root:
    description:
      - Check this snapshot (directory or C(.tar.gz)) instead of the live host
        (C(hwmgr check --root)). Run such a task on the machine that holds the snapshot,
        for example with C(delegate_to=localhost).
    type: path
  catalogs:
    description:
      - Catalog files on the host running the module, layered over the shipped catalog in
        this order (repeated C(--site-catalog), so layers and never a replacement).
    type: list
    elements: path
    default: []
  catalog_content:
    description:
      - Catalog layers given inline as a mapping of file name to JSON text (for example
        read on the control node with the C(file) lookup); written to the module's private
        temporary directory and passed after O(catalogs), in order.
    type: dict
    default: {}
  executable:
    description:
      - The hwmgr command, a name searched in C(PATH) (plus C(/usr/local/sbin),
        C(/usr/local/bin), C(/usr/sbin)) or an absolute path.
    type: str
    default: hwmgr
  via:
    description:
      - How the check runs. V(import) runs hwmgr inside the module's own Python (hwmgr must
        be importable there, else the module fails); V(command) runs O(executable).
      - V(auto) imports hwmgr when O(executable) is left at V(hwmgr) and the module's
        Python can import it (an older Python, or hwmgr installed for another Python,
        cannot), and runs the command otherwise.
    type: str
    choices: [auto, import, command]
    default: auto
    version_added: "0.2.0"
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
notes:
  - The result's RV(status) uses the host statuses of C(hwmgr fleet-report) input files.
"""

EXAMPLES = r"""
- name: Check this host against the shipped catalog and a site layer
  hwmgr.fleet.hwmgr_check:
    catalogs: [/etc/hwmgr/site/routers.json]
  register: check

- name: Check a snapshot on the control node
  hwmgr.fleet.hwmgr_check:
    root: /srv/snapshots/old-router.tar.gz
  delegate_to: localhost
"""

RETURN = r"""
rc:
  description: hwmgr's exit code (0 compliant, 5 drift, 7 reboot pending, 11 unknown).
    Uncatalogued items (driver versions the catalog has no verdict on) alone give 0.
  returned: always
  type: int
status:
  description: compliant, drift, reboot-pending or unknown.
  returned: success
  type: str
compliant:
  description: True when nothing drifted and nothing was unknown (uncatalogued items allowed).
  returned: success
  type: bool
summary:
  description: Counts of findings by status (ok, drift, unknown, uncatalogued, unsupported).
  returned: success
  type: dict
data:
  description: The whole data object of C(hwmgr check --json); its C(findings) has one entry
    per checked item (layer, device, interface, item, expected, actual, status, reason, fix,
    source, a catalog reference and URL). The findings are returned only here, once (a
    fleet keeps every host's result in memory on the control node).
  returned: success
  type: dict
via:
  description: How the check ran here, V(import) or V(command) (see O(via)).
  returned: success
  type: str
  version_added: "0.2.0"
errors:
  description: Non-fatal errors hwmgr reported in its envelope (for example an unreadable file).
  returned: success
  type: list
  elements: str
ansible_facts:
  description: C(hwmgr) holds C(rc), C(status), C(compliant), C(summary) and
    C(catalog_version) (the findings are in RV(data)).
  returned: success
  type: dict
"""

import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hwmgr.fleet.plugins.module_utils.hwmgr import (
    CHECK_STATUS,
    COMMON_ARGUMENT_SPEC,
    base_argv,
    importable_hwmgr,
    run_hwmgr,
)


def choose_main(module):
    """hwmgr's entry point to run in this process, or None to run the command (see `via`)."""
    p = module.params
    if p["via"] == "command" or (p["via"] == "auto" and p["executable"] != "hwmgr"):
        return None
    hwmgr_main = importable_hwmgr()
    if hwmgr_main is None and p["via"] == "import":
        module.fail_json(msg="hwmgr cannot be imported by this host's Python (%s %s); install "
                             "it for that Python or use via=command"
                             % (sys.executable, ".".join(map(str, sys.version_info[:3]))),
                         rc=None)
    return hwmgr_main


def main():
    """Build the argv, run hwmgr check, return its data; never changed."""
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path"),
            via=dict(type="str", choices=["auto", "import", "command"], default="auto"),
            **COMMON_ARGUMENT_SPEC,
        ),
        supports_check_mode=True,
    )
    p = module.params
    hwmgr_main = choose_main(module)
    argv = base_argv(module, "check", executable="hwmgr" if hwmgr_main else None)
    if p["root"]:
        argv += ["--root", p["root"]]
    rc, envelope = run_hwmgr(module, argv, ok_codes=tuple(CHECK_STATUS), main=hwmgr_main)
    data = envelope["data"]
    status = CHECK_STATUS[rc]
    facts = dict(rc=rc, status=status, compliant=data.get("compliant"),
                 summary=data.get("summary"), catalog_version=data.get("catalog_version"))
    # failed=False: Ansible treats a result whose rc is not 0 as failed unless told otherwise
    module.exit_json(
        changed=False, failed=False, rc=rc, status=status, compliant=data.get("compliant"),
        summary=data.get("summary"), data=data, errors=envelope.get("errors") or [],
        via="import" if hwmgr_main else "command", ansible_facts={"hwmgr": facts})


if __name__ == "__main__":
    main()
