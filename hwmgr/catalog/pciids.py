"""PCI vendor/device/subsystem/class names from pci.ids, through libpci or a built-in parser.

This reads the *analysing* machine's name database (pci.ids, as lspci does), not the analysed
host, so it opens that file itself instead of going through a `Host`; nothing else is read.
The libpci backend (`libpci.py`, a small ctypes binding to `pci_lookup_name()`) is imported
only when a lookup needs the database; when libpci is absent (or rejects the file) the
pure-Python parser gives the same answers. `namememo` spares most runs both.
"""

from __future__ import annotations

import _thread  # threading costs ~1 ms to import; a lock is all this needs
import os
import re

from hwmgr.errors import BadInputError, NotFoundError, UsageError

TYPE_CHECKING = False  # typing costs ~3 ms to import; annotations stay strings (PEP 563)
if TYPE_CHECKING:
    from typing import Any, Optional

#: Where pci.ids is looked for when no ids_path is given (first one that exists wins).
DEFAULT_IDS_PATHS: tuple[str, ...] = (
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
)
LIBPCI_SONAME = "libpci.so.3"
BACKENDS = ("auto", "libpci", "pciids")

# pci_lookup_name() flags from <pci/pci.h> (libpci 3.9.0; unchanged since 3.0): the lookup
# kinds both backends answer
PCI_LOOKUP_VENDOR = 1
PCI_LOOKUP_DEVICE = 2
PCI_LOOKUP_CLASS = 4
PCI_LOOKUP_SUBSYSTEM = 8
PCI_LOOKUP_PROGIF = 16


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


def _is_blank(line: bytes) -> bool:
    """libpci skips lines that are empty or a comment after leading blanks."""
    first = line.lstrip(b" \t")[:1]
    return not first or first == b"#"


