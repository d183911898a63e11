"""Write a fleet report's files into the directory the user named, each one whole."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Union

from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host

Content = Union[bytes, Iterable[bytes]]  # a file's bytes, or its pieces in order


def write_outputs(out: Path, files: dict[str, Content]) -> list[Path]:
    """Write {file name: bytes or pieces of bytes} into `out` (created if missing); the paths
    written.

    Each file is written atomically through a Host that may write only `out`, so a reader
    never sees half a file and nothing lands anywhere else; a file given in pieces is
    written as they are made (the report of 10,000 real hosts is 100-300 MB), never whole
    in memory.
    """
    out = out.absolute()
    host = Host("/", SubprocessRunner(), writable=[str(out)])
    host.makedirs(str(out))
    written = []
    for fname, data in files.items():
        if isinstance(data, bytes):
            host.write_bytes(f"{out}/{fname}", data)
        else:
            with host.open_atomic(f"{out}/{fname}") as fh:
                for piece in data:
                    fh.write(piece)
        written.append(out / fname)
    return written
