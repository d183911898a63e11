"""Internal mirrors of vendor packages: try the site's copy first, the checksum decides.

A mirror is a directory (or any HTTP server exporting one) laid out like hwmgr's cache:
`sha256/<hex>/<file name>` (a flat `<file name>` is accepted too). The site names it with
`mirror` in the site config (`/etc/hwmgr/hwmgr.json`: an http(s) URL or a directory), with
`--mirror`, or per source in a catalog layer (`source.mirrors`: full URLs of the file).
`hwmgr mirror sync DIR` fills such a directory on a connected machine; `hwmgr mirror sync DIR
--from FILE` from files the admin already has (no network), each placed under the sha256 a
catalog source pins for it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Protocol, Sequence, TypedDict
from urllib.parse import unquote

from hwmgr import safejson
from hwmgr import urls as urlparts
from hwmgr.errors import BadInputError, HwmgrError, NotFoundError, RefusedError
from hwmgr.host.hashing import sha256_file
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.source.fetch import FetchResult, Progress, Source, fetch

if TYPE_CHECKING:  # annotations only: a fetch through a mirror loads no catalog code
    from hwmgr.catalog.entry import Source as CatalogSource
    from hwmgr.catalog.load import Catalog

INDEX = "index.json"


class MirroredFile(TypedDict):
    """One file of the mirror, as index.json lists it."""

    driver: str
    version: str
    sha256: str
    size: int
    path: str  # relative to the mirror dir
    url: Optional[str]
    origin: str  # where this run got it (cache, a mirror, the vendor URL, "file")


class Skipped(TypedDict):
    driver: str
    version: str
    reason: str


class SyncResult(TypedDict):
    """What `mirror sync` did: `data` of its JSON output."""

    dir: str
    files: list[MirroredFile]
    skipped: list[Skipped]


class SyncUI(Protocol):
    """What `sync` shows progress on (the verb's ProgressUI)."""

    def download(self, name: str, total: int) -> Progress: ...

    def retry(self, text: str) -> None: ...


def split_mirror(mirror: str | None) -> tuple[Path | None, str | None]:
    """(local mirror dir, mirror base URL): a path or file:/// URL is a dir, http(s) a URL."""
    if not mirror:
        return None, None
    if mirror.startswith(("http://", "https://")):
        return None, mirror.rstrip("/")
    if mirror.startswith("file://"):
        return Path(unquote(urlparts.path_of(mirror))), None
    return Path(mirror), None


def mirror_urls(src: Source, base: str | None, per_source: Sequence[str] = ()) -> list[str]:
    """Candidate URLs of one file: the source's own mirrors, then the site mirror's layouts."""
    out = [u for u in per_source if u.startswith(("http://", "https://"))]
    if base:
        name = src.name()
        out += [f"{base}/sha256/{src.sha256.strip().lower()}/{name}", f"{base}/{name}"]
    return out


def fetch_mirrored(host: Host, src: Source, cache_dir: str, *, mirror: str | None = None,
                   per_source: Sequence[str] = (), offline: bool = False,
                   progress: Progress | None = None,
                   on_retry: Callable[[str], None] | None = None,
                   who: str = "DRIVER VERSION") -> FetchResult:
    """`fetch`, trying the mirror URLs first. A mirror that fails (missing, wrong checksum,
    unreachable) is skipped; the vendor URL is the last resort (unless offline). A failure
    to get the file at all names the offline commands that would have served it (`who`:
    the driver and version, for those commands)."""
    local, base = split_mirror(mirror)
    for path in per_source:
        if path.startswith("file://") and local is None:
            local = Path(unquote(urlparts.path_of(path))).parent
    urls = [] if offline else mirror_urls(src, base, per_source)
    tried: list[str] = []
    for url in urls:
        try:
            res = fetch(host, replace(src, url=url, allow_http=True, filename=src.name()),
                        cache_dir, mirror=local, retries=1, backoff=0.2, progress=progress,
                        on_retry=on_retry)
        except HwmgrError as exc:  # not there, bad copy, unreachable: the next one decides
            tried.append(f"{url}: {exc}")
            continue
        if res.origin == "network":
            res.origin = "mirror"
        return res
    try:
        return fetch(host, src, cache_dir, offline=offline, mirror=local, progress=progress,
                     on_retry=on_retry)
    except HwmgrError as exc:
        if tried:
            exc.message = f"{exc.message} (mirrors tried first: {'; '.join(tried)})"
        if not isinstance(exc, RefusedError):  # not a bad copy: the file was not reachable
            exc.message = f"{exc.message}; {offline_hint(src.name(), who)}"
        raise


def offline_hint(name: str, who: str) -> str:
    """The offline commands that serve a vendor file without the network (docs/catalog.md,
    "The whole path")."""
    return (f"without the network, `hwmgr catalog trust {who} --file {name}` keeps the file "
            f"in the cache, or `hwmgr mirror sync DIR --from {name}` puts it in a mirror for "
            "`--offline --mirror DIR`")


def sync(catalog: Catalog, dest: Path, *, driver: str | None = None, version: str | None = None,
         mirror: str | None = None, ui: SyncUI | None = None) -> SyncResult:
    """Download every verified catalog source (or one driver/version) into `dest` in the
    mirror layout, and write `dest/index.json` (what is there and where it came from).
    `ui` (a ProgressUI: `download(name, size)`, `retry(text)`) shows each file's progress."""
    dest = dest.absolute()
    local_host = Host("/", SubprocessRunner(), writable=[str(dest)])  # only the dir named
    done: list[MirroredFile] = []
    skipped: list[Skipped] = []
    for name in catalog.names():
        if driver and name != driver:
            continue
        for ver, info in catalog.entry(name).get("versions", {}).items():
            raw = info.get("source")
            if (version and ver != version) or not raw:
                continue
            if raw.get("verified") is False or not raw.get("sha256"):
                skipped.append({"driver": name, "version": ver,
                                "reason": "source not verified (no sha256): run "
                                          "'hwmgr catalog trust' first"})
                continue
            src = Source.from_catalog(raw, where=f"{name} {ver} source")
            local_host.makedirs(str(dest))  # only once there is something to put there
            res = fetch_mirrored(local_host, src, str(dest), mirror=mirror,
                                 per_source=raw.get("mirrors", ()),
                                 progress=ui.download(src.name(), src.size) if ui else None,
                                 on_retry=ui.retry if ui else None)
            done.append({"driver": name, "version": ver, "sha256": res.sha256, "size": res.size,
                         "path": str(res.path.relative_to(dest)), "url": src.url,
                         "origin": res.origin})
    if not done:  # exit 3 and DIR untouched: an empty index.json is no mirror
        what = " ".join(x for x in (driver, version) if x) or "the catalog"
        why = "; ".join(f"{s['driver']} {s['version']}: {s['reason']}" for s in skipped)
        raise NotFoundError(f"nothing to sync for {what}" + (f" ({why})" if why else ""))
    _write_index(local_host, dest, done)
    return {"dir": str(dest), "files": done, "skipped": skipped}


def _write_index(local_host: Host, dest: Path, done: list[MirroredFile]) -> None:
    """Write `dest/index.json`: this run's files, then earlier entries still on disk."""
    files: list[Mapping[str, object]] = list(done)
    raw = local_host.read_bytes(f"{dest}/{INDEX}")
    try:
        old = safejson.parse(raw) if raw is not None else {}
    except safejson.JSONError:  # also deep nesting and 5,000-digit numbers
        old = {}  # the index is a listing hwmgr rewrites, not an input: a garbled one goes
    seen = {(f["driver"], f["version"]) for f in done}
    earlier = old.get("files") if isinstance(old, dict) else None
    for f in earlier if isinstance(earlier, list) else []:
        if (isinstance(f, dict) and isinstance(f.get("path"), str)
                and isinstance(f.get("driver"), str) and isinstance(f.get("version"), str)
                and (f["driver"], f["version"]) not in seen
                and ".." not in Path(f["path"]).parts and not Path(f["path"]).is_absolute()
                and (dest / f["path"]).is_file()):
            files.append(f)
    index = {"format": "hwmgr-mirror", "version": 1, "files": files}
    local_host.write_bytes(f"{dest}/{INDEX}", (json.dumps(index, indent=1) + "\n").encode())


def _sources(catalog: Catalog, driver: str | None, version: str | None
             ) -> list[tuple[str, str, CatalogSource]]:
    """(driver, version, source object) of every catalog source, or of the one named."""
    out: list[tuple[str, str, CatalogSource]] = []
    for name in catalog.names():
        if driver and name != driver:
            continue
        for ver, info in catalog.entry(name).get("versions", {}).items():
            source = info.get("source")
            if source and not (version and ver != version):
                out.append((name, ver, source))
    if driver and not out:
        raise NotFoundError(f"nothing to sync for {driver}{' ' + version if version else ''}:"
                            " no such source in the catalog")
    return out


def _pinned(raw: CatalogSource) -> str | None:
    """The sha256 a source pins, or None when it is not verified."""
    sha = raw.get("sha256")
    return None if raw.get("verified") is False or not isinstance(sha, str) else sha.lower()


def _no_match(path: Path, sha: str, sources: list[tuple[str, str, CatalogSource]],
              named: bool) -> str:
    """One line: FILE, its sha256, and what the sources it could be (same file name, or the
    --driver/--to named) pin."""
    def name(raw: CatalogSource) -> str:
        return Source(str(raw.get("url", "")), "", 0, filename=raw.get("filename")).name()

    near = [s for s in sources if name(s[2]) == path.name] or (sources if named else [])
    unpinned = "no sha256 (not verified: run hwmgr catalog trust first)"
    pins = ", ".join(f"{d} {v} expects {_pinned(raw) or unpinned}" for d, v, raw in near)
    what = f"; {pins}" if pins else (" (no catalog source is named like it; name one with "
                                     "--driver/--to)")
    return (f"{path}: sha256 {sha} matches no pinned catalog source{what}; nothing copied "
            "into the mirror")


def sync_from(catalog: Catalog, dest: Path, files: Sequence[Path], *, driver: str | None = None,
              version: str | None = None) -> SyncResult:
    """Place files the admin already has into `dest` (mirror layout, no network): each under
    every source whose pinned sha256 it has. All files are checked before anything is
    copied; one that matches no pinned source is refused (exit 9) and nothing changes."""
    dest = dest.absolute()
    sources = _sources(catalog, driver, version)
    plan = []
    for path in files:
        path = Path(path).absolute()
        if not path.exists():
            raise NotFoundError(f"{path}: no such file")
        if not path.is_file():
            raise BadInputError(f"{path}: not a regular file")
        sha, size = sha256_file(path), path.stat().st_size
        hits = [(d, v, raw) for d, v, raw in sources if _pinned(raw) == sha]
        if not hits:
            raise RefusedError(_no_match(path, sha, sources, bool(driver)))
        for d, v, raw in hits:
            src = Source.from_catalog(raw, where=f"{d} {v} source")
            if src.size != size:
                raise RefusedError(f"{path}: sha256 matches {d} {v}, but its size is {size} "
                                   f"bytes, not the pinned {src.size}; nothing copied")
            plan.append((path, d, v, src))
    local_host = Host("/", SubprocessRunner(), writable=[str(dest)])  # only the dir named
    done: list[MirroredFile] = []
    for path, d, v, src in plan:
        rel = f"sha256/{src.sha256.lower()}/{src.name()}"
        local_host.copy_in(path, f"{dest}/{rel}", mode=0o644)
        if sha256_file(dest / rel) != src.sha256.lower():  # the file changed under us
            local_host.remove(f"{dest}/{rel}")
            raise RefusedError(f"{path}: changed while it was copied into {dest}; removed")
        done.append({"driver": d, "version": v, "sha256": src.sha256.lower(),
                     "size": src.size, "path": rel, "url": src.url, "origin": "file"})
    _write_index(local_host, dest, done)
    return {"dir": str(dest), "files": done, "skipped": []}


def source_mirrors(raw: Mapping[str, object]) -> list[str]:
    """The per-source mirror URLs of a catalog source object."""
    mirrors = raw.get("mirrors", [])
    return [u for u in mirrors if isinstance(u, str)] if isinstance(mirrors, list) else []