class _PciIdsFile:
    """Tolerant parser of the pci.ids format, following libpci's own rules line by line.

    Bad lines (and the entries nested under them) are skipped instead of failing the file;
    the first of duplicate entries wins. Keys are ints, like libpci's hash.
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
            import gzip
            import zlib

            try:
                data = gzip.decompress(data)
            except (OSError, EOFError, zlib.error):
                data = b""
        self._parse(data)

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

    def lookup(self, flags: int, *ids: int) -> str | None:
        """Same contract as `libpci.LibPci.lookup` for the flag combinations PciNames uses."""
        kind = flags & 0xFFFF
        if kind == PCI_LOOKUP_VENDOR:
            return self.vendors.get(ids[0])
        if kind == PCI_LOOKUP_DEVICE:
            return self.devices.get(ids[0] << 16 | ids[1])
        if kind == PCI_LOOKUP_SUBSYSTEM | PCI_LOOKUP_DEVICE:
            v, d, sv, sd = ids
            name = None
            if v > 0 and d > 0:
                name = self.subsystems.get(v << 48 | d << 32 | sv << 16 | sd)
            if name is None:
                name = self.gen_subsystems.get(sv << 16 | sd)
            if name is None and v == sv and d == sd:
                name = self.devices.get(v << 16 | d)
            return name
        if kind == PCI_LOOKUP_CLASS:
            cls = ids[0]
            name = self.subclasses.get(cls)
            if name is None and cls >> 8 in self.classes:
                return f"{self.classes[cls >> 8]} [{cls:04x}]"  # libpci adds the number here
            return name
        if kind == PCI_LOOKUP_PROGIF:
            cls, pif = ids
            name = self.progifs.get(cls << 8 | pif)
            if name is None and cls == 0x0101 and not pif & 0x70:
                name = _ide_progif(pif)
            return name or None
        return None


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
    """Lazily loads names once per process (on first lookup or `source` access).

    backend "auto" uses libpci when it loads and accepts the file, else the built-in parser;
    "libpci" raises NotFoundError / BadInputError instead of falling back; "pciids" never
    touches libpci. An explicit ids_path that cannot be read raises NotFoundError; when no
    default pci.ids exists, `source` is None and every lookup answers None.
    """

    def __init__(
        self,
        ids_path: str | None = None,
        backend: str = "auto",
        *,
        libpci_name: str = LIBPCI_SONAME,
        search_paths: tuple[str, ...] = DEFAULT_IDS_PATHS,
    ) -> None:
        if backend not in BACKENDS:
            raise UsageError(f"unknown PCI names backend {backend!r} (use {', '.join(BACKENDS)})")
        self.ids_path = ids_path
        self.backend = backend
        self.libpci_name = libpci_name
        self.search_paths = search_paths
        self.fallback_reason: str | None = None  # why "auto" did not use libpci
        self._db: Any = None  # a libpci.LibPci or a _PciIdsFile
        self._source: str | None = None
        self._path: str | None = None
        self._loaded = False
        self._lock = _thread.allocate_lock()

    # -- loading -----------------------------------------------------------------------------
    def _find_path(self) -> str | None:
        if self.ids_path is not None:
            if not os.path.isfile(self.ids_path):
                raise NotFoundError(f"pci.ids file '{self.ids_path}' not found")
            return self.ids_path
        return next((p for p in self.search_paths if os.path.isfile(p)), None)

    def load(self) -> None:
        """Load the database now (idempotent); raises the errors documented on the class."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            path = self._find_path()
            if path is not None:
                self._path = path
                if self.backend in ("auto", "libpci"):
                    self._db = self._try_libpci(path)
                if self._db is None:
                    self._db = self._read_pciids(path)
                    self._source = "pci.ids"
                else:
                    self._source = "libpci"
            self._loaded = True

    def _try_libpci(self, path: str) -> Any:
        from hwmgr.catalog.libpci import LibPci  # ctypes only when the database is needed

        try:
            lib = LibPci(path, self.libpci_name)
        except NotFoundError as exc:
            if self.backend == "libpci":
                raise
            self.fallback_reason = str(exc)
            return None
        if lib.errors or not lib.loaded:
            lib.close()
            why = lib.errors[0] if lib.errors else "could not open it"
            msg = f"pci.ids file '{path}' rejected by libpci: {why}"
            if self.backend == "libpci":
                raise BadInputError(msg)
            self.fallback_reason = msg
            return None
        return lib

    @staticmethod
    def _read_pciids(path: str) -> _PciIdsFile:
        try:
            with open(path, "rb") as fh:  # the analysing machine's database, not the host's
                data = fh.read()
        except OSError as exc:
            raise NotFoundError(f"pci.ids file '{path}' unreadable: {exc.strerror}") from None
        return _PciIdsFile(data)

    @property
    def source(self) -> str | None:
        """Backend in use: "libpci", "pci.ids", or None when no database was found (loads)."""
        self.load()
        return self._source

    @property
    def path(self) -> str | None:
        """The pci.ids file in use, or None."""
        self.load()
        return self._path

    def _lookup(self, flags: int, *ids: int) -> str | None:
        self.load()
        return self._db.lookup(flags, *ids) if self._db is not None else None

    # -- lookups -----------------------------------------------------------------------------
    def vendor(self, vendor: Optional[str]) -> str | None:
        """'19a2' -> 'Emulex Corporation'; None when unknown."""
        v = _parse_id(vendor, "vendor ID")
        return None if v is None else self._lookup(PCI_LOOKUP_VENDOR, v)

    def device(self, vendor: Optional[str], device: Optional[str]) -> str | None:
        """('19a2', '0710') -> 'OneConnect 10Gb NIC (be3)'; None when unknown."""
        v, d = _parse_id(vendor, "vendor ID"), _parse_id(device, "device ID")
        return None if v is None or d is None else self._lookup(PCI_LOOKUP_DEVICE, v, d)

    def subsystem(
        self,
        vendor: Optional[str],
        device: Optional[str],
        subvendor: Optional[str],
        subdevice: Optional[str],
    ) -> str | None:
        """Subsystem (board) name as lspci shows it; when subsystem IDs equal the device IDs
        and no entry exists, that is the device name (libpci's rule)."""
        ids = (
            _parse_id(vendor, "vendor ID"),
            _parse_id(device, "device ID"),
            _parse_id(subvendor, "subsystem vendor ID"),
            _parse_id(subdevice, "subsystem device ID"),
        )
        if any(i is None for i in ids):
            return None
        return self._lookup(PCI_LOOKUP_SUBSYSTEM | PCI_LOOKUP_DEVICE, *ids)  # type: ignore[arg-type]

    def class_name(self, cls: Optional[str]) -> str | None:
        """'0200' (or '020000' with prog-if) -> 'Ethernet controller'; the base class name
        when only it is known; None when unknown."""
        if cls is None:
            return None
        text = _hex_text(cls, "class", (4, 6))
        c = int(text[:4], 16)
        name = self._lookup(PCI_LOOKUP_CLASS, c)
        suffix = f" [{c:04x}]"  # libpci's form for "only the base class is known"
        if name is not None and name.endswith(suffix):
            name = name[: -len(suffix)]
        return name

    def prog_if(self, cls: Optional[str]) -> str | None:
        """'010802' -> 'NVM Express': the programming-interface name, None when unknown."""
        if cls is None:
            return None
        c = int(_hex_text(cls, "class with prog-if", (6,)), 16)
        return self._lookup(PCI_LOOKUP_PROGIF, c >> 8, c & 0xFF)


_default: PciNames | None = None
_default_lock = _thread.allocate_lock()


def default_names() -> PciNames:
    """The process-wide PciNames (auto backend, default paths); created on first call."""
    global _default
    with _default_lock:
        if _default is None:
            _default = PciNames()
        return _default


__all__ = ["PciNames", "default_names", "DEFAULT_IDS_PATHS", "LIBPCI_SONAME"]
