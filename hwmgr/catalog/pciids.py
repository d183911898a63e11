"""PCI vendor/device/subsystem/class names from pci.ids, read in Python, as lspci shows them.

This reads the *analysing* machine's name database (pci.ids, as lspci does), not the analysed
host, so it opens that file itself instead of going through a `Host`; nothing else is read.
A run meets a few vendors, and pci.ids holds thousands (1.3 MB): only the blocks of the
vendors looked up are parsed (the classes and generic subsystems, a few kB, on first use),
following libpci's own rules line by line, so the names are the ones lspci prints.
"""

from __future__ import annotations

import gzip
import os
import re
import threading
import zlib
from typing import Optional

from hwmgr.errors import BadInputError, NotFoundError

#: Where pci.ids is looked for when no ids_path is given (first one that exists wins).
DEFAULT_IDS_PATHS: tuple[str, ...] = (
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
)


def _ide_progif(pif: int) -> str:
    """libpci's synthesized prog-if text for IDE controllers (class 0101)."""
    parts = [(0x80, "Master"), (0x08, "SecP"), (0x04, "SecO"), (0x02, "PriP"), (0x01, "PriO")]
    return " ".join(name for bit, name in parts if pif & bit)


_HEX4 = rb"([0-9a-fA-F]{4})"
_HEX2 = rb"([0-9a-fA-F]{2})"
_NAME = rb"[ \t]+([^ \t].*)"
_RE_VENDOR = re.compile(_HEX4 + _NAME, re.S)
_RE_CLASS = re.compile(rb"C " + _HEX2 + _NAME, re.S)
_RE_GENSUB = re.compile(rb"S " + _HEX4, re.S)
_RE_SUB = re.compile(_HEX4 + rb"[ \t]" + _HEX4 + _NAME, re.S)
_RE_CLS2 = re.compile(_HEX2 + _NAME, re.S)
_VENDOR, _CLASS, _GENSUB, _UNKNOWN = 0, 1, 2, 3
_BLANKS = (b" ", b"\t")
_TOP_LINE = re.compile(rb"\n[^\t#\n]")  # a line that may start the next block


def _is_blank(line: bytes) -> bool:
    """libpci skips lines that are empty or a comment after leading blanks."""
    first = line.lstrip(b" \t")[:1]
    return not first or first == b"#"


