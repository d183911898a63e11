"""Hold the boot default on the running kernel, and restore exactly what was there.

`kernel-gate` holds the default when a managed driver is not ready for a newly installed
kernel, so the next reboot comes back on the kernel that works. One back-end per boot loader,
chosen from files on the host root (so a fixture root tests the same code):

- Debian/Ubuntu GRUB (`/etc/default/grub`, `/boot/grub/grub.cfg`): `GRUB_DEFAULT=saved`
  (grub.cfg regenerated when that line changes) and grubenv's `saved_entry` = the running
  kernel's menu entry; restored: the old `GRUB_DEFAULT` line and `saved_entry` (or none).
- RHEL/Fedora (`/boot/grub2`, `/etc/sysconfig/kernel`): `grubby --set-default
  /boot/vmlinuz-RUNNING`; restored: the recorded `grubby --default-kernel`.
- systemd-boot (`loader/loader.conf` on the ESP): loader.conf's `default` line, and
  `bootctl set-default` on a live EFI host; restored: the old line and EFI variable.

Each back-end's `hold` returns what it found (a JSON object the caller keeps in the state dir);
`restore` takes that object back. Every command goes through the host's runner.
"""

from __future__ import annotations

import re
from typing import Callable, Mapping, Optional, Protocol, TypedDict, Union

from hwmgr.errors import HwmgrError
from hwmgr.host.seam import Host

QUICK = 120.0
GRUB_DEFAULTS = "/etc/default/grub"
GRUB_CFG = "/boot/grub/grub.cfg"
GRUBENV = "/boot/grub/grubenv"
ESPS = ("/efi", "/boot/efi", "/boot")
# systemd's vendor GUID for the loader's EFI variables (LoaderEntryDefault-<guid>)
LOADER_GUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
EFIVAR_DEFAULT = f"/sys/firmware/efi/efivars/LoaderEntryDefault-{LOADER_GUID}"
_DEFAULT_RE = re.compile(r"^\s*GRUB_DEFAULT=(.*)$")
_ENTRY_RE = re.compile(r"^\s*(menuentry|submenu)\s+'((?:[^'\\]|\\.|'\\'')*)'(.*)\{\s*$")
_ID_RE = re.compile(r"\$menuentry_id_option\s+'([^']*)'")
_LINUX_RE = re.compile(r"^\s*linux(?:efi|16)?\s+\S*vmlinuz-(\S+)")



def _put_line(host: Host, path: str, matches: Callable[[str], bool], line: str | None,
              last: bool) -> None:
    """Put `line` in `path` in place of the first (or `last`) line `matches` accepts, append it
    when none does, or delete that line when `line` is None; every other byte is kept."""
    lines = (host.read_text(path) or "").splitlines()
    found = [i for i, ln in enumerate(lines) if matches(ln)]
    if not found:
        lines += [line] if line is not None else []
    elif line is None:
        del lines[found[-1] if last else found[0]]
    else:
        lines[found[-1] if last else found[0]] = line
    host.write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))

class Backend(Protocol):
    """A boot loader hwmgr can hold on the running kernel: `hold` returns what it changed
    (kept in hold.json as "saved"), `restore` gets that back as read from the file."""

    name: str

    def hold(self, host: Host, running: str) -> Mapping[str, object]: ...

    def restore(self, host: Host, saved: Mapping[str, object]) -> None: ...


class GrubSaved(TypedDict):
    grub_default: Optional[str]  # the last GRUB_DEFAULT line of /etc/default/grub
    changed_default: bool  # hwmgr set GRUB_DEFAULT=saved (restore puts the line back)
    saved_entry: Optional[str]  # grubenv's saved_entry before
    notes: list[str]
    held_entry: str


class GrubbySaved(TypedDict):
    default_kernel: Optional[str]
    held_entry: str
    notes: list[str]


class _SdbootSaved(TypedDict):
    loader_conf: str
    default_line: Optional[str]
    held_entry: str
    efivar: Optional[str]  # LoaderEntryDefault before
    notes: list[str]


