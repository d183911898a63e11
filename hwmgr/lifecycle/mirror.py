"""Internal mirrors of vendor packages: try the site's copy first, the checksum decides.

A mirror is a directory (or any HTTP server exporting one) laid out like hwmgr's cache:
`sha256/<hex>/<file name>` (a flat `<file name>` is accepted too). The site names it with
`mirror` in the site config (`/etc/hwmgr/hwmgr.json`: an http(s) URL or a directory), with
`--mirror`, or per source in a catalog layer (`source.mirrors`: full URLs of the file).
`hwmgr mirror sync DIR` fills such a directory on a connected machine.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence
from urllib.parse import unquote, urlsplit

from hwmgr.errors import HwmgrError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.lifecycle.fetch import FetchResult, Progress, Source, fetch

INDEX = "index.json"


def split_mirror(mirror: str | None) -> tuple[Path | None, str | None]:
    """(local mirror dir, mirror base URL): a path or file:/// URL is a dir, http(s) a URL."""
    if not mirror:
        return None, None
    if mirror.startswith(("http://", "https://")):
        return None, mirror.rstrip("/")
    if mirror.startswith("file://"):
        return Path(unquote(urlsplit(mirror).path)), None
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
                   progress: Progress | None = None) -> FetchResult:
    """`fetch`, trying the mirror URLs first. A mirror that fails (missing, wrong checksum,
    unreachable) is skipped; the vendor URL is the last resort (unless offline)."""
    local, base = split_mirror(mirror)
    for path in per_source:
        if path.startswith("file://") and local is None:
            local = Path(unquote(urlsplit(path).path)).parent
    urls = [] if offline else mirror_urls(src, base, per_source)
    tried: list[str] = []
    for url in urls:
        try:
            res = fetch(host, replace(src, url=url, allow_http=True, filename=src.name()),
                        cache_dir, mirror=local, retries=1, backoff=0.2, progress=progress)
        except HwmgrError as exc:  # not there, bad copy, unreachable: the next one decides
            tried.append(f"{url}: {exc}")
            continue
        if res.origin == "network":
            res.origin = "mirror"
        return res
    try:
        return fetch(host, src, cache_dir, offline=offline, mirror=local, progress=progress)
    except HwmgrError as exc:
        if tried:
            exc.message = f"{exc.message} (mirrors tried first: {'; '.join(tried)})"
        raise


def sync(catalog: Any, dest: Path, *, driver: str | None = None, version: str | None = None,
         mirror: str | None = None) -> dict[str, Any]:
    """Download every verified catalog source (or one driver/version) into `dest` in the
    mirror layout, and write `dest/index.json` (what is there and where it came from)."""
    dest = dest.absolute()
    local_host = Host("/", SubprocessRunner(), writable=[str(dest)])  # only the dir named
    local_host.makedirs(str(dest))
    done, skipped = [], []
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
            res = fetch_mirrored(local_host, src, str(dest), mirror=mirror,
                                 per_source=raw.get("mirrors", ()))
            done.append({"driver": name, "version": ver, "sha256": res.sha256, "size": res.size,
                         "path": str(res.path.relative_to(dest)), "url": src.url,
                         "origin": res.origin})
    if driver and not done and not skipped:
        raise HwmgrError(f"nothing to sync for {driver}{' ' + version if version else ''}",
                         exit_code=3)
    index = {"format": "hwmgr-mirror", "version": 1, "files": done}
    local_host.write_bytes(f"{dest}/{INDEX}", (json.dumps(index, indent=1) + "\n").encode())
    return {"dir": str(dest), "files": done, "skipped": skipped}


def source_mirrors(raw: Mapping[str, Any]) -> list[str]:
    """The per-source mirror URLs of a catalog source object."""
    return [u for u in raw.get("mirrors", []) if isinstance(u, str)]