class _PciIdsFile:
    """Tolerant parser of the pci.ids format, following libpci's own rules line by line.

    Bad lines (and the entries nested under them) are skipped instead of failing the file;
    the first of duplicate entries wins. Keys are ints, like libpci's hash. Parsed a block at
    a time: a vendor's block(s) when that vendor is first looked up, the class and generic
    subsystem blocks together on the first lookup that needs them.
    """

    def __init__(self, data: bytes) -> None:
        self.vendors: dict[int, str] = {}
        self.devices: dict[int, str] = {}
        self.subsystems: dict[int, str] = {}
        self.gen_subsystems: dict[int, str] = {}
        self.classes: dict[int, str] = {}
        self.subclasses: dict[int, str] = {}
        self.progifs: dict[int, str] = {}
        if data[:2] == b"\x1f\x8b":
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError, zlib.error):
                data = b""
        self._data = data
        self._parsed: set[int | str] = set()  # vendor IDs, and "C/S" for the other blocks
        self._blocks: dict[bytes, list[tuple[int, int]]] | None = None
        self._lock = threading.Lock()

    def _index(self) -> dict[bytes, list[tuple[int, int]]]:
        """Where each block is: (start, end) by the first 4 bytes of its top-level line,
        lowercased (a vendor ID, or b"c 02"/b"s 80" for classes and generic subsystems).
        A block ends at the next top-level line that `_parse` does not skip."""
        data = self._data
        heads = [0] if data[:1] not in (b"\t", b"#", b"\n", b"") else []
        heads += [m.start() + 1 for m in _TOP_LINE.finditer(data)]
        starts: list[tuple[bytes, int]] = []
        for head in heads:
            nxt = data.find(b"\n", head)
            raw = data[head:nxt if nxt != -1 else len(data)].split(b"\r", 1)[0]
            if raw[-1:] in _BLANKS:
                raw = raw[:-1]
            if raw and not _is_blank(raw):
                starts.append((raw[:4].lower(), head))
        index: dict[bytes, list[tuple[int, int]]] = {}
        for i, (key, head) in enumerate(starts):
            end = starts[i + 1][1] if i + 1 < len(starts) else len(data)
            index.setdefault(key, []).append((head, end))
        return index

    def _need(self, what: int | str) -> None:
        """Make sure the blocks of a vendor ID (or "C/S": classes, generic subsystems) are
        parsed, in file order."""
        if what in self._parsed:
            return
        with self._lock:
            if what in self._parsed:
                return
            if self._blocks is None:
                self._blocks = self._index()
            if what == "C/S":
                spans = sorted(span for key, spans in self._blocks.items()
                               if key[:2] in (b"c ", b"s ") for span in spans)
            else:
                spans = self._blocks.get(b"%04x" % int(what), [])
            for start, end in spans:
                self._parse(self._data[start:end])
            self._parsed.add(what)

    def _parse(self, data: bytes) -> None:
        vendors, devices, subsystems = self.vendors, self.devices, self.subsystems
        vendor_re, sub_re, cls2_re = _RE_VENDOR.fullmatch, _RE_SUB.fullmatch, _RE_CLS2.fullmatch
        cat = _UNKNOWN
        id1 = id2 = 0
        level1: bool | None = None  # last level-1 line in this block: none yet / good / bad
        for raw in data.split(b"\n"):
            if not raw or raw[0] == 35:  # empty or '#'
                continue
            if b"\r" in raw:
                raw = raw.split(b"\r", 1)[0]
            if raw[-1:] in _BLANKS:  # libpci drops one trailing blank
                raw = raw[:-1]
            if raw[:1] != b"\t":
                level1 = None
                id2 = 0
                m = vendor_re(raw)
                if m:
                    hexid, name = m.groups()
                    cat, id1 = _VENDOR, int(hexid, 16)
                    vendors.setdefault(id1, name.decode("utf-8", "replace"))
                elif raw[:2] == b"C " and (m := _RE_CLASS.fullmatch(raw)):
                    hexid, name = m.groups()
                    cat, id1 = _CLASS, int(hexid, 16)
                    self.classes.setdefault(id1, name.decode("utf-8", "replace"))
                elif raw[:2] == b"S " and (m := _RE_GENSUB.fullmatch(raw)):
                    cat, id1 = _GENSUB, int(m.group(1), 16)
                elif _is_blank(raw):
                    continue
                else:  # unknown block letter, or garbage: skip it and everything under it
                    cat = _UNKNOWN
            elif cat == _UNKNOWN:
                continue
            elif raw[1:2] != b"\t":  # nesting level 1
                m = (cls2_re if cat == _CLASS else vendor_re)(raw, 1)
                if m:
                    hexid, raw_name = m.groups()
                    id2 = int(hexid, 16)
                    name = raw_name.decode("utf-8", "replace")
                    if cat == _VENDOR:
                        devices.setdefault(id1 << 16 | id2, name)
                    elif cat == _CLASS:
                        self.subclasses.setdefault(id1 << 8 | id2, name)
                    else:
                        self.gen_subsystems.setdefault(id1 << 16 | id2, name)
                    level1 = True
                elif not _is_blank(raw):
                    level1 = False
            elif level1 is not False:  # nesting level 2 (deeper levels never match)
                if cat == _VENDOR and level1:
                    m = sub_re(raw, 2)
                    if m:
                        sv, sd, raw_name = m.groups()
                        key = id1 << 48 | id2 << 32 | int(sv, 16) << 16 | int(sd, 16)
                        subsystems.setdefault(key, raw_name.decode("utf-8", "replace"))
                elif cat == _CLASS:  # libpci allows prog-ifs right under a class (subclass 00)
                    m = cls2_re(raw, 2)
                    if m:
                        hexid, raw_name = m.groups()
                        key = id1 << 16 | id2 << 8 | int(hexid, 16)
                        self.progifs.setdefault(key, raw_name.decode("utf-8", "replace"))

    def vendor(self, v: int) -> str | None:
        self._need(v)
        return self.vendors.get(v)

    def device(self, v: int, d: int) -> str | None:
        self._need(v)
        return self.devices.get(v << 16 | d)

    def subsystem(self, v: int, d: int, sv: int, sd: int) -> str | None:
        """libpci's rule: the vendor's subsystem entry, else the generic one, else (when the
        subsystem IDs are the device's own) the device name."""
        self._need(v)
        name = self.subsystems.get(v << 48 | d << 32 | sv << 16 | sd) if v > 0 and d > 0 \
            else None
        if name is None:
            self._need("C/S")
            name = self.gen_subsystems.get(sv << 16 | sd)
        if name is None and v == sv and d == sd:
            name = self.devices.get(v << 16 | d)
        return name

    def class_name(self, cls: int) -> str | None:
        """The subclass name, else the base class name with libpci's ' [xxxx]' suffix."""
        self._need("C/S")
        name = self.subclasses.get(cls)
        if name is None and cls >> 8 in self.classes:
            return f"{self.classes[cls >> 8]} [{cls:04x}]"
        return name

    def prog_if(self, cls: int, pif: int) -> str | None:
        self._need("C/S")
        name = self.progifs.get(cls << 8 | pif)
        if name is None and cls == 0x0101 and not pif & 0x70:
            name = _ide_progif(pif)
        return name or None


