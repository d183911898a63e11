"""Inventory: the PCI/NIC/RAID scan of a host, vendor RAID tools as adapter classes, and
`guard` (which interfaces carry the default route or the SSH session).

Reads through `hwmgr.host` only; may import `hwmgr.catalog` for names and verdicts.
"""
