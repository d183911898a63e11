"""The inventory's typed records: a PCI function (`Device`) and a network interface
(`Interface`), built once by the scan and frozen.

JSON only at the edges: `to_json()` gives the envelope's and the snapshot's form, key for key
and in order as `docs/formats.md` documents it. Each record also reads as a read-only mapping
of those JSON keys (`dev["driver"]`, `dev.get("class")`), so code that still reads the JSON
shape (the catalog's matching, which also takes plain dicts, and the plan and check floors)
keeps working while it moves to the attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Iterator, Mapping

from hwmgr.catalog.verdict import Verdict


class _JsonView(Mapping[str, Any]):
    """A record read by its JSON keys (the shape before the typed model): values as
    `to_json()` gives them. `Any`: those readers narrow themselves, as they did the dict."""

    _RENAMED: ClassVar[dict[str, str]] = {}  # JSON key -> attribute, where they differ

    def to_json(self) -> dict[str, object]:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        attr = self._RENAMED.get(key, key)
        if attr.startswith("_") or attr not in _field_names(type(self)):
            raise KeyError(key)
        value = getattr(self, attr)
        if value is None and attr in _OMITTED_WHEN_NONE:
            raise KeyError(key)
        if isinstance(value, tuple):
            return list(value)
        if isinstance(value, (PcieLink, Sriov)):
            return value.to_json()
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())


@dataclass(frozen=True)
class PcieLink:
    """The function's PCIe link: current and maximum speed (as sysfs words it) and width."""

    speed: str | None
    width: int | None
    max_speed: str | None
    max_width: int | None

    def to_json(self) -> dict[str, str | int | None]:
        return {"speed": self.speed, "width": self.width, "max_speed": self.max_speed,
                "max_width": self.max_width}


@dataclass(frozen=True)
class Sriov:
    """SR-IOV: the VFs the function may have, has enabled, and their addresses in order."""

    totalvfs: int
    numvfs: int | None
    vfs: tuple[str, ...]

    def to_json(self) -> dict[str, int | list[str] | None]:
        return {"totalvfs": self.totalvfs, "numvfs": self.numvfs, "vfs": list(self.vfs)}


@dataclass(frozen=True, eq=False)
class Interface(_JsonView):
    """A network interface of a PCI function: sysfs attributes and `ethtool -i`."""

    name: str
    address: str  # the PCI function's
    mac: str | None
    mtu: int | None
    speed_mbps: int | None
    duplex: str | None
    operstate: str | None
    carrier: int | None
    tx_queue_len: int | None
    driver: str | None
    driver_version: str | None
    firmware_version: str | None
    bus_info: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name, "address": self.address, "mac": self.mac, "mtu": self.mtu,
            "speed_mbps": self.speed_mbps, "duplex": self.duplex, "operstate": self.operstate,
            "carrier": self.carrier, "tx_queue_len": self.tx_queue_len, "driver": self.driver,
            "driver_version": self.driver_version, "firmware_version": self.firmware_version,
            "bus_info": self.bus_info,
        }


@dataclass(frozen=True, eq=False)
class Device(_JsonView):
    """One PCI function: IDs and names, the driver and its versions, firmware, interfaces,
    placement (NUMA, PCIe link, SR-IOV) and the catalog's verdict. `None` is unknown."""

    address: str
    domain: str
    vendor_id: str | None
    device_id: str | None
    subsystem_vendor_id: str | None
    subsystem_device_id: str | None
    pci_class: str | None  # "class" in JSON: 4 hex digits, base class and subclass
    prog_if: str | None
    revision: str | None
    vendor_name: str | None
    device_name: str | None
    subsystem_name: str | None
    class_name: str | None
    driver: str | None  # the NIC driver ethtool reports, else the bound PCI driver
    pci_driver: str | None
    driver_version: str | None
    driver_version_source: str | None  # "ethtool" or "sysfs"
    driver_srcversion: str | None
    firmware_version: str | None
    firmware_source: str | None  # "ethtool", "sysfs:<attr>" or the RAID tool's name
    interfaces: tuple[str, ...]
    modalias: str | None
    numa_node: int | None
    pcie_link: PcieLink | None
    sriov: Sriov | None
    physfn: str | None
    catalog: Verdict | None = None
    scsi_hosts: tuple[str, ...] | None = None  # RAID controllers only

    _RENAMED: ClassVar[dict[str, str]] = {"class": "pci_class"}

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "address": self.address,
            "domain": self.domain,
            "vendor_id": self.vendor_id,
            "device_id": self.device_id,
            "subsystem_vendor_id": self.subsystem_vendor_id,
            "subsystem_device_id": self.subsystem_device_id,
            "class": self.pci_class,
            "prog_if": self.prog_if,
            "revision": self.revision,
            "vendor_name": self.vendor_name,
            "device_name": self.device_name,
            "subsystem_name": self.subsystem_name,
            "class_name": self.class_name,
            "driver": self.driver,
            "pci_driver": self.pci_driver,
            "driver_version": self.driver_version,
            "driver_version_source": self.driver_version_source,
            "driver_srcversion": self.driver_srcversion,
            "firmware_version": self.firmware_version,
            "firmware_source": self.firmware_source,
            "interfaces": list(self.interfaces),
            "modalias": self.modalias,
            "numa_node": self.numa_node,
            "pcie_link": self.pcie_link.to_json() if self.pcie_link else None,
            "sriov": self.sriov.to_json() if self.sriov else None,
            "physfn": self.physfn,
            "catalog": self.catalog,
        }
        if self.scsi_hosts is not None:
            out["scsi_hosts"] = list(self.scsi_hosts)
        return out


_OMITTED_WHEN_NONE = frozenset({"scsi_hosts"})
_FIELDS: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> frozenset[str]:
    """The dataclass fields of `cls`, looked up once per class."""
    got = _FIELDS.get(cls)
    if got is None:
        got = _FIELDS[cls] = frozenset(f.name for f in fields(cls))
    return got