class SdbootSaved(_SdbootSaved, total=False):
    bootctl: bool  # bootctl set-default ran (a live EFI host)


def _text(saved: Mapping[str, object], key: str) -> str | None:
    """A saved value read back from hold.json: its text, else None."""
    value = saved.get(key)
    return value if isinstance(value, str) else None


def _run(host: Host, argv: list[str], package: str) -> str:
    """Run a boot-loader command; its failure is one line naming it (exit 1)."""
    res = host.run(argv, timeout=QUICK)
    if not res.available:
        raise HwmgrError(f"{argv[0]} is not installed: install {package}")
    if not res.ok:
        raise HwmgrError(f"`{' '.join(argv)}` failed: {res.describe()}")
    return res.stdout


# ------------------------------------------------------------------ GRUB (Debian)
def grub_entries(text: str) -> list[tuple[list[tuple[str, str | None]], str | None]]:
    """grub.cfg's menu entries: (the path of (title, id) from the top menu, the kernel
    release its `linux` line boots)."""
    out: list[tuple[list[tuple[str, str | None]], str | None]] = []
    stack: list[tuple[str, str, str | None]] = []  # (kind, title, id) of the open blocks
    current: int | None = None
    for line in text.splitlines():
        mo = _ENTRY_RE.match(line)
        if mo:
            kind, title = mo.group(1), mo.group(2).replace("'\\''", "'")
            ident = _ID_RE.search(mo.group(3))
            stack.append((kind, title, ident.group(1) if ident else None))
            if kind == "menuentry":
                out.append(([(t, i) for _, t, i in stack], None))
                current = len(out) - 1
            continue
        linux = _LINUX_RE.match(line)
        if linux and current is not None and out[current][1] is None:
            out[current] = (out[current][0], linux.group(1))
        if line.strip() == "}" and stack and stack.pop()[0] == "menuentry":
            current = None
    return out


def grub_entry(text: str, kernel: str) -> str | None:
    """The `saved_entry` value naming the menu entry that boots `kernel` (ids joined by `>`
    where grub.cfg gives them, else titles): the entry whose title or id names the kernel
    first, never a recovery entry."""
    found = [(path, k) for path, k in grub_entries(text) if k == kernel
             and "recovery" not in path[-1][0].lower()
             and "recovery" not in (path[-1][1] or "")]
    named = [p for p, _ in found if kernel in p[-1][0] or kernel in (p[-1][1] or "")]
    pool = named or [p for p, _ in found]
    if not pool:
        return None
    best = pool[0]
    return ">".join(i or t for t, i in best)


def grubenv_values(data: bytes | None) -> dict[str, str]:
    """The key=value lines of a grubenv block (its `#` padding ignored)."""
    out: dict[str, str] = {}
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            out[key] = value
    return out


def uses_saved(cfg: str) -> bool:
    """True when grub.cfg boots grubenv's saved_entry by default (what GRUB_DEFAULT=saved
    makes grub-mkconfig write)."""
    return 'set default="${saved_entry}"' in cfg


