"""Host snapshots (docs/formats.md): open one as a Host, or capture the running host into one.

A snapshot is a directory (or `.tar.gz` of one) mirroring the host's paths, plus
`snapshot.json` and `commands/index.json`. Capturing runs the same inventory code against the
live host through a recording Host, then writes exactly what was read and run.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from hwmgr.errors import BadInputError, NotFoundError, UsageError
from hwmgr.host.runner import RC_NOT_AVAILABLE, RecordingRunner, ReplayRunner, SubprocessRunner
from hwmgr.host.seam import Host, Recorder

if TYPE_CHECKING:
    import tarfile

SNAPSHOT_FORMAT = "hwmgr-snapshot"
SNAPSHOT_VERSION = 1
MAX_TAR_BYTES = 512 << 20
MAX_TAR_MEMBERS = 200_000
KEEP = ".hwmgr-keep"

Cleanup = Callable[[], None]


def open_host(spec: str | os.PathLike[str] | None) -> tuple[Host, Cleanup | None]:
    """Build the Host for `--root`: None → this machine; a dir or .tar.gz → a snapshot."""
    if spec is None:
        return Host("/", SubprocessRunner()), None
    path = Path(spec)
    if not path.exists():
        raise NotFoundError(f"{path}: no such snapshot (directory or .tar.gz)")
    if path.is_dir():
        return _open_dir(path), None
    if path.name.endswith((".tar.gz", ".tgz", ".tar")):
        import shutil  # tar handling only: keep everyday start-up light
        import tempfile

        tmp = Path(tempfile.mkdtemp(prefix="hwmgr-snap-"))
        try:
            root = _extract(path, tmp)
            host = _open_dir(root, label=str(path))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return host, lambda: shutil.rmtree(tmp, ignore_errors=True)
    raise UsageError(f"{path}: --root expects a snapshot directory or a .tar.gz file")


def _open_dir(root: Path, label: str | None = None) -> Host:
    label = label or str(root)
    host = Host(root, runner=None)  # type: ignore[arg-type]  # set just below
    meta = load_meta(host, label)
    host.meta = meta

    def read_file(rel: str) -> bytes | None:
        return host.read_bytes("/" + rel)

    host.runner = ReplayRunner(Path(label), read_file)
    return host


def load_meta(host: Host, label: str) -> dict[str, Any]:
    """Read and check snapshot.json; a clear BadInputError when it is missing or wrong."""
    raw = host.read_bytes("/snapshot.json")
    if raw is None:
        raise BadInputError(f"{label}: not a hwmgr snapshot (snapshot.json is missing)")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInputError(f"{label}/snapshot.json: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise BadInputError(f"{label}/snapshot.json: expected a JSON object")
    if meta.get("format") != SNAPSHOT_FORMAT:
        raise BadInputError(
            f"{label}/snapshot.json: format is {meta.get('format')!r}, expected {SNAPSHOT_FORMAT!r}"
        )
    if meta.get("version") != SNAPSHOT_VERSION:
        raise BadInputError(
            f"{label}/snapshot.json: version {meta.get('version')!r} is not supported "
            f"(this hwmgr reads version {SNAPSHOT_VERSION})"
        )
    for key in ("hostname", "kernel", "captured"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            raise BadInputError(f"{label}/snapshot.json: '{key}' must be a string")
    return meta


def _extract(tar_path: Path, dest: Path) -> Path:
    """Extract a snapshot tarball after checking every member; return the snapshot root."""
    import shutil
    import tarfile
    try:
        with tarfile.open(tar_path, "r:*") as tf:
            members = []
            total = 0
            for m in tf:
                _check_member(tar_path, m)
                total += max(m.size, 0)
                members.append(m)
                if total > MAX_TAR_BYTES or len(members) > MAX_TAR_MEMBERS:
                    raise BadInputError(f"{tar_path}: archive is too large for a snapshot")
            for m in members:
                target = dest / m.name
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif m.issym():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(m.linkname, target)
                elif m.isfile():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    src = tf.extractfile(m)
                    if src is None:
                        continue
                    with src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out)
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise BadInputError(f"{tar_path}: cannot read snapshot archive ({exc})") from None
    if (dest / "snapshot.json").exists():
        return dest
    tops = [p for p in dest.iterdir()]
    if len(tops) == 1 and tops[0].is_dir() and not tops[0].is_symlink():
        return tops[0]
    return dest


def _check_member(tar_path: Path, m: tarfile.TarInfo) -> None:
    name = m.name
    parts = name.split("/")
    if name.startswith("/") or ".." in parts:
        raise BadInputError(f"{tar_path}: member '{name}' escapes the snapshot; refusing to open")
    if not (m.isdir() or m.isfile() or m.issym()):
        kind = "hard link" if m.islnk() else "device node or special file"
        raise BadInputError(f"{tar_path}: member '{name}' is a {kind}; refusing to open")


# ---------------------------------------------------------------------------- capture
def recording_host() -> tuple[Host, Recorder, RecordingRunner]:
    """A live Host that remembers every path read and command run."""
    rec = Recorder()
    runner = RecordingRunner(SubprocessRunner())
    return Host("/", runner, recorder=rec), rec, runner


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def write_snapshot(
    out: Path, rec: Recorder, runner: RecordingRunner, *, hostname: str | None,
    kernel: str | None,
) -> Path:
    """Write what a recording Host saw as a snapshot directory or .tar.gz at `out`."""
    import datetime as _dt
    import shutil
    import tarfile
    import tempfile
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
            entry: dict[str, Any] = {"argv": list(key), "rc": res.rc}
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
            "captured": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
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
