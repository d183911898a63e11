"""The catalog: loading, validation, matching devices to entries, verdicts, version schemes.

Owns what is known-good for each device (catalogs/ and site files, data) and how versions
compare (`rpmver`, `versions`, vendor rules in `schemes.json`), plus PCI names and the
known-bad kernel log signatures with their sources (`kernellog`, data in `kernellog.json`).
May import `hwmgr.host`, `hwmgr.config`, `hwmgr.errors`; never inventory, lifecycle or
anything above.
"""
