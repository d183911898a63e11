"""Signed catalog updates: download, verify with gpgv, validate, refuse downgrades, install.

The way apt and fwupd do it: the catalog and its detached OpenPGP signature (`URL.asc`) are
downloaded, the signature is checked with `gpgv` against hwmgr's own keyring
(`/etc/hwmgr/trusted.gpg.d/*.gpg|*.asc`; `.asc` keys are dearmored into a temp keyring), the
catalog is validated, a `catalog_version` older than the installed one is refused unless
`allow_older`, and the new file replaces `<state>/catalog/current.json` atomically, the old
copy kept as `previous.json` for `hwmgr catalog rollback`. Nothing is installed on any refusal.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Protocol, TypedDict

from hwmgr import __version__, safejson, urls
from hwmgr.catalog.discover import discover
from hwmgr.catalog.load import Catalog
from hwmgr.catalog.validate import MAX_FILE_BYTES
from hwmgr.config import CatalogLocations, Config
from hwmgr.errors import (
    BadInputError,
    HwmgrError,
    NotFoundError,
    NothingToDo,
    RefusedError,
    network_reason,
)
from hwmgr.host.deadline import Deadline, guard
from hwmgr.host.seam import Host
from hwmgr.numtext import to_int
from hwmgr.output import printable

if TYPE_CHECKING:
    import requests

MAX_SIG_BYTES = 64 << 10
TIMEOUT = 30.0  # seconds per read
DEADLINE = 300.0  # seconds for one whole download: headers, redirects and body
NOTHING = "nothing installed"  # what a refused or failed update leaves
_CALVER = re.compile(r"^(\d{4})\.(\d{1,2})\.(\d+)$")
Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


class UpdateUI(Protocol):
    """What an update shows while it works (the verbs' ProgressUI: a bar per download on a
    terminal, one line per step otherwise); the catalog layer only calls it."""

    def download(self, name: str, total: int) -> Progress: ...

    def step(self, name: str, phase: str) -> None: ...


class Installed(TypedDict):
    """What `update` installed (the verb's JSON data)."""

    url: str
    catalog_version: str
    previous_version: Optional[str]
    signed_by: str
    installed: str


class RolledBack(TypedDict):
    """What `rollback` restored (the verb's JSON data)."""

    installed: str
    catalog_version: Optional[str]


def calver(text: object) -> tuple[int, int, int]:
    """'2026.11.0' -> (2026, 11, 0); BadInputError otherwise."""
    m = _CALVER.match(text) if isinstance(text, str) else None
    if not m:
        raise BadInputError(f"catalog_version {text!r} is not YEAR.MONTH.SERIAL")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def download(url: str, limit: int, what: str, progress: Progress | None = None) -> bytes:
    """GET `url` (bounded in size, in redirects and in total time: DEADLINE covers headers,
    redirects and body); a short body is refused (exit 9), a late one is exit 1.
    `progress(done, total)` follows the bytes (once, at the end, when no length is announced)."""
    import requests  # ~45 ms: only a catalog update downloads (every verb imports this module)

    bad = urls.problem(url)
    if bad is not None:
        raise BadInputError(f"{printable(url)[:200]}: {bad}")
    deadline = Deadline.after(DEADLINE)
    with requests.Session() as session, guard(session).armed(deadline):
        return _get(session, url, limit, what, progress, deadline)


def _get(session: requests.Session, url: str, limit: int, what: str, progress: Progress | None,
         deadline: Deadline) -> bytes:
    """The body of `url` through a guarded session (see `download`)."""
    import requests

    try:
        resp = session.get(url, stream=True, timeout=TIMEOUT,
                           headers={"User-Agent": f"hwmgr/{__version__}",
                                    "Accept-Encoding": "identity"})
    except requests.TooManyRedirects:
        raise RefusedError(f"{what} {url}: more than {session.max_redirects} redirects; "
                           "nothing installed") from None
    except requests.RequestException as exc:
        if deadline.passed():
            raise deadline.exceeded(url, "before the headers arrived", NOTHING) from None
        raise HwmgrError(f"{what} {url}: download failed: "
                         f"{network_reason(exc, url, TIMEOUT)}") from None
    with resp:
        if resp.status_code in (404, 410):
            raise NotFoundError(f"{what} {url}: HTTP {resp.status_code}")
        if resp.status_code != 200:
            raise HwmgrError(f"{what} {url}: HTTP {resp.status_code}")
        announced = resp.headers.get("Content-Length")
        size = to_int(announced) if announced and announced.strip()[:1].isdigit() else None
        total = size or 0
        body = bytearray()
        if progress is not None and total:
            progress(0, total)
        try:
            for chunk in resp.iter_content(1 << 16):
                body += chunk
                if len(body) > limit:
                    raise RefusedError(f"{what} {url}: larger than {limit} bytes; refused")
                if progress is not None and total:
                    progress(min(len(body), total), total)
        except requests.RequestException:
            if deadline.passed():
                raise deadline.exceeded(url, f"after {len(body)} bytes", NOTHING) from None
            of = size if size is not None else "unknown"
            raise RefusedError(f"{what} {url}: truncated download ({len(body)} bytes of "
                               f"{of}); nothing installed") from None
        if deadline.passed():
            raise deadline.exceeded(url, f"after {len(body)} bytes", NOTHING)
        if size is not None and size != len(body):
            raise RefusedError(f"{what} {url}: truncated download ({len(body)} of {announced} "
                               "bytes); nothing installed")
        if progress is not None and not total:
            progress(len(body), len(body))
        return bytes(body)


def keyrings(local_host: Host, keys_dir: Path, work: Path) -> list[Path]:
    """hwmgr's trusted keys as binary keyrings (`.asc` dearmored into `work`)."""
    names = sorted(local_host.listdir(str(keys_dir)) or [])
    out: list[Path] = []
    for name in names:
        src = keys_dir / name
        kind = safejson.not_regular(local_host.path(str(src))) if name.endswith(
            (".gpg", ".asc")) else None
        if kind is not None:  # gpg and gpgv would block on a FIFO or read a device forever
            raise BadInputError(f"{printable(src)}: is {kind}, not a key file; trusted keys "
                                "are regular files only")
        if name.endswith(".gpg"):
            out.append(src)
        elif name.endswith(".asc"):
            dest = work / f"{len(out)}-{name[:-4]}.gpg"
            res = local_host.run(["gpg", "--homedir", str(work), "--batch", "--yes", "--dearmor",
                             "-o", str(dest), str(src)], timeout=60)
            if not res.available:
                raise HwmgrError("gpg is not installed: install the 'gnupg' package")
            if not res.ok:
                raise BadInputError(f"{src}: not an armored OpenPGP key ({res.describe()})")
            out.append(dest)
    if not out:
        raise RefusedError(f"no trusted catalog keys in {keys_dir} (*.gpg, *.asc): cannot "
                           "verify a catalog signature; nothing installed")
    return out


def verify(local_host: Host, data: Path, sig: Path, rings: list[Path], work: Path) -> str:
    """Check the detached signature with gpgv; return the signing key's fingerprint."""
    argv = ["gpgv", "--homedir", str(work), "--status-fd", "1"]
    for ring in rings:
        argv += ["--keyring", str(ring)]
    res = local_host.run([*argv, str(sig), str(data)], timeout=60)
    if not res.available:
        raise HwmgrError("gpgv is not installed: install the 'gpgv' package")
    status = {line.split()[1]: line.split()[2:] for line in res.stdout.splitlines()
              if line.startswith("[GNUPG:] ") and len(line.split()) > 1}
    if "BADSIG" in status:
        raise RefusedError("bad signature: the catalog does not match its signature "
                           "(tampered or corrupted); nothing installed")
    if "NO_PUBKEY" in status or ("ERRSIG" in status and not res.ok):
        keyid = (status.get("NO_PUBKEY") or status.get("ERRSIG") or ["?"])[0]
        raise RefusedError(f"signed by key {keyid}, which is not in hwmgr's trusted keys; "
                           "nothing installed")
    if "VALIDSIG" in status and "GOODSIG" in status and res.ok:
        return status["VALIDSIG"][0]
    raise RefusedError("the signature file is not a valid OpenPGP signature of the catalog; "
                       "nothing installed")


def installed_version(loc: CatalogLocations, local_host: Host, config: Config) -> str | None:
    """catalog_version of the installed catalog, else of the shipped base catalog."""
    files = [loc.installed] if local_host.exists(str(loc.installed)) else discover(None, config)
    if not files:
        return None
    cat, errors = Catalog.build(files[:1])
    return None if errors else cat.files[0].catalog_version


def update(local_host: Host, url: str, loc: CatalogLocations, *, config: Config,
           allow_older: bool = False, ui: UpdateUI | None = None) -> Installed:
    """Download, verify, validate and install a catalog; refusals change nothing. `config`
    (the run's Config) finds the shipped catalog the downgrade rule compares with when none
    is installed; `ui` shows the downloads and each step."""
    name = url.rstrip("/").rsplit("/", 1)[-1] or "catalog"
    data = download(url, MAX_FILE_BYTES, "catalog",
                    ui.download(name, 0) if ui else None)
    try:
        sig = download(url + ".asc", MAX_SIG_BYTES, "signature",
                       ui.download(name + ".asc", 0) if ui else None)
    except NotFoundError:
        raise RefusedError(f"no signature at {url}.asc: an unsigned catalog is never "
                           "installed; nothing installed") from None
    work = Path(local_host.make_temp_dir(str(loc.installed_dir), ".update-"))
    try:
        local_host.write_bytes(str(work / "catalog.json"), data)
        local_host.write_bytes(str(work / "catalog.json.asc"), sig)
        if ui:
            ui.step("verify", f"signature with gpgv against {loc.trusted_keys}")
        fpr = verify(local_host, work / "catalog.json", work / "catalog.json.asc",
                     keyrings(local_host, loc.trusted_keys, work), work)
        if ui:
            ui.step("validate", f"catalog signed by {fpr}")
        cat, errors = Catalog.build([work / "catalog.json"])
        if errors:
            raise BadInputError(f"downloaded catalog is invalid: "
                                f"{errors[0].replace(str(work / 'catalog.json'), url)}; "
                                "nothing installed")
        new = cat.files[0].catalog_version
        old = installed_version(loc, local_host, config)
        if old is not None and calver(new) < calver(old) and not allow_older:
            raise RefusedError(f"catalog_version {new} is older than the installed {old} "
                               "(downgrade refused; --allow-older to force); nothing installed")
        current = _whole(local_host, loc.installed)
        if current == data:
            raise NothingToDo(f"catalog {new} is already installed")
        if old is not None and calver(new) == calver(old) and current is not None:
            raise RefusedError(f"catalog_version {new} is the installed one but the content "
                               "differs (a changed catalog must bump its version); "
                               "nothing installed")
        if current is not None:
            local_host.write_bytes(str(loc.installed_dir / "previous.json"), current)
            old_sig = local_host.read_bytes(str(loc.installed) + ".asc")
            if old_sig is not None:
                local_host.write_bytes(str(loc.installed_dir / "previous.json.asc"), old_sig)
        if ui:
            ui.step("install", f"catalog {new} as {loc.installed}")
        local_host.write_bytes(str(loc.installed) + ".asc", sig)
        local_host.write_bytes(str(loc.installed), data)
    finally:
        local_host.remove_tree(str(work))
    return {"url": url, "catalog_version": new, "previous_version": old, "signed_by": fpr,
            "installed": str(loc.installed)}


def _whole(local_host: Host, path: Path) -> bytes | None:
    """A catalog file's bytes, whole (a catalog may be megabytes; Host reads attributes
    bounded at 1 MiB by default, which would keep a cut copy), or None when absent; a file
    past the catalog bound is refused, never cut."""
    data = local_host.read_bytes(str(path), limit=MAX_FILE_BYTES + 1)
    if data is not None and len(data) > MAX_FILE_BYTES:
        raise BadInputError(f"{path}: larger than {MAX_FILE_BYTES} bytes; nothing changed")
    return data


def rollback(local_host: Host, loc: CatalogLocations) -> RolledBack:
    """Swap the installed catalog with the previous one (kept by `update`)."""
    prev = loc.installed_dir / "previous.json"
    data = _whole(local_host, prev)
    if data is None:
        raise NotFoundError(f"no previous catalog in {loc.installed_dir} to roll back to")
    cur = _whole(local_host, loc.installed)
    prev_sig = local_host.read_bytes(str(prev) + ".asc")
    cur_sig = local_host.read_bytes(str(loc.installed) + ".asc")
    if cur is not None:
        local_host.write_bytes(str(prev), cur)
        if cur_sig is not None:
            local_host.write_bytes(str(prev) + ".asc", cur_sig)
    if prev_sig is not None:
        local_host.write_bytes(str(loc.installed) + ".asc", prev_sig)
    local_host.write_bytes(str(loc.installed), data)
    cat, _errors = Catalog.build([loc.installed])
    return {"installed": str(loc.installed),
            "catalog_version": cat.files[0].catalog_version if cat.files else None}


def sign(local_host: Host, path: Path, key: str) -> Path:
    """Validate a catalog and write its detached armored signature `FILE.asc` with gpg."""
    _cat, errors = Catalog.build([path])
    if errors:
        raise BadInputError(f"not signing an invalid catalog: {errors[0]}")
    out = Path(str(path) + ".asc")
    res = local_host.run(["gpg", "--batch", "--yes", "--local-user", key, "--armor",
                     "--detach-sign", "-o", str(out), str(path)], timeout=120)
    if not res.available:
        raise HwmgrError("gpg is not installed: install the 'gnupg' package")
    if not res.ok:
        raise RefusedError(f"gpg could not sign {path} with key {key}: {res.describe()}")
    return out
