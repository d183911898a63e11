"""A small ctypes binding to libpci's name lookup (`pci_lookup_name()` of libpci.so.3).

Kept apart from `pciids` so ctypes is imported only by a run that needs the database: most
runs answer from the remembered names (`namememo`).
"""

from __future__ import annotations

import ctypes
import os
import threading
import weakref

from hwmgr.errors import NotFoundError

# Values from <pci/pci.h> (libpci 3.9.0; unchanged since 3.0 except NO_HWDB, added in 3.4).
PCI_ACCESS_SYS_BUS_PCI = 1
PCI_LOOKUP_NO_NUMBERS = 0x20000
PCI_LOOKUP_NO_HWDB = 0x800000
_FLAGS = PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB

_MSG_CB = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class _PciAccessHead(ctypes.Structure):
    """The leading, ABI-stable fields of `struct pci_access` (the rest is never touched)."""

    _fields_ = [
        ("method", ctypes.c_uint),
        ("writeable", ctypes.c_int),
        ("buscentric", ctypes.c_int),
        ("id_file_name", ctypes.c_char_p),
        ("free_id_name", ctypes.c_int),
        ("numeric_ids", ctypes.c_int),
        ("id_lookup_mode", ctypes.c_uint),
        ("debugging", ctypes.c_int),
        ("error", ctypes.c_void_p),
        ("warning", ctypes.c_void_p),
        ("debug", ctypes.c_void_p),
    ]


class LibPci:
    """One libpci `pci_access` used only for name lookups; errors are caught, never fatal.

    libpci reports a malformed pci.ids through `a->error`, declared noreturn (the default calls
    exit()). Ours records the message and returns; in libpci 3.9.0 the code after that call in
    `pci_load_name_list` just returns 0 (checked by disassembly), after which we stop using
    this handle. A missing file is not an error for libpci: every lookup returns NULL.
    """

    def __init__(self, path: str, soname: str) -> None:
        try:
            lib = ctypes.CDLL(soname)
            self._declare(lib)
        except (OSError, AttributeError) as exc:  # no library, or one without these symbols
            raise NotFoundError(f"libpci not available: {exc}") from None
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._lib = lib
        self._buf = ctypes.create_string_buffer(1024)
        self._path = os.fsencode(path)  # keep alive: libpci stores the pointer
        self._on_error = _MSG_CB(self._record)
        self._on_warning = _MSG_CB(self._record)
        self._on_debug = _MSG_CB(lambda *_args: None)
        pacc = lib.pci_alloc()
        if not pacc:
            raise NotFoundError("libpci not available: pci_alloc() failed")
        self._pacc = pacc
        head = _PciAccessHead.from_address(pacc)
        head.error = ctypes.cast(self._on_error, ctypes.c_void_p)
        head.warning = ctypes.cast(self._on_warning, ctypes.c_void_p)
        head.debug = ctypes.cast(self._on_debug, ctypes.c_void_p)
        head.id_lookup_mode = 0  # no ~/.cache/pci-ids cache, no DNS: pci.ids only
        head.numeric_ids = 0
        head.id_file_name = self._path
        head.free_id_name = 0
        self._finalizer = weakref.finalize(
            self, lib.pci_cleanup, pacc, self._on_error, self._on_warning, self._on_debug
        )
        # An explicit method skips probing, so pci_init() cannot reach its exit()ing error path.
        if lib.pci_get_method_name(PCI_ACCESS_SYS_BUS_PCI):
            head.method = PCI_ACCESS_SYS_BUS_PCI
            lib.pci_init(pacc)
        self.loaded = bool(lib.pci_load_name_list(pacc)) and not self.errors

    @staticmethod
    def _declare(lib: ctypes.CDLL) -> None:
        """Set the C signatures we rely on (raises AttributeError for a missing symbol)."""
        lib.pci_alloc.restype = ctypes.c_void_p
        lib.pci_alloc.argtypes = []
        lib.pci_init.restype = None
        lib.pci_init.argtypes = [ctypes.c_void_p]
        lib.pci_cleanup.restype = None
        lib.pci_cleanup.argtypes = [ctypes.c_void_p]
        lib.pci_get_method_name.restype = ctypes.c_char_p
        lib.pci_get_method_name.argtypes = [ctypes.c_int]
        lib.pci_load_name_list.restype = ctypes.c_int
        lib.pci_load_name_list.argtypes = [ctypes.c_void_p]
        lib.pci_lookup_name.restype = ctypes.c_char_p
        # Variadic: fix only the named arguments; the IDs are passed as explicit c_int.
        lib.pci_lookup_name.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_int,
        ]

    def _record(self, fmt: bytes | None, a1: int | None, a2: int | None, a3: int | None) -> None:
        """error/warning callback: keep the message (formatted for the one we know)."""
        text = (fmt or b"").decode("utf-8", "replace").strip()
        if text == "%s at %s, line %d" and a1 and a2:
            what = ctypes.string_at(a1).decode("utf-8", "replace")
            where = ctypes.string_at(a2).decode("utf-8", "replace")
            text = f"{what} at {where}, line {ctypes.c_int(a3 or 0).value}"
        self.errors.append(text)

    def lookup(self, flags: int, *ids: int) -> str | None:
        """pci_lookup_name(flags | NO_NUMBERS | NO_HWDB, *ids) decoded, or None."""
        args = [ctypes.c_int(i) for i in ids]
        with self._lock:
            res = self._lib.pci_lookup_name(self._pacc, self._buf, 1024, flags | _FLAGS, *args)
        # libpci re-reads a file that gave no entries on each lookup; never trust a bad read
        if not res or self.errors or res.startswith(b"<pci_lookup_name:"):
            return None
        return res.decode("utf-8", "replace")

    def close(self) -> None:
        """Release the libpci handle (also done automatically at exit)."""
        self._finalizer()
