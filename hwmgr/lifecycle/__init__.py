"""Driver lifecycle: plan an upgrade or rollback, then run it as journaled steps.

Four rooms, imports pointing down (tests/test_layers.py `ROOMS`): `source/` (fetch, mirrors,
cache, signatures, vendor keys), `builds/` (recipes, SRPMs and tarballs, DKMS, module files,
initramfs, the DKMS RPM), the plan room here (`plan`, `steps`, the upgrade `record`, the
expectation file verify reads, a snapshot's `bundle`, `trust`), and `gate/` (the kernel gate).
May import `hwmgr.transaction`, `hwmgr.inventory`, `hwmgr.catalog`, `hwmgr.config`, `hwmgr.host`.
"""

# each kernel's module tree: DKMS installs there, the kernel gate lists the kernels there
INSTALL_TREE = "/lib/modules"