class Grub:
    """Debian's GRUB: GRUB_DEFAULT=saved plus grubenv's saved_entry."""

    name = "grub"

    @staticmethod
    def detect(host: Host) -> bool:
        return host.exists(GRUB_DEFAULTS) and (host.exists(GRUB_CFG) or host.exists(GRUBENV))

    def _regenerate(self, host: Host) -> str:
        """Rewrite grub.cfg from /etc/default/grub (only on the live host: under a root the
        host's grub-mkconfig would scan this machine's kernels)."""
        if not host.live:
            return f"{GRUB_CFG} not regenerated under a --root: run update-grub on that system"
        res = host.run(["update-grub"], timeout=QUICK)
        if not res.available:
            _run(host, ["grub-mkconfig", "-o", GRUB_CFG], "grub2-common")
        elif not res.ok:
            raise HwmgrError(f"`update-grub` failed: {res.describe()}")
        return f"{GRUB_CFG} regenerated"

    def _set_default_line(self, host: Host, line: str | None) -> None:
        """Put `line` (a whole GRUB_DEFAULT=... line, or None: no such line) in
        /etc/default/grub in place of the last GRUB_DEFAULT line, keeping everything else."""
        _put_line(host, GRUB_DEFAULTS, lambda ln: bool(_DEFAULT_RE.match(ln)), line, last=True)

    def _editenv(self, host: Host, *args: str) -> None:
        _run(host, ["grub-editenv", str(host.writable_path(GRUBENV)), *args], "grub-common")

    def hold(self, host: Host, running: str) -> GrubSaved:
        lines = (host.read_text(GRUB_DEFAULTS) or "").splitlines()
        old = next((ln for ln in reversed(lines) if _DEFAULT_RE.match(ln)), None)
        mo = _DEFAULT_RE.match(old or "")
        value = mo.group(1).strip().strip("\"'") if mo else "0"
        saved: GrubSaved = {"grub_default": old, "changed_default": value != "saved",
                            "saved_entry": grubenv_values(host.read_bytes(GRUBENV)).get(
                                "saved_entry"), "notes": [], "held_entry": ""}
        if saved["changed_default"]:
            self._set_default_line(host, "GRUB_DEFAULT=saved")
        if saved["changed_default"] or not uses_saved(host.read_text(GRUB_CFG) or ""):
            saved["notes"].append(self._regenerate(host))
            if host.live and not uses_saved(host.read_text(GRUB_CFG) or ""):
                raise HwmgrError(f"{GRUB_CFG} does not boot saved_entry after update-grub with "
                                 "GRUB_DEFAULT=saved: a file in /etc/default/grub.d sets "
                                 "GRUB_DEFAULT otherwise")
        entry = grub_entry(host.read_text(GRUB_CFG) or "", running)
        if entry is None:
            raise HwmgrError(f"{GRUB_CFG} has no menu entry booting {running}: cannot hold "
                             "the boot default on it (run update-grub)")
        self._editenv(host, "set", f"saved_entry={entry}")
        got = grubenv_values(host.read_bytes(GRUBENV)).get("saved_entry")
        if got != entry:
            raise HwmgrError(f"{GRUBENV}: saved_entry reads {got!r} after grub-editenv set it "
                             f"to {entry!r}")
        saved["held_entry"] = entry
        return saved

    def restore(self, host: Host, saved: Mapping[str, object]) -> None:
        old = saved.get("saved_entry")
        if old is None:
            self._editenv(host, "unset", "saved_entry")
        else:
            self._editenv(host, "set", f"saved_entry={old}")
        if saved.get("changed_default"):
            self._set_default_line(host, _text(saved, "grub_default"))
            self._regenerate(host)


# ------------------------------------------------------------------ grubby (RHEL)
class Grubby:
    """RHEL's grubby: the default kernel by its image path."""

    name = "grubby"

    @staticmethod
    def detect(host: Host) -> bool:
        return host.exists("/boot/grub2") or host.exists("/etc/sysconfig/kernel")

    @staticmethod
    def _live(host: Host) -> None:
        if not host.live:  # grubby has no root option: it would change this machine's loader
            raise HwmgrError("grubby holds the boot default on the live host only, not under "
                             "a --root")

    def hold(self, host: Host, running: str) -> GrubbySaved:
        self._live(host)
        old = _run(host, ["grubby", "--default-kernel"], "grubby").strip()
        image = f"/boot/vmlinuz-{running}"
        _run(host, ["grubby", "--set-default", image], "grubby")
        now = _run(host, ["grubby", "--default-kernel"], "grubby").strip()
        if now != image:
            raise HwmgrError(f"grubby --default-kernel says {now!r} after setting {image}")
        return {"default_kernel": old or None, "held_entry": image, "notes": []}

    def restore(self, host: Host, saved: Mapping[str, object]) -> None:
        self._live(host)
        default = _text(saved, "default_kernel")
        if default:
            _run(host, ["grubby", "--set-default", default], "grubby")


