"""A PCI function's `uevent` file: its IDs, class, bound driver and modalias in one read.

The kernel writes it (dev_uevent + pci_uevent) as KEY=VALUE lines, e.g.

    DRIVER=ixgbe                 (only while a driver is bound)
    PCI_CLASS=20000              (%04X of the 24-bit class)
    PCI_ID=8086:1528             (%04X:%04X vendor:device)
    PCI_SUBSYS_ID=8086:0001
    PCI_SLOT_NAME=0000:03:00.0
    MODALIAS=pci:v00008086d00001528sv00008086sd00000001bc02sc00i00

One file instead of five attribute files and the `driver` link. A snapshot's copy is hostile
input: a uevent that is not what a kernel writes (over 4 KiB, a line that is not KEY=VALUE,
a repeated key, a bad ID, class, driver or modalias, another function's slot name, a
modalias that disagrees with the IDs) is ignored whole, and the attribute files answer.
A well-formed uevent wins over attribute files that disagree with it: the kernel writes
both from the same fields, so a disagreement means an edited snapshot, and the uevent is the
one coherent record of the function.
"""

from __future__ import annotations

import re

MAX_UEVENT = 4096  # one sysfs page: the kernel never writes more
_KEY = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_PAIR = re.compile(r"([0-9A-Fa-f]{4}):([0-9A-Fa-f]{4})")
_CLASS = re.compile(r"[0-9A-Fa-f]{4,6}")
DRIVER_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")  # a kernel driver name (fullmatch)
_MODALIAS = re.compile(
    r"pci:v[0-9A-F]{8}d[0-9A-F]{8}sv[0-9A-F]{8}sd[0-9A-F]{8}bc[0-9A-F]{2}sc[0-9A-F]{2}i[0-9A-F]{2}"
)
_REQUIRED = ("PCI_ID", "PCI_SUBSYS_ID", "PCI_CLASS")
# the attribute files a well-formed uevent stands in for (`driver` is the link)
REPLACES = ("vendor", "device", "subsystem_vendor", "subsystem_device", "class", "modalias")


def pci_modalias(v: str, d: str, sv: str, sd: str, cls: str) -> str:
    """The kernel's PCI modalias for lower-case hex IDs and a 6-digit class."""
    u = str.upper
    return (
        f"pci:v0000{u(v)}d0000{u(d)}sv0000{u(sv)}sd0000{u(sd)}"
        f"bc{u(cls[0:2])}sc{u(cls[2:4])}i{u(cls[4:6])}"
    )


def parse_pci_uevent(text: str, addr: str) -> tuple[dict[str, str | None] | None, str | None]:
    """({vendor, device, subsystem_vendor, subsystem_device, class, driver[, modalias]}, None)
    for a well-formed uevent of function `addr`, else (None, why it was ignored).

    `driver` is None when no driver is bound (the kernel then writes no DRIVER line);
    `modalias` is absent when the file has no MODALIAS line. `text` is read_attr's answer
    (stripped, NULs dropped); IDs come back lower-case, the class as six hex digits.
    """
    if len(text) > MAX_UEVENT:
        return None, f"over {MAX_UEVENT} bytes"
    kv: dict[str, str] = {}
    for n, line in enumerate(text.split("\n"), 1):
        key, sep, value = line.partition("=")
        if not sep or not _KEY.fullmatch(key):
            return None, f"line {n} is not KEY=VALUE"
        if key in kv:
            return None, f"{key} repeated"
        kv[key] = value
    missing = [k for k in _REQUIRED if k not in kv]
    if missing:
        return None, f"no {missing[0]}"
    ids = _PAIR.fullmatch(kv["PCI_ID"])
    sub = _PAIR.fullmatch(kv["PCI_SUBSYS_ID"])
    if not ids or not sub:
        return None, f"{'PCI_ID' if not ids else 'PCI_SUBSYS_ID'} is not XXXX:XXXX"
    if not _CLASS.fullmatch(kv["PCI_CLASS"]):
        return None, "PCI_CLASS is not 4 to 6 hex digits"
    slot = kv.get("PCI_SLOT_NAME")
    if slot is not None and slot.lower() != addr.lower():
        return None, "PCI_SLOT_NAME names another function"
    driver = kv.get("DRIVER")
    if driver is not None and not DRIVER_NAME.fullmatch(driver):
        return None, "DRIVER is not a driver name"
    v, d = ids.group(1).lower(), ids.group(2).lower()
    sv, sd = sub.group(1).lower(), sub.group(2).lower()
    cls = kv["PCI_CLASS"].lower().zfill(6)
    out: dict[str, str | None] = {
        "vendor": v, "device": d, "subsystem_vendor": sv, "subsystem_device": sd,
        "class": cls, "driver": driver,
    }
    modalias = kv.get("MODALIAS")
    if modalias is not None:
        if not _MODALIAS.fullmatch(modalias) or modalias != pci_modalias(v, d, sv, sd, cls):
            return None, "MODALIAS disagrees with the IDs"
        out["modalias"] = modalias
    return out, None
