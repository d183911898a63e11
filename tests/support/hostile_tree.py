"""A snapshot as data: the base host of the hostile corpus, and how to write it as a
directory or as a tar archive with extra (hostile) members.

The base is a small slice of the seed-000 fixture (the be2net NIC eth2 and what is recorded
about it) plus what `plan` and `verify` read (routes, kernel headers, a modinfo record, an
armed expectation, a journal, a site config), so every verb reaches deep into a damaged copy;
it is small because ~2,000 copies are written per run.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import sqlite3
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from support import HOSTS

KVER = "2.6.32-279.el6.x86_64"
SEED = HOSTS / "seed000-ustor"
KEEP_PREFIXES = ("commands/index.json/", "commands/ethtool-i-eth2.txt/",
                 "commands/ethtool-eth2.txt/", "commands/ethtool-k-eth2.txt/",
                 "commands/modinfo-be2net.txt/", "proc/", "sys/class/net/eth2/",
                 "sys/module/be2net/", "sys/bus/pci/devices/0000:02:00.0/")
ROUTE = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
         "eth0\t00000000\t018210AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")
STATE = "var/lib/hwmgr"
EXPECT = f"{STATE}/expectations/be2net.json"
JOURNAL = f"{STATE}/journal.sqlite"
CONFIG = "etc/hwmgr/hwmgr.json"


@dataclass(frozen=True)
class Link:
    """A symlink with this target text."""

    target: str


@dataclass(frozen=True)
class Special:
    """A FIFO ('fifo'), a device node ('chr', 'blk': 1:5 reads like /dev/zero, without
    end), a UNIX socket ('sock'), or a sparse regular file of `major` GiB ('sparse')."""

    kind: str
    major: int = 1
    minor: int = 3


DIR = "<dir>"
Node = Union[bytes, Link, Special, str]  # str is only ever DIR
Tree = dict[str, Node]


def _journal_bytes() -> bytes:
    """A real, empty hwmgr journal (as `hwmgr` creates it)."""
    from hwmgr.transaction.journal import Journal

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "journal.sqlite"
        j = Journal(db, lambda **kw: sqlite3.connect(str(db), **kw))
        j.close()
        return (Path(d) / "journal.sqlite").read_bytes()


def base_tree() -> Tree:
    """The base snapshot: relative path -> content (bytes, Link, DIR)."""
    tree: Tree = {}
    for dirpath, dirs, files in os.walk(SEED, followlinks=False):
        for n in sorted(dirs + files):
            p = Path(dirpath, n)
            rel = p.relative_to(SEED).as_posix()
            if rel == "snapshot.json" or any((rel + "/").startswith(k) for k in KEEP_PREFIXES):
                if p.is_symlink():
                    tree[rel] = Link(os.readlink(p))
                elif p.is_dir():
                    tree[rel] = DIR
                else:
                    tree[rel] = p.read_bytes()
    index = [e for e in json.loads(tree["commands/index.json"])
             if f"commands/{e['stdout'].split('/')[-1]}" in tree]
    index.append({"argv": ["modinfo", "-k", KVER, "be2net"], "rc": 0,
                  "stdout": "commands/modinfo-be2net.txt"})
    tree["commands/index.json"] = json.dumps(index, indent=1).encode()
    tree["proc/net/route"] = ROUTE.encode()
    tree[f"lib/modules/{KVER}/build/Makefile"] = b"# headers\n"
    tree[EXPECT] = json.dumps({
        "format": "hwmgr-expectation", "version": 1, "driver": "be2net",
        "expected_version": "10.2.470.14", "modules": ["be2net"], "txn": 1, "kind": "upgrade",
        "kernels": {}, "boot_attempts": 0,
        "devices": [{"address": "0000:02:00.0", "vendor_id": "19a2", "device_id": "0710",
                     "interfaces": ["eth2"], "driver_version": "10.2.470.14",
                     "firmware_version": "10.0.803.19", "links": {}}]}).encode()
    tree[JOURNAL] = _journal_bytes()
    meta = json.loads(tree["snapshot.json"])  # a snapshot that carries its state dir
    meta["records"] = sorted({*meta.get("records", []), "state"})
    tree["snapshot.json"] = json.dumps(meta, indent=1).encode()
    tree[CONFIG] = json.dumps({"link_wait_seconds": 0}).encode()
    return tree


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def write_dir(tree: Tree, root: Path) -> Path:
    """Materialise a tree (parents first; a symlink is never followed while writing)."""
    root.mkdir(parents=True, exist_ok=True)
    for rel in sorted(tree, key=lambda r: (r.count("/"), r)):
        node = tree[rel]
        p = root / rel
        for par in _parents(rel):
            q = root / par
            if not q.is_symlink() and not q.exists():
                q.mkdir()
        if any((root / par).is_symlink() for par in _parents(rel)):
            continue  # a parent was replaced by a link: its old content is gone
        if node == DIR:
            p.mkdir(exist_ok=True)
        elif isinstance(node, Link):
            os.symlink(node.target, p)
        elif isinstance(node, Special):
            if node.kind == "fifo":
                os.mkfifo(p)
            elif node.kind == "sock":
                import socket

                with socket.socket(socket.AF_UNIX) as sock:
                    sock.bind(str(p))  # the socket file stays; nobody listens on it
            elif node.kind == "sparse":
                with open(p, "wb") as fh:
                    fh.truncate(node.major << 30)  # holes: no disk used, endless to read
            else:
                import stat

                mode = stat.S_IFCHR if node.kind == "chr" else stat.S_IFBLK
                os.mknod(p, mode | 0o600, os.makedev(node.major, node.minor))
        else:
            p.write_bytes(node)  # type: ignore[arg-type]
    return root


# ----------------------------------------------------------------------------- archives
Member = tuple[tarfile.TarInfo, Union[bytes, None]]


def info(name: str, kind: bytes = tarfile.REGTYPE, *, data: bytes = b"", link: str = "",
         size: int | None = None, major: int = 0, minor: int = 0) -> Member:
    """One raw tar member (any type, any name, any declared size)."""
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    ti.linkname = link
    ti.devmajor, ti.devminor = major, minor
    ti.size = len(data) if size is None else size
    ti.mtime = 1_700_000_000
    return ti, data if kind in (tarfile.REGTYPE, tarfile.AREGTYPE) else None


def tree_members(tree: Tree, prefix: str = "snap/") -> list[Member]:
    """A tree as tar members, parents first (what `hwmgr snapshot out.tar.gz` writes)."""
    out: list[Member] = [info(prefix.rstrip("/"), tarfile.DIRTYPE)] if prefix else []
    dirs = {p for rel in tree for p in _parents(rel)}
    for rel in sorted(set(tree) | dirs, key=lambda r: (r.count("/"), r)):
        node = tree.get(rel, DIR)
        name = prefix + rel
        if node == DIR:
            out.append(info(name, tarfile.DIRTYPE))
        elif isinstance(node, Link):
            out.append(info(name, tarfile.SYMTYPE, link=node.target))
        elif isinstance(node, Special):
            kind = {"fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE}
            out.append(info(name, kind[node.kind], major=node.major, minor=node.minor))
        else:
            out.append(info(name, data=node))  # type: ignore[arg-type]
    return out


def tar_bytes(members: list[Member], *, compress: bool = True, fmt: int = tarfile.PAX_FORMAT,
              encoding: str = "utf-8") -> bytes:
    """Serialise members exactly as given (no normalisation, declared sizes kept)."""
    buf = io.BytesIO()
    for ti, data in members:
        buf.write(ti.tobuf(fmt, encoding, "surrogateescape"))
        payload = data or b""
        if ti.size and payload:
            payload = payload[: ti.size]
            buf.write(payload + b"\0" * (-len(payload) % tarfile.BLOCKSIZE))
    buf.write(b"\0" * tarfile.BLOCKSIZE * 2)
    raw = buf.getvalue()
    return gzip.compress(raw, compresslevel=1, mtime=0) if compress else raw


def write_tar(members: list[Member], path: Path, **kw: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tar_bytes(members, **kw))  # type: ignore[arg-type]
    return path


def journal_with(sql: str) -> bytes:
    """A journal file changed by one SQL script (for damaged-journal cases)."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "j.sqlite"
        p.write_bytes(_journal_bytes())
        db = sqlite3.connect(p)
        db.executescript(sql)
        db.commit()
        db.close()
        return p.read_bytes()
