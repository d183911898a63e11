"""Host snapshots (docs/formats.md): open one as a Host, or capture the running host into one.

A snapshot is a directory (or `.tar.gz` of one) mirroring the host's paths, plus
`snapshot.json` and `commands/index.json`. Capturing runs the same inventory code against the
live host through a recording Host, then writes exactly what was read and run.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path
from typing import Callable, cast

from hwmgr import __version__, safejson
from hwmgr.errors import BadInputError, NotFoundError, UsageError
from hwmgr.host.archive import extract
from hwmgr.host.runner import (
    MAX_RECORDED_BYTES,
    RC_NOT_AVAILABLE,
    RecordingRunner,
    ReplayRunner,
    SubprocessRunner,
)
from hwmgr.host.seam import Host, Recorder, SnapshotMeta
from hwmgr.output import printable

Cleanup = Callable[[], None]  # removes an extracted snapshot's temporary directory

SNAPSHOT_FORMAT = "hwmgr-snapshot"
SNAPSHOT_VERSION = 1
KEEP = ".hwmgr-keep"



def open_host(spec: str | os.PathLike[str] | None) -> tuple[Host, Cleanup | None]:
    """Build the Host for `--root`: None → this machine; a dir or .tar.gz → a snapshot."""
    if spec is None:
        return Host("/", SubprocessRunner()), None
    path = Path(spec)
    if not path.exists():
        raise NotFoundError(f"{printable(path)}: no such snapshot (directory or .tar.gz)")
    if path.is_dir():
        return _open_dir(path), None
    if path.name.endswith((".tar.gz", ".tgz", ".tar")):
        tmp = Path(tempfile.mkdtemp(prefix="hwmgr-snap-"))
        try:
            root = _extract(path, tmp)
            host = _open_dir(root, label=str(path))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return host, lambda: shutil.rmtree(tmp, ignore_errors=True)
    raise UsageError(f"{printable(path)}: --root expects a snapshot directory or a .tar.gz file")


def _open_dir(root: Path, label: str | None = None) -> Host:
    label = label or str(root)
    host = Host(root, runner=None)  # type: ignore[arg-type]  # set just below
    meta = load_meta(host, label)
    host.meta = meta

    def read_file(rel: str) -> bytes | None:
        return host.read_bytes("/" + rel, MAX_RECORDED_BYTES + 1)

    host.runner = ReplayRunner(Path(label), read_file)
    return host


def load_meta(host: Host, label: str) -> SnapshotMeta:
    """Read and check snapshot.json; a clear BadInputError when it is missing or wrong."""
    where = f"{printable(label)}/snapshot.json"
    raw = host.read_bytes("/snapshot.json")
    if raw is None:
        why = "is not a regular file" if host.exists("/snapshot.json") else "is missing"
        raise BadInputError(f"{printable(label)}: not a hwmgr snapshot (snapshot.json {why})")
    meta = safejson.load(raw, where)
    if not isinstance(meta, dict):
        raise BadInputError(f"{where}: expected a JSON object")
    if meta.get("format") != SNAPSHOT_FORMAT:
        raise BadInputError(
            f"{where}: format is {printable(repr(meta.get('format')))[:80]}, "
            f"expected {SNAPSHOT_FORMAT!r}"
        )
    version = meta.get("version")
    if version != SNAPSHOT_VERSION or isinstance(version, bool):  # true == 1 in Python
        raise BadInputError(
            f"{where}: version {printable(repr(version))[:40]} is not supported "
            f"(this hwmgr reads version {SNAPSHOT_VERSION})"
        )
    for key in ("hostname", "kernel", "captured"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            raise BadInputError(f"{where}: '{key}' must be a string")
    return cast(SnapshotMeta, meta)  # the keys read above are checked


def _extract(tar_path: Path, dest: Path) -> Path:
    """Extract a snapshot tarball safely (hwmgr.archive); return the snapshot root in it."""
    extract(tar_path, dest)
    if _is_file(dest, "snapshot.json"):
        return dest
    tops = list(os.scandir(dest))
    if len(tops) == 1 and tops[0].is_dir(follow_symlinks=False):
        return Path(tops[0].path)
    return dest


def _is_file(base: Path, name: str) -> bool:
    """A regular file, not a link to one (the archive's links are never followed)."""
    try:
        return stat.S_ISREG(os.lstat(base / name).st_mode)
    except OSError:
        return False


# ---------------------------------------------------------------------------- capture
def recording_host() -> tuple[Host, Recorder, RecordingRunner]:
    """A live Host that remembers every path read and command run."""
    rec = Recorder()
    runner = RecordingRunner(SubprocessRunner())
    return Host("/", runner, recorder=rec), rec, runner


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def write_snapshot(
    out: Path, rec: Recorder, runner: RecordingRunner, *, hostname: str | None,
    kernel: str | None, records: list[str] | None = None, sysctls: list[str] | None = None,
    netns: str | None = None,
) -> Path:
    """Write what a recording Host saw as a snapshot directory or .tar.gz at `out`;
    `records` names what was captured in full (hwmgr.capture), so readers can tell "absent on
    the host" from "not recorded"; `sysctls` names every sysctl it copied (or tried to);
    `netns` the network namespace it was taken in, when not the host's."""
    is_tar = out.name.endswith((".tar.gz", ".tgz"))
    if out.exists() and (is_tar or any(out.iterdir())):
        raise UsageError(f"{out}: already exists; choose a new path")
    work = Path(tempfile.mkdtemp(prefix="hwmgr-capture-")) if is_tar else out
    root = work / _strip_suffix(out.name) if is_tar else work
    try:
        root.mkdir(parents=True, exist_ok=True)
        for d in sorted(rec.dirs):
            (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
        for logical, target in sorted(rec.links.items()):
            p = root / logical.lstrip("/")
            p.parent.mkdir(parents=True, exist_ok=True)
            if not p.is_symlink() and not p.exists():
                os.symlink(target, p)
        for logical, data in sorted(rec.files.items()):
            p = root / logical.lstrip("/")
            if p.parent.is_symlink():
                continue
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        for d, entries in sorted(rec.dirs.items()):  # names used only as names: empty dirs
            for name in entries:
                p = root / d.lstrip("/") / name
                if not p.is_symlink() and not p.exists():
                    p.mkdir(parents=True)
                    (p / KEEP).touch()  # git (and some tar tools) drop empty directories
        index = []
        seen: set[tuple[str, ...]] = set()
        cmd_dir = root / "commands"
        for res in runner.calls:
            key = (os.path.basename(res.argv[0]), *res.argv[1:])
            if res.rc == RC_NOT_AVAILABLE or key in seen:
                continue
            seen.add(key)
            cmd_dir.mkdir(exist_ok=True)
            stem = _SAFE.sub("-", " ".join(key)).strip("-")[:80] or "cmd"
            entry: dict[str, list[str] | int | str] = {"argv": list(key), "rc": res.rc}
            for stream, text in (("stdout", res.stdout), ("stderr", res.stderr)):
                if text:
                    fname = f"{stem}.{stream}.txt" if stream == "stderr" else f"{stem}.txt"
                    (cmd_dir / fname).write_text(text)
                    entry[stream] = f"commands/{fname}"
            index.append(entry)
        if index:
            (cmd_dir / "index.json").write_text(json.dumps(index, indent=1) + "\n")
        meta = {
            "format": SNAPSHOT_FORMAT,
            "version": SNAPSHOT_VERSION,
            "hostname": hostname,
            "kernel": kernel,
            "captured": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "hwmgr": __version__,
            "records": sorted(records or []),
        }
        if sysctls is not None:
            meta["sysctls"] = list(sysctls)
        if netns:  # taken inside a network namespace that is not the host's
            meta["netns"] = netns
        (root / "snapshot.json").write_text(json.dumps(meta, indent=1) + "\n")
        if is_tar:
            out.parent.mkdir(parents=True, exist_ok=True)
            with tarfile.open(out, "w:gz") as tf:
                tf.add(root, arcname=root.name)
    finally:
        if is_tar:
            shutil.rmtree(work, ignore_errors=True)
    return out


def _strip_suffix(name: str) -> str:
    for suf in (".tar.gz", ".tgz"):
        if name.endswith(suf):
            return name[: -len(suf)] or "snapshot"
    return name
