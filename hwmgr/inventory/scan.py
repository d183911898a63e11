"""Inventory: every PCI function, its driver and versions, NICs and RAID controllers.

Reads only through a `Host`, so the same code scans `/`, a snapshot and test trees. Every value
that cannot be read is `None` ("unknown"); nothing is invented.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Optional, cast

from hwmgr.catalog.kbuild import PROC_VERSION, VERSION_SIGNATURE
from hwmgr.catalog.load import load_catalog
from hwmgr.catalog.pciids import PciNames, default_names
from hwmgr.catalog.verdict import Verdict
from hwmgr.config import Config
from hwmgr.host import ifname
from hwmgr.host.seam import Host
from hwmgr.inventory.model import Device, Interface, PcieLink, Sriov
from hwmgr.inventory.raid import tool_firmware
from hwmgr.inventory.uevent import DRIVER_NAME, REPLACES, parse_pci_uevent, pci_modalias
from hwmgr.numtext import digits_key, parse_int, to_int

PCI_DEVICES = "/sys/bus/pci/devices"
_ADDR = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_HEX = re.compile(r"^(?:0x)?([0-9a-fA-F]+)$")
_MAC = re.compile(r"^[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5,19}$")
_FUNC_ENTRIES = re.compile(
    r"vendor|device|subsystem_vendor|subsystem_device|class|revision|modalias|driver"
    r"|numa_node|(current|max)_link_(speed|width)|net|virtio\d+|host\d+|virtfn\d+|physfn"
    r"|sriov_totalvfs|sriov_numvfs|uevent"
)
_VIRTIO = re.compile(r"virtio\d+")
_HOSTN = re.compile(r"host\d+")
_VIRTFN = re.compile(r"virtfn(\d+)")
# the one-value attributes of a function directory, read in one pass (Host.read_attrs);
# `uevent` stands in for the ID files (uevent.REPLACES) and the driver link when well-formed
_FUNC_ATTRS = ("uevent", "revision", "numa_node", "current_link_speed", "current_link_width",
               "max_link_speed", "max_link_width", "sriov_totalvfs", "sriov_numvfs")
_NET_ATTRS = ("address", "speed", "duplex", "mtu", "operstate", "carrier", "tx_queue_len")
# device fields that locate a function rather than describe it: a catalog verdict never
# depends on them, so functions alike in every other field share one (see Inventory._verdict)
_PLACE_FIELDS = frozenset({"address", "domain", "interfaces", "numa_node", "pcie_link", "sriov",
                           "physfn", "catalog", "scsi_hosts", "modalias"})
_VERDICT_FIELDS = tuple(f.name for f in fields(Device) if f.name not in _PLACE_FIELDS)
RAID_CLASSES = ("0104", "0107")
NET_CLASS_PREFIX = "02"
ETHTOOL_EMPTY = {"", "n/a", "N/A", "unknown"}
UNKNOWN_SPEEDS = {65535, 4294967295}  # SPEED_UNKNOWN as old kernels print it


def hex_id(raw: str | None, width: int) -> str | None:
    """'0x19a2' → '19a2'; anything that is not `width` hex digits → None."""
    if raw is None:
        return None
    m = _HEX.match(raw.strip())
    if not m or len(m.group(1)) > width:
        return None
    return m.group(1).lower().zfill(width)


def _int(raw: str | None) -> int | None:
    """A sysfs number (decimal or 0x hex, as the kernel prints them); None when unreadable."""
    return to_int(raw, 0)


def parse_ethtool_i(text: str) -> dict[str, str | None]:
    """Parse `ethtool -i` output into {driver, version, firmware-version, bus-info, ...}.
    Lines end at newlines only: a \r (or another break splitlines knows) inside a firmware
    string is part of it, shown escaped, never a line of its own that could set a key."""
    out: dict[str, str | None] = {}
    for line in text.split("\n"):
        key, sep, value = line.partition(":")
        if not sep or not key or key != key.strip() or " " in key:
            continue
        val = value.strip()
        out[key] = None if val in ETHTOOL_EMPTY else val
    return out


@dataclass
class Scan:
    """Inventory of one host: identity, PCI functions and NIC interfaces."""

    hostname: str | None
    kernel: str | None
    devices: list[Device] = field(default_factory=list)
    interfaces: list[Interface] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The envelope's and the snapshot's form (docs/formats.md)."""
        return {
            "host": {"hostname": self.hostname, "kernel": self.kernel},
            "devices": [d.to_json() for d in self.devices],
            "interfaces": [i.to_json() for i in self.interfaces],
            "notes": self.notes,
        }