def _hex_text(value: str, what: str, sizes: tuple[int, ...]) -> str:
    """'0x19A2' -> '19a2' when it has one of the allowed lengths, else BadInputError."""
    text = value.strip().lower() if isinstance(value, str) else ""
    if text.startswith("0x"):
        text = text[2:]
    if len(text) not in sizes or not all(c in "0123456789abcdef" for c in text):
        want = " or ".join(str(n) for n in sizes)
        raise BadInputError(f"invalid PCI {what} {value!r}: expected {want} hex digits")
    return text


def _parse_id(value: Optional[str], what: str) -> int | None:
    """'19a2', '0x19A2' -> 0x19a2; None -> None; anything else -> BadInputError."""
    return None if value is None else int(_hex_text(value, what, (4,)), 16)


class PciNames:
    """Names from one pci.ids, opened on the first lookup (or `path` access) and parsed only
    where the lookups need. An explicit ids_path that cannot be read raises NotFoundError;
    when no default pci.ids exists, `path` is None and every lookup answers None."""

    def __init__(self, ids_path: str | None = None, *,
                 search_paths: tuple[str, ...] = DEFAULT_IDS_PATHS) -> None:
        self.ids_path = ids_path
        self.search_paths = search_paths
        self._db: _PciIdsFile | None = None
        self._path: str | None = None
        self._loaded = False
        self._lock = threading.Lock()

    def _find_path(self) -> str | None:
        if self.ids_path is not None:
            if not os.path.isfile(self.ids_path):
                raise NotFoundError(f"pci.ids file '{self.ids_path}' not found")
            return self.ids_path
        return next((p for p in self.search_paths if os.path.isfile(p)), None)

    def load(self) -> None:
        """Read the file now (idempotent); raises the errors documented on the class."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            path = self._find_path()
            if path is not None:
                try:
                    with open(path, "rb") as fh:  # the analysing machine's database
                        data = fh.read()
                except OSError as exc:
                    raise NotFoundError(f"pci.ids file '{path}' unreadable: "
                                        f"{exc.strerror}") from None
                self._db, self._path = _PciIdsFile(data), path
            self._loaded = True

    @property
    def path(self) -> str | None:
        """The pci.ids file in use, or None when there is none (loads)."""
        self.load()
        return self._path

    def _file(self) -> _PciIdsFile | None:
        self.load()
        return self._db

    # -- lookups -----------------------------------------------------------------------------
    def vendor(self, vendor: Optional[str]) -> str | None:
        """'19a2' -> 'Emulex Corporation'; None when unknown."""
        v = _parse_id(vendor, "vendor ID")
        db = self._file()
        return None if v is None or db is None else db.vendor(v)

    def device(self, vendor: Optional[str], device: Optional[str]) -> str | None:
        """('19a2', '0710') -> 'OneConnect 10Gb NIC (be3)'; None when unknown."""
        v, d = _parse_id(vendor, "vendor ID"), _parse_id(device, "device ID")
        db = self._file()
        return None if v is None or d is None or db is None else db.device(v, d)

    def subsystem(
        self,
        vendor: Optional[str],
        device: Optional[str],
        subvendor: Optional[str],
        subdevice: Optional[str],
    ) -> str | None:
        """Subsystem (board) name as lspci shows it; when subsystem IDs equal the device IDs
        and no entry exists, that is the device name (libpci's rule)."""
        v, d = _parse_id(vendor, "vendor ID"), _parse_id(device, "device ID")
        sv = _parse_id(subvendor, "subsystem vendor ID")
        sd = _parse_id(subdevice, "subsystem device ID")
        if v is None or d is None or sv is None or sd is None:
            return None
        db = self._file()
        return None if db is None else db.subsystem(v, d, sv, sd)

    def class_name(self, cls: Optional[str]) -> str | None:
        """'0200' (or '020000' with prog-if) -> 'Ethernet controller'; the base class name
        when only it is known; None when unknown."""
        if cls is None:
            return None
        c = int(_hex_text(cls, "class", (4, 6))[:4], 16)
        db = self._file()
        name = db.class_name(c) if db is not None else None
        suffix = f" [{c:04x}]"  # libpci's form for "only the base class is known"
        if name is not None and name.endswith(suffix):
            name = name[: -len(suffix)]
        return name

    def prog_if(self, cls: Optional[str]) -> str | None:
        """'010802' -> 'NVM Express': the programming-interface name, None when unknown."""
        if cls is None:
            return None
        c = int(_hex_text(cls, "class with prog-if", (6,)), 16)
        db = self._file()
        return db.prog_if(c >> 8, c & 0xFF) if db is not None else None


_default: PciNames | None = None
_default_lock = threading.Lock()


def default_names() -> PciNames:
    """The process-wide PciNames (default paths); created on first call."""
    global _default
    with _default_lock:
        if _default is None:
            _default = PciNames()
        return _default