# ------------------------------------------------------------------ systemd-boot
def loader_conf(host: Host) -> str | None:
    """The ESP's loader.conf (logical path), or None."""
    return next((f"{esp}/loader/loader.conf" for esp in ESPS
                 if host.exists(f"{esp}/loader/loader.conf")), None)


def sdboot_entry(host: Host, conf: str, kernel: str) -> str | None:
    """The Boot Loader Specification entry (file name) booting `kernel`: its `version`
    field, its `linux` line or its name names the release."""
    entries = conf.rsplit("/", 1)[0] + "/entries"
    for name in sorted(host.listdir(entries)):
        if not name.endswith(".conf"):
            continue
        fields: dict[str, str] = {}
        for line in (host.read_text(f"{entries}/{name}") or "").splitlines():
            key, _, value = line.strip().partition(" ")
            fields.setdefault(key, value.strip())
        if (fields.get("version") == kernel or kernel in fields.get("linux", "").split("/")
                or fields.get("linux", "").endswith(f"vmlinuz-{kernel}")
                or kernel in name):
            return name
    return None


def _efivar(host: Host) -> str | None:
    """LoaderEntryDefault as systemd-boot reads it (4 attribute bytes, UTF-16LE, NUL)."""
    data = host.read_bytes(EFIVAR_DEFAULT)
    if data is None or len(data) < 4:
        return None
    return data[4:].decode("utf-16-le", "replace").rstrip("\x00") or None


class SystemdBoot:
    """systemd-boot: loader.conf's `default`, and the EFI variable bootctl sets."""

    name = "systemd-boot"

    @staticmethod
    def detect(host: Host) -> bool:
        return loader_conf(host) is not None

    @staticmethod
    def _set_line(host: Host, conf: str, line: str | None) -> None:
        _put_line(host, conf, lambda ln: ln.split()[:1] == ["default"], line, last=False)

    def hold(self, host: Host, running: str) -> SdbootSaved:
        conf = loader_conf(host)
        assert conf is not None  # detect() chose this back-end
        entry = sdboot_entry(host, conf, running)
        if entry is None:
            raise HwmgrError(f"no boot entry under {conf.rsplit('/', 1)[0]}/entries boots "
                             f"{running}: cannot hold the boot default on it")
        lines = (host.read_text(conf) or "").splitlines()
        old = next((ln for ln in lines if ln.split()[:1] == ["default"]), None)
        saved: SdbootSaved = {"loader_conf": conf, "default_line": old, "held_entry": entry,
                              "efivar": _efivar(host), "notes": []}
        self._set_line(host, conf, f"default {entry}")
        if host.live and host.is_dir("/sys/firmware/efi"):
            _run(host, ["bootctl", "set-default", entry], "systemd-boot")
            saved["bootctl"] = True
        return saved

    def restore(self, host: Host, saved: Mapping[str, object]) -> None:
        conf = saved["loader_conf"]
        if not isinstance(conf, str):
            raise HwmgrError(f"the hold's saved loader_conf is {conf!r}, not a path")
        self._set_line(host, conf, _text(saved, "default_line"))
        if saved.get("bootctl"):
            _run(host, ["bootctl", "set-default", _text(saved, "efivar") or ""], "systemd-boot")


BackendClass = Union[type[SystemdBoot], type[Grub], type[Grubby]]
BACKENDS: tuple[BackendClass, ...] = (SystemdBoot, Grub, Grubby)  # first match wins


def detect(host: Host) -> Backend | None:
    """The boot loader this host uses, from its files; None when none is recognised."""
    for cls in BACKENDS:
        if cls.detect(host):
            backend: Backend = cls()
            return backend
    return None


def by_name(name: str) -> Backend | None:
    """The back-end a hold record names (to restore with the one that held)."""
    for cls in BACKENDS:
        if cls.name == name:
            backend: Backend = cls()
            return backend
    return None
