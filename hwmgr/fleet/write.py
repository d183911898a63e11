"""Write a fleet report's files into the directory the user named, each one whole."""

from __future__ import annotations

from pathlib import Path

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host


def write_outputs(out: Path, files: dict[str, bytes]) -> list[Path]:
    """Write {file name: bytes} into `out` (created if missing); the paths written.

    Each file is written atomically through a Host that may write only `out`, so a reader
    never sees half a file and nothing lands anywhere else.
    """
    out = out.absolute()
    host = Host("/", SubprocessRunner(), writable=[str(out)])
    host.makedirs(str(out))
    written = []
    for fname, data in files.items():
        host.write_bytes(f"{out}/{fname}", data)
        written.append(out / fname)
    return written
