"""hwmgr's QEMU lab: a cached Debian 12 guest on emulated seed-000 hardware (e1000e 82574L,
MegaRAID SAS 2108) that runs the real hwmgr CLI across real (relaunched) boots.

`lab.image` builds and caches the guest, `lab.srpms` makes the e1000e "vendor" SRPMs,
`lab.vm` runs boots and reads back what the guest recorded. See lab/README.md.
"""

from __future__ import annotations