def host_identity(host: Host) -> tuple[str | None, str | None]:
    """Hostname and kernel release: from snapshot.json, else the live /proc."""
    if host.meta:
        return host.meta.get("hostname"), host.meta.get("kernel")
    return (
        host.read_attr("/proc/sys/kernel/hostname"),
        host.read_attr("/proc/sys/kernel/osrelease"),
    )


def kernel_facts(host: Host) -> tuple[str | None, str | None]:
    """What places the running kernel build beyond its release: /proc/version (Debian names
    its package there) and /proc/version_signature (Ubuntu's upstream base); a snapshot
    records both as it reads them."""
    return host.read_attr(PROC_VERSION), host.read_attr(VERSION_SIGNATURE)


# the catalog's verdict on a device: (device, kernel, /proc/version, /proc/version_signature)
VerdictFn = Callable[[Device, Optional[str], Optional[str], Optional[str]], Optional[Verdict]]


class Inventory:
    """Scans a Host. `names` gives PCI names; `verdict` maps a device to a catalog verdict."""

    def __init__(
        self,
        host: Host,
        names: PciNames | None = None,
        verdict: VerdictFn | None = None,
        known_names: dict[tuple[str | None, ...], tuple[str | None, ...]] | None = None,
    ) -> None:
        self.host = host
        self.names = names
        self.verdict = verdict
        self._ethtool: dict[str, dict[str, str | None] | None] = {}
        self._modver: dict[str, tuple[str | None, str | None]] = {}
        # names per ID tuple; `known_names` (remembered from earlier runs) spares the lookups
        self.pci_names: dict[tuple[str | None, ...], tuple[str | None, ...]] = dict(
            known_names or {})
        self._verdicts: dict[tuple[object, ...], Verdict | None] = {}
        self._notes: list[str] = []
        # a recording host (snapshot capture) also reads what a uevent stands in for, so the
        # snapshot answers hwmgr releases that predate uevent
        self._read_all = host.recorder is not None

    # ------------------------------------------------------------------ top level
    def scan(self) -> Scan:
        hostname, kernel = host_identity(self.host)
        scan = Scan(hostname=hostname, kernel=kernel)
        self._notes = scan.notes
        entries = self.host.listdir(PCI_DEVICES)
        if not entries and not self.host.is_dir(PCI_DEVICES):
            scan.notes.append(f"{PCI_DEVICES} is not readable: no PCI functions listed")
        for addr in entries:
            if not _ADDR.match(addr):
                scan.notes.append(f"ignored '{addr}' in {PCI_DEVICES}: not a PCI address")
                continue
            dev, ifaces = self._function(addr, kernel)
            if dev is None:
                scan.notes.append(f"{PCI_DEVICES}/{addr}: unreadable (dangling or looping link)")
                continue
            scan.devices.append(dev)
            scan.interfaces.extend(ifaces)
        if any(d.pci_class in RAID_CLASSES for d in scan.devices):
            scan.devices = self._raid_firmware(scan.devices)
        if self.verdict is not None:
            facts = kernel_facts(self.host)
            scan.devices = [replace(dev, catalog=self._verdict(dev, kernel, facts))
                            for dev in scan.devices]
        scan.devices.sort(key=lambda d: _addr_key(d.address))
        return scan

    # ------------------------------------------------------------------ one function
    def _function(
        self, addr: str, kernel: str | None
    ) -> tuple[Device | None, list[Interface]]:
        h = self.host
        base = f"{PCI_DEVICES}/{addr}"
        addr = addr.lower()
        # the pattern narrows only what a snapshot records (the names looked at); every use
        # below matches its own names, so a plain scan skips ~35 fullmatch calls per function
        entries = h.listdir(base, _FUNC_ENTRIES if self._read_all else None)
        if not entries and not h.is_dir(base):
            return None, []
        present = set(entries)
        # reading only what the listing shows saves a failed open per absent attribute
        values = h.read_attrs(base, [n for n in _FUNC_ATTRS if n in present])
        ue = self._uevent(base, addr, values.get("uevent"))
        if ue is None or self._read_all:
            values.update(h.read_attrs(base, [n for n in REPLACES if n in present]))
        attr = values.get

        if ue is not None:
            vendor, device = ue["vendor"], ue["device"]
            svendor, sdevice = ue["subsystem_vendor"], ue["subsystem_device"]
            cls_full = ue["class"]
            modalias = ue.get("modalias")  # the kernel always writes it; else derived
        else:
            vendor = hex_id(attr("vendor"), 4)
            device = hex_id(attr("device"), 4)
            svendor = hex_id(attr("subsystem_vendor"), 4)
            sdevice = hex_id(attr("subsystem_device"), 4)
            cls_full = hex_id(attr("class"), 6)
            modalias = attr("modalias")
        revision = hex_id(attr("revision"), 2)
        cls = cls_full[:4] if cls_full else None
        link = "driver" in present and (ue is None or self._read_all)
        pci_driver = _driver_link(h.readlink(f"{base}/driver")) if link else None
        if ue is not None:
            pci_driver = ue["driver"]
        ifnames = self._netdevs(base, entries)
        ifaces = [self._interface(name, addr) for name in ifnames]
        # The driver a user knows this function by: the NIC driver ethtool reports when there is
        # one (virtio_net on a virtio-pci function), else the bound PCI driver.
        net_driver = next((i.driver for i in ifaces if i.driver), None)
        driver = net_driver or pci_driver
        drv_version, version_source, srcversion = self._driver_version(driver, ifaces)
        firmware = next((i.firmware_version for i in ifaces if i.firmware_version), None)
        vendor_name, device_name, subsystem_name, class_name = self._pci_names(
            vendor, device, svendor, sdevice, cls)
        dev = Device(
            address=addr,
            domain=addr.split(":")[0],
            vendor_id=vendor,
            device_id=device,
            subsystem_vendor_id=svendor,
            subsystem_device_id=sdevice,
            pci_class=cls,
            prog_if=cls_full[4:] if cls_full else None,
            revision=revision,
            vendor_name=vendor_name,
            device_name=device_name,
            subsystem_name=subsystem_name,
            class_name=class_name,
            driver=driver,
            pci_driver=pci_driver,
            driver_version=drv_version,
            driver_version_source=version_source,
            driver_srcversion=srcversion,
            firmware_version=firmware,
            firmware_source="ethtool" if firmware else None,
            interfaces=tuple(ifnames),
            modalias=modalias or _modalias(vendor, device, svendor, sdevice, cls_full),
            numa_node=_numa(attr("numa_node")),
            pcie_link=self._pcie_link(attr),
            sriov=self._sriov(base, entries, attr),
            physfn=_link_name(h.readlink(f"{base}/physfn")) if "physfn" in present else None,
            scsi_hosts=tuple(e for e in entries if _HOSTN.fullmatch(e))
            if cls in RAID_CLASSES else None,
        )
        return dev, ifaces

    def _uevent(self, base: str, addr: str, text: str | None) -> dict[str, str | None] | None:
        """The function's parsed uevent; None (noted when it was there but not a kernel's)
        sends the scan to the attribute files."""
        if text is None:
            return None
        got, why = parse_pci_uevent(text, addr)
        if got is None:
            self._notes.append(f"{base}/uevent: ignored ({why}); read the attribute files")
        return got

    def _pci_names(self, *ids: str | None) -> tuple[str | None, ...]:
        """(vendor, device, subsystem, class) names, looked up once per ID tuple."""
        hit = self.pci_names.get(ids)
        if hit is None:
            vendor, device, svendor, sdevice, cls = ids
            names = self.names
            hit = self.pci_names[ids] = (
                names.vendor(vendor) if names and vendor else None,
                names.device(vendor, device) if names and vendor and device else None,
                names.subsystem(vendor, device, svendor, sdevice)
                if names and vendor and device and svendor and sdevice else None,
                names.class_name(cls) if names and cls else None,
            )
        return hit

    def _verdict(self, dev: Device, kernel: str | None,
                 facts: tuple[str | None, str | None]) -> Verdict | None:
        """The catalog verdict, computed once per device that differs only in place fields
        (4,096 VFs of two kinds are two verdicts); each device gets its own copy. `facts`:
        the host's /proc/version and /proc/version_signature (which kernel build it is)."""
        assert self.verdict is not None
        key = (kernel, *[getattr(dev, k) for k in _VERDICT_FIELDS])
        if key not in self._verdicts:
            self._verdicts[key] = self.verdict(dev, kernel, *facts)
        got = self._verdicts[key]
        if got is None:
            return None
        return cast(Verdict, {k: dict(v) if isinstance(v, dict) else v for k, v in got.items()})

    def _netdevs(self, base: str, entries: list[str]) -> list[str]:
        names: list[str] = []
        if "net" in entries:
            names += self.host.listdir(f"{base}/net")
        for e in entries:  # virtio: the netdev hangs off the virtioN child device
            if e.startswith("virtio") and _VIRTIO.fullmatch(e):  # the prefix spares a regex
                names += self.host.listdir(f"{base}/{e}/net")
        return [n for n in names if ifname.valid(n)]

    def _interface(self, name: str, addr: str) -> Interface:
        h = self.host
        base = f"/sys/class/net/{name}"
        info = self._ethtool_i(name)
        attrs = h.read_attrs(base, _NET_ATTRS)
        mac = attrs["address"]
        speed = _int(attrs["speed"])
        duplex = attrs["duplex"]
        return Interface(
            name=name,
            address=addr,
            mac=mac.lower() if mac and _MAC.match(mac) else None,
            mtu=_int(attrs["mtu"]),
            speed_mbps=speed if speed is not None and speed > 0 and speed not in
            UNKNOWN_SPEEDS else None,
            duplex=duplex if duplex in ("full", "half") else None,
            operstate=attrs["operstate"],
            carrier=_int(attrs["carrier"]),
            tx_queue_len=_int(attrs["tx_queue_len"]),
            driver=_driver_name(info.get("driver")) if info else None,
            driver_version=info.get("version") if info else None,
            firmware_version=info.get("firmware-version") if info else None,
            bus_info=info.get("bus-info") if info else None,
        )

    def _ethtool_i(self, name: str) -> dict[str, str | None] | None:
        """`ethtool -i` of one interface, parsed, once per scan; None when unknown."""
        if name not in self._ethtool:
            why = ifname.why_not_tool_safe(name)
            if why is not None:
                self._notes.append(f"interface {name!r}: not passed to ethtool ({why}); "
                                   "its driver info is unknown")
                self._ethtool[name] = None
            else:
                res = self.host.run(["ethtool", "-i", name], timeout=10)
                self._ethtool[name] = parse_ethtool_i(res.stdout) if res.ok else None
        return self._ethtool[name]

    def _driver_version(
        self, driver: str | None, ifaces: list[Interface]
    ) -> tuple[str | None, str | None, str | None]:
        if not driver:
            return None, None, None
        version, srcversion = self._module_info(driver)
        eth = next((i.driver_version for i in ifaces if i.driver_version), None)
        if eth:
            return eth, "ethtool", srcversion
        if version:
            return version, "sysfs", srcversion
        return None, None, srcversion

    def _module_info(self, driver: str) -> tuple[str | None, str | None]:
        if driver not in self._modver:
            module = driver.replace("-", "_")
            base = f"/sys/module/{module}"
            self._modver[driver] = (
                self.host.read_attr(f"{base}/version"),
                self.host.read_attr(f"{base}/srcversion"),
            )
        return self._modver[driver]

    def _pcie_link(self, attr: Callable[[str], str | None]) -> PcieLink | None:
        link = PcieLink(speed=attr("current_link_speed"), width=_int(attr("current_link_width")),
                        max_speed=attr("max_link_speed"), max_width=_int(attr("max_link_width")))
        return link if link != PcieLink(None, None, None, None) else None

    def _sriov(
        self, base: str, entries: list[str], attr: Callable[[str], str | None]
    ) -> Sriov | None:
        total = _int(attr("sriov_totalvfs"))
        if total is None:
            return None
        vfs = []
        for e in entries:
            m = _VIRTFN.fullmatch(e)
            if m:
                vf = _link_name(self.host.readlink(f"{base}/{e}"))
                if vf and _ADDR.match(vf):
                    vfs.append((digits_key(m.group(1)), vf.lower()))
        return Sriov(totalvfs=total, numvfs=_int(attr("sriov_numvfs")),
                     vfs=tuple(a for _, a in sorted(vfs)))

    # ------------------------------------------------------------------ RAID firmware
    def _raid_firmware(self, devices: list[Device]) -> list[Device]:
        """`devices` with the RAID controllers' firmware: from sysfs when the controller
        exposes it, else storcli / MegaCli."""
        found: dict[str, tuple[str, str]] = {}  # address -> (firmware, where it was read)
        raid = [d for d in devices if d.pci_class in RAID_CLASSES]
        for dev in raid:
            for host_n in dev.scsi_hosts or ():
                base = f"/sys/class/scsi_host/{host_n}"
                fw = next(((v, f"sysfs:{a}") for a in ("version_fw", "fw_version", "fwrev")
                           for v in [self.host.read_attr(f"{base}/{a}")] if v), None)
                if fw:
                    found[dev.address] = fw
                if fw or dev.firmware_version:
                    break
        pending = [d for d in raid if not (d.firmware_version or d.address in found)
                   and d.driver]
        if pending:
            found.update(tool_firmware(self.host, pending))
        return [replace(d, firmware_version=found[d.address][0],
                        firmware_source=found[d.address][1]) if d.address in found else d
                for d in devices]


