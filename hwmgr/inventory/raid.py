"""RAID controller firmware from vendor tools: one small adapter class per tool.

Each adapter declares, sos-plugin style, the kernel drivers it serves, the binaries it tries
in order and the argv it runs; `parse` turns the tool's output into (PCI address or None,
firmware) per controller. Adding a vendor's tool means one class here and its entry in
`ADAPTERS`; the scan itself never names a tool.
"""

from __future__ import annotations

import re
from typing import ClassVar, Optional, Sequence, Tuple

from hwmgr import safejson
from hwmgr.host.seam import Host
from hwmgr.inventory.model import Device
from hwmgr.numtext import parse_int
from hwmgr.safejson import member

# (PCI address or None, firmware or None); a runtime alias, so in Python 3.9's spelling
Found = Tuple[Optional[str], Optional[str]]
_ADAPTER = re.compile(r"Adapter #\d")  # a MegaCli block's first line (matched, stripped)


class RaidTool:
    """A vendor RAID CLI: which drivers it serves, how to call it, how to read it."""

    drivers: ClassVar[tuple[str, ...]] = ()
    binaries: ClassVar[tuple[str, ...]] = ()
    args: ClassVar[tuple[str, ...]] = ()

    def parse(self, stdout: str) -> list[Found]:
        """Controllers in the tool's output, in its (PCI) order."""
        raise NotImplementedError

    def query(self, host: Host) -> tuple[list[Found], str] | None:
        """The first binary that answers with at least one controller: (found, binary)."""
        for tool in self.binaries:
            res = host.run([tool, *self.args], timeout=60)
            if not res.ok:
                continue
            found = self.parse(res.stdout)
            if found:
                return found, tool
        return None


class StorCli(RaidTool):
    """Broadcom/LSI storcli: JSON output with each controller's PCI address."""

    drivers = ("megaraid_sas",)
    binaries = ("storcli64", "storcli")
    args = ("/call", "show", "J")

    def parse(self, stdout: str) -> list[Found]:
        try:
            doc = safejson.parse(stdout)  # recorded output may be hostile
        except safejson.JSONError:
            return []
        out: list[Found] = []
        # every member typed as it is read: a wrong type is "not reported" (an int where the
        # list belongs was a TypeError, a string one fake controller per character)
        for ctl in member(doc, "Controllers", list, []):
            if not isinstance(ctl, dict):
                continue
            data = member(ctl, "Response Data", dict, {})
            fw = member(member(data, "Version", dict), "Firmware Version", str)
            pci = member(member(data, "Basics", dict), "PCI Address", str)
            out.append((storcli_addr(pci), fw))
        return out


class MegaCli(RaidTool):
    """LSI MegaCli (older hosts): text, one 'Adapter #N' block per controller, no address."""

    drivers = ("megaraid_sas",)
    binaries = ("MegaCli64", "MegaCli", "megacli")
    args = ("-AdpAllInfo", "-aALL", "-NoLog")
    _FIRMWARE_KEYS = ("FW Version", "FW Package Build")

    def parse(self, stdout: str) -> list[Found]:
        # line by line with str methods: the regexes this replaced (`^\s*` under re.M,
        # `\S.*?\s*$`) backtracked quadratically on long runs of blank lines or spaces
        blocks: list[dict[str, str]] = []
        for line in stdout.splitlines():
            text = line.strip()
            if _ADAPTER.match(text):
                blocks.append({})
                continue
            key, colon, value = text.partition(":")
            key, value = key.strip(), value.strip()
            if blocks and colon and value and key in self._FIRMWARE_KEYS:
                blocks[-1].setdefault(key, value)
        return [(None, b.get("FW Version") or b.get("FW Package Build")) for b in blocks]


# in the order they are tried: the newer tool first
ADAPTERS: tuple[RaidTool, ...] = (StorCli(), MegaCli())


def storcli_addr(raw: object) -> str | None:
    """storcli prints the PCI address as '00:01:00:00' (domain:bus:dev:func)."""
    if not isinstance(raw, str):
        return None
    parts = raw.strip().split(":")
    if len(parts) != 4:
        return None
    try:
        dom, bus, dev, fn = (parse_int(p, "PCI address", 16) for p in parts)
    except ValueError:
        return None
    return f"{dom:04x}:{bus:02x}:{dev:02x}.{fn:x}"


def tool_firmware(host: Host, pending: Sequence[Device]) -> dict[str, tuple[str, str]]:
    """{address: (firmware, tool)} for controllers sysfs left blank, per driver, from the
    first adapter that answers (matched by address, else by PCI order)."""
    out: dict[str, tuple[str, str]] = {}
    for driver in sorted({d.driver for d in pending if d.driver}):
        devs = [d for d in pending if d.driver == driver]
        for adapter in (a for a in ADAPTERS if driver in a.drivers):
            answer = adapter.query(host)
            if answer is None:
                continue
            found, tool = answer
            by_addr = {a: fw for a, fw in found if a}
            for i, dev in enumerate(devs):
                fw = by_addr.get(dev.address)
                if fw is None and len(found) == len(devs):
                    fw = found[i][1]  # controllers enumerate in PCI order
                if fw:
                    out[dev.address] = (fw, tool)
            break
    return out
