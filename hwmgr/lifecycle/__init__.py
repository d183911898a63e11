"""Driver lifecycle: plan an upgrade or rollback, then run it as journaled steps.

Owns fetch and the download cache, SRPM unpacking, package signatures, DKMS, module files
(kmod), driver recipes, DKMS RPM packaging and the expectation file verify reads. May import
`hwmgr.transaction`, `hwmgr.inventory`, `hwmgr.catalog`, `hwmgr.config`, `hwmgr.host`.
"""

# each kernel's module tree: DKMS installs there, the kernel gate lists the kernels there
INSTALL_TREE = "/lib/modules"