def collect(host: Host, catalog_paths: list[str] | None, use_catalog: bool = True,
            config: Config | None = None) -> Scan:
    """Scan `host` with names and catalog verdicts; shared by inventory, snapshot and check.
    `config` (the run's Config) says where the catalog is; it is needed with `use_catalog`."""
    verdict = None
    if use_catalog:
        if config is None:
            raise TypeError("collect(use_catalog=True) needs the run's config")
        verdict = load_catalog(catalog_paths, config=config).verdict
    return Inventory(host, names=default_names(), verdict=verdict).scan()


def _link_name(target: str | None) -> str | None:
    if not target:
        return None
    name = target.rstrip("/").rsplit("/", 1)[-1]
    return name if name and name not in (".", "..") else None


def _driver_link(target: str | None) -> str | None:
    """Driver name from a `driver` link; the kernel's always ends in .../drivers/NAME."""
    parts = (target or "").rstrip("/").split("/")
    if len(parts) < 2 or parts[-2] != "drivers":
        return None
    return _driver_name(parts[-1])


def _driver_name(raw: str | None) -> str | None:
    return raw if raw and DRIVER_NAME.fullmatch(raw) else None


def _numa(raw: str | None) -> int | None:
    n = _int(raw)
    return n if n is not None and n >= 0 else None


def _modalias(
    v: str | None, d: str | None, sv: str | None, sd: str | None, cls: str | None
) -> str | None:
    """Derive the kernel's PCI modalias when the snapshot lacks the file."""
    if not (v and d and sv and sd and cls):
        return None
    return pci_modalias(v, d, sv, sd, cls)


def _addr_key(addr: str) -> tuple[int, ...]:
    try:
        dom, bus, rest = addr.split(":")
        dev, fn = rest.split(".")
        return tuple(parse_int(p, addr, 16) for p in (dom, bus, dev, fn))
    except ValueError:
        return (1 << 32,)
