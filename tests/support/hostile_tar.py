"""Generators of hostile snapshot archives (kinds `tar-*`): escapes of every kind, special
files, bombs, truncation, byte flips and odd names, around the base host's members."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import random
import stat
import tarfile
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Callable

from support.hostile import Case, Sandbox
from support.hostile_snap import DEV, EXPECT, JOURNAL, OUTPUT, VERB_ORDER, VERBS, base, codes
from support.hostile_tree import Member, info, tar_bytes, tree_members, write_dir

ARCHIVE = "snap.tar.gz"
Members = Callable[[Sandbox], list[Member]]
POSITIONS = ("first", "after-meta", "last")


def _rot(i: int) -> str:
    return VERB_ORDER[i % len(VERB_ORDER)]


@lru_cache(maxsize=1)
def base_members() -> tuple[Member, ...]:
    return tuple(tree_members(base()))


def insert(extra: list[Member], where: str) -> list[Member]:
    """The base members with `extra` at the start, after snapshot.json, or at the end."""
    ms = list(base_members())
    if where == "first":
        at = 1
    elif where == "after-meta":
        at = next(i for i, (ti, _) in enumerate(ms) if ti.name == "snap/snapshot.json") + 1
    else:
        at = len(ms)
    return ms[:at] + extra + ms[at:]


def tar_case(kind: str, name: str, members: Members, verb: str, refuse: bool | None,
             names: tuple[str, ...] = (), any_names: tuple[str, ...] = (),
             fname: str = ARCHIVE, compress: bool = True, fmt: int = tarfile.PAX_FORMAT) -> Case:
    """A case that hands `members` (as a .tar.gz) to one --root verb."""

    def build(work: Path, sb: Sandbox) -> list[str]:
        path = work / fname
        path.write_bytes(tar_bytes(members(sb), compress=compress, fmt=fmt))
        return VERBS[verb](str(path))

    return Case(kind, f"{kind}/{name}/{verb}", build, codes(verb, refuse),
                (fname, *names), any_names)


def raw_case(kind: str, name: str, make: Callable[[Path, Sandbox], Path], verb: str,
             allowed: frozenset[int], names: tuple[str, ...] = (),
             any_names: tuple[str, ...] = ()) -> Case:
    """A case whose --root is whatever `make` puts in the work dir."""

    def build(work: Path, sb: Sandbox) -> list[str]:
        return VERBS[verb](str(make(work, sb)))

    return Case(kind, f"{kind}/{name}/{verb}", build, allowed, names, any_names)


# damage anywhere in an archive: the error names the archive, or the damaged file by its
# path on the host (the journal's errors do: /var/lib/hwmgr/journal.sqlite)
ANYWHERE = (ARCHIVE, "snap.tar", "/var/lib/hwmgr/")


def _typed(name: str, kind: str, link: str = "x") -> Member:
    if kind == "dir":
        return info(name, tarfile.DIRTYPE)
    if kind == "symlink":
        return info(name, tarfile.SYMTYPE, link=link)
    return info(name, data=b"pwned\n")


# ----------------------------------------------------------------------------- escapes
DOTDOT = ["../evil", "snap/../../evil", "snap/sys/../../../evil", "./../evil", "snap/./../..",
          "..", "snap/..", "snap/a/../../../../../../evil", "../" * 20 + "evil"]


def dotdot_cases() -> list[Case]:
    out, i = [], 0
    for name in DOTDOT:
        for kind in ("file", "dir", "symlink"):
            for pos in POSITIONS:
                out.append(tar_case("tar-dotdot", f"{name}:{kind}:{pos}",
                                    lambda sb, n=name, k=kind, p=pos: insert([_typed(n, k)], p),
                                    _rot(i), True, (name,)))
                i += 1
    return out


def absolute_cases() -> list[Case]:
    out, i = [], 0
    names: list[Callable[[Sandbox], str]] = [
        lambda sb: "/evil", lambda sb: "/etc/cron.d/hwmgr-evil",
        lambda sb: str(sb.canary / "pwned"), lambda sb: "//evil", lambda sb: "/./evil",
        lambda sb: "/snap/snapshot.json"]
    for k, namef in enumerate(names):
        for kind in ("file", "dir", "symlink"):
            for pos in POSITIONS:
                out.append(tar_case(
                    "tar-absolute", f"name{k}:{kind}:{pos}",
                    lambda sb, f=namef, t=kind, p=pos: insert([_typed(f(sb), t)], p), _rot(i),
                    True))
                i += 1
    return out


def _canary_targets() -> list[tuple[str, Callable[[Sandbox, str], str]]]:
    # relative: from <tmp>/hwmgr-snap-XXXX/<link's dir> up to base/, then canary/
    return [
        ("abs-dir", lambda sb, link: str(sb.canary)),
        ("rel-dir", lambda sb, link: "../" * (link.count("/") + 3) + "canary"),
        ("climb-dir", lambda sb, link: "../" * 40 + str(sb.canary).lstrip("/")),
        ("abs-file", lambda sb, link: str(sb.canary / "secret")),
        ("abs-subdir", lambda sb, link: str(sb.canary / "dir")),
    ]


def symlink_write_cases() -> list[Case]:
    """A link out of the snapshot, then a member written through it."""
    out, i = [], 0
    follow: list[tuple[str, Callable[[str], Member]]] = [
        ("file-under", lambda L: info(f"{L}/pwned", data=b"pwned\n")),
        ("dir-under", lambda L: info(f"{L}/newdir", tarfile.DIRTYPE)),
        ("same-name", lambda L: info(L, data=b"pwned\n")),
        ("link-under", lambda L: info(f"{L}/x", tarfile.SYMTYPE, link="y")),
    ]
    for link in ("snap/l", "snap/sys/bus/l", "snap/commands/l"):
        for tname, target in _canary_targets():
            for fname, fmake in follow:
                def members(sb: Sandbox, L: str = link, t: Callable = target,
                            f: Callable = fmake) -> list[Member]:
                    return insert([info(L, tarfile.SYMTYPE, link=t(sb, L)), f(L)], "last")

                f_name = fmake(link)[0].name
                out.append(tar_case("tar-symlink-write", f"{link}->{tname}:{fname}", members,
                                    _rot(i), True, any_names=(link, f_name)))
                i += 1
    return out


def symlink_over_cases() -> list[Case]:
    """A link that replaces a directory (or the top directory) that later members fill."""
    S = tarfile.SYMTYPE

    def dir_then_link(sb: Sandbox) -> list[Member]:
        return insert([info("snap/x", tarfile.DIRTYPE), info("snap/x", S, link=str(sb.canary)),
                       info("snap/x/pwned", data=b"p\n")], "last")

    def file_then_link(sb: Sandbox) -> list[Member]:
        return insert([info("snap/a", data=b"a\n"),
                       info("snap/a", S, link=str(sb.canary / "secret")),
                       info("snap/a", data=b"pwned\n")], "last")

    def chain(sb: Sandbox) -> list[Member]:
        return insert([info("snap/l1", S, link="l2"), info("snap/l2", S, link=str(sb.canary)),
                       info("snap/l1/pwned", data=b"p\n")], "last")

    def top(sb: Sandbox) -> list[Member]:
        return [info("snap", S, link=str(sb.canary))] + list(base_members())[1:]

    def before(name: str) -> Members:
        def m(sb: Sandbox) -> list[Member]:
            ms = list(base_members())
            at = next(i for i, (ti, _) in enumerate(ms) if ti.name == name)
            return ms[:at] + [info(name, S, link=str(sb.canary / "dir"))] + ms[at + 1:]
        return m

    def up(n: int) -> Members:
        return lambda sb: insert([info("snap/up", S, link="/".join([".."] * n)),
                                  info("snap/up/evil", data=b"p\n")], "last")

    def dot(sb: Sandbox) -> list[Member]:
        return insert([info("snap/x", S, link="."), info("snap/x/x/x/evil", data=b"p\n")],
                      "last")

    spots: list[tuple[str, Members, bool | None]] = [
        ("dir-then-link", dir_then_link, True), ("file-then-link", file_then_link, True),
        ("chain", chain, True), ("top-dir", top, True), ("before-sys", before("snap/sys"), True),
        ("before-commands", before("snap/commands"), True),
        ("before-state", before("snap/var/lib/hwmgr"), True), ("up1", up(1), None),
        ("up2", up(2), True), ("up3", up(3), True), ("dot", dot, None)]
    return [tar_case("tar-symlink-over", name, m, verb, refuse)
            for name, m, refuse in spots for verb in VERB_ORDER]


def hardlink_cases() -> list[Case]:
    out, i = [], 0
    targets: list[Callable[[Sandbox], str]] = [
        lambda sb: str(sb.canary / "secret"), lambda sb: "/etc/passwd",
        lambda sb: "../canary/secret", lambda sb: "snap/snapshot.json", lambda sb: "snap/sys",
        lambda sb: "snap/nonexistent", lambda sb: ""]
    for k, tf in enumerate(targets):
        for name in ("snap/hl", f"snap/{DEV}/vendor"):
            for pos in POSITIONS:
                out.append(tar_case(
                    "tar-hardlink", f"t{k}:{name}:{pos}",
                    lambda sb, t=tf, n=name, p=pos: insert(
                        [info(n, tarfile.LNKTYPE, link=t(sb))], p), _rot(i), True, (name,)))
                i += 1
    return out


def device_cases() -> list[Case]:
    out, i = [], 0
    for kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        for major, minor in ((1, 3), (1, 5), (8, 0), (0, 0)):
            for name in ("snap/dev/x", "snap/snapshot.json", f"snap/{DEV}/vendor"):
                out.append(tar_case(
                    "tar-device", f"{kind!r}{major}:{minor}:{name}",
                    lambda sb, k=kind, a=major, b=minor, n=name: insert(
                        [info(n, k, major=a, minor=b)], "last"), _rot(i), True, (name,)))
                i += 1
    return out


def fifo_cases() -> list[Case]:
    out, i = [], 0
    names = ["snap/snapshot.json", "snap/commands/index.json", f"snap/{OUTPUT}",
             f"snap/{DEV}/vendor", "snap/newfifo", f"snap/{EXPECT}", f"snap/{JOURNAL}"]
    for name in names:
        for pos in ("first", "last"):
            out.append(tar_case("tar-fifo", f"{name}:{pos}",
                                lambda sb, n=name, p=pos: insert([info(n, tarfile.FIFOTYPE)], p),
                                _rot(i), True, (name,)))
            i += 1
    for t in (b"Z", b"9"):  # unknown member types: neither file, dir nor link
        for name in ("snap/odd", "snap/snapshot.json"):
            out.append(tar_case("tar-fifo", f"type{t!r}:{name}",
                                lambda sb, k=t, n=name: insert([info(n, k)], "last"),
                                _rot(i), True, (name,)))
            i += 1
    return out


# ----------------------------------------------------------------------------- bombs
@lru_cache(maxsize=1)
def _honest_bomb() -> bytes:
    """A real gzip bomb: one 520 MiB member of zeros (about 0.5 MiB compressed)."""
    size = 520 << 20
    head = info("snap/bomb", size=size)[0].tobuf(tarfile.PAX_FORMAT, "utf-8", "strict")
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [comp.compress(b"".join(m[0].tobuf(tarfile.PAX_FORMAT, "utf-8", "strict") + (
        (m[1] or b"") + b"\0" * (-len(m[1] or b"") % 512)) for m in base_members()[:4])),
        comp.compress(head)]
    zeros = bytes(1 << 20)
    for _ in range(size >> 20):
        parts.append(comp.compress(zeros))
    parts.append(comp.compress(bytes(1024)))
    parts.append(comp.flush())
    return b"".join(parts)


COUNT_LIMIT = 2_000  # hwmgr.host.archive.MAX_MEMBERS, lowered for the count bomb


@lru_cache(maxsize=1)
def _count_bomb() -> bytes:
    """More members than the (lowered) limit: COUNT_LIMIT + 1 empty files."""
    ti = tarfile.TarInfo("snap/m/000000")
    ti.mtime = 1_700_000_000
    head = bytearray(ti.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict"))
    buf = io.BytesIO()
    name_at = head.index(b"000000")
    for k in range(COUNT_LIMIT + 1):
        head[name_at:name_at + 6] = b"%06d" % k
        head[148:156] = b" " * 8
        head[148:156] = b"%06o\0 " % sum(head)
        buf.write(head)
    buf.write(bytes(1024))
    return gzip.compress(buf.getvalue(), compresslevel=1, mtime=0)


def bomb_cases() -> list[Case]:
    out = []
    sizes = [(513 << 20), 10 << 30, 8 ** 11 - 1, 2 ** 63]
    for size in sizes:
        for pos in ("first", "last"):
            out.append(tar_case("tar-bomb", f"declared-{size}:{pos}",
                                lambda sb, s=size, p=pos: insert(
                                    [info("snap/big", data=b"x" * 10, size=s)], p),
                                "inventory", True))
    out.append(tar_case("tar-bomb", "six-100MiB", lambda sb: insert(
        [info(f"snap/b{k}", data=b"x", size=100 << 20) for k in range(6)], "last"),
        "inventory", True))

    def honest(work: Path, sb: Sandbox) -> Path:
        (work / ARCHIVE).write_bytes(_honest_bomb())
        return work / ARCHIVE

    def count(work: Path, sb: Sandbox) -> Path:
        (work / ARCHIVE).write_bytes(_count_bomb())
        return work / ARCHIVE

    def zero_stream(work: Path, sb: Sandbox) -> Path:
        (work / ARCHIVE).write_bytes(gzip.compress(bytes(64 << 20), compresslevel=1))
        return work / ARCHIVE

    for name, make in (("gzip-520MiB", honest), ("zeros-64MiB", zero_stream)):
        out.append(raw_case("tar-bomb", name, make, "inventory", frozenset({8}), (ARCHIVE,)))
    many = raw_case("tar-bomb", f"{COUNT_LIMIT + 1}-members", count, "inventory",
                    frozenset({8}), (ARCHIVE,))
    many.patches = (("hwmgr.host.archive", "MAX_MEMBERS", COUNT_LIMIT),)
    out.append(many)
    return out


def deep_cases() -> list[Case]:
    """Very deep paths, over-long names and link targets, long link chains."""
    spots: list[tuple[str, Members]] = [
        ("1200-levels", lambda sb: insert([info("snap/" + "a/" * 1200 + "x", data=b"x")], "last")),
        ("3000-levels", lambda sb: insert([info("snap/" + "a/" * 3000 + "x", data=b"x")], "last")),
        ("300-dir-members", lambda sb: insert(
            [info("snap/" + "d/" * k + "d", tarfile.DIRTYPE) for k in range(300)], "last")),
        ("name-300", lambda sb: insert([info("snap/" + "n" * 300, data=b"x")], "last")),
        ("target-5000", lambda sb: insert(
            [info("snap/l", tarfile.SYMTYPE, link="t/" * 2500)], "last")),
        ("chain-60", lambda sb: insert(
            [info(f"snap/c{k}", tarfile.SYMTYPE, link=f"c{k + 1}") for k in range(60)],
            "last")),
    ]
    return [tar_case("tar-deep", name, m, verb, None)
            for name, m in spots for verb in VERB_ORDER]


# ----------------------------------------------------------------------------- damage
def truncated_cases() -> list[Case]:
    rnd = random.Random("tar-truncated")
    out, i = [], 0
    for compress, n in ((True, 60), (False, 30)):
        whole = tar_bytes(list(base_members()), compress=compress)
        fname = ARCHIVE if compress else "snap.tar"
        for _ in range(n):
            cut = rnd.randrange(0, len(whole))
            out.append(raw_case("tar-truncated", f"{fname}@{cut}",
                                _bytes_at(fname, whole[:cut]), _rot(i),
                                codes(_rot(i), None), any_names=ANYWHERE))
            i += 1
    return out


def _bytes_at(fname: str, data: bytes) -> Callable[[Path, Sandbox], Path]:
    def make(work: Path, sb: Sandbox) -> Path:
        (work / fname).write_bytes(data)
        return work / fname

    return make


def flip_cases() -> list[Case]:
    rnd = random.Random("tar-flip")
    out, i = [], 0
    raw = tar_bytes(list(base_members()), compress=False)
    packed = gzip.compress(raw, compresslevel=1, mtime=0)
    for where, n in (("gz", 60), ("tar", 70)):
        for _ in range(n):
            buf = bytearray(packed if where == "gz" else raw)
            flips = [rnd.randrange(len(buf)) for _ in range(rnd.randint(1, 8))]
            for pos in flips:
                buf[pos] ^= 1 << rnd.randrange(8)
            data = bytes(buf) if where == "gz" else gzip.compress(bytes(buf), 1, mtime=0)
            out.append(raw_case("tar-flip", f"{where}@{flips}", _bytes_at(ARCHIVE, data),
                                _rot(i), codes(_rot(i), None), any_names=ANYWHERE))
            i += 1
    return out


CTRL = ["\x1b[31m", "\n", "\r", "\x07", "\x9b2J", "\x7f"]


def name_cases() -> list[Case]:
    """Undecodable bytes and control characters in member names and link targets."""
    out, i = [], 0
    bad = ["\udcff", "\udcfe\udcfd"]  # surrogateescape: written as raw bytes 0xff 0xfe 0xfd
    for b in bad + CTRL:
        spots: list[tuple[str, Members, bool | None]] = [
            ("iface-dir", _rename("snap/sys/class/net/eth2", f"snap/sys/class/net/eth{b}"),
             False),
            ("device-dir", lambda sb, x=b: insert(
                [info(f"snap/sys/bus/pci/devices/0000:0a:00.{x}", tarfile.DIRTYPE)], "last"),
             False),
            ("command-file", lambda sb, x=b: insert(
                [info(f"snap/commands/out{x}.txt", data=b"x")], "last"), False),
            ("top-dir", _retop(f"snap{b}"), False),
            ("meta-name", _rename("snap/snapshot.json", f"snap/snapshot{b}.json"), True),
            ("escape", lambda sb, x=b: insert([info(f"../evil{x}", data=b"x")], "last"), True),
            ("driver-link", lambda sb, x=b: insert(
                [info(f"snap/{DEV}/driver2", tarfile.SYMTYPE, link=f"../../drivers/be{x}")],
                "last"), False),
        ]
        for name, m, refuse in spots:
            names = (f"../evil{b}",) if name == "escape" and b not in ("\n", "\r") else ()
            verbs = {_rot(i), "inventory", "inventory-json"}  # both views show every name
            for verb in sorted(verbs):
                out.append(tar_case("tar-names", f"{name}:{b!r}", m, verb, refuse, names))
            i += 1
    return out


def _rename(old: str, new: str) -> Members:
    def m(sb: Sandbox) -> list[Member]:
        out = []
        for ti, data in base_members():
            if ti.name == old or ti.name.startswith(old + "/"):
                t2 = tarfile.TarInfo(new + ti.name[len(old):])
                t2.type, t2.size, t2.mode, t2.mtime = ti.type, ti.size, ti.mode, ti.mtime
                t2.linkname = ti.linkname
                out.append((t2, data))
            else:
                out.append((ti, data))
        return out

    return m


def _retop(new: str) -> Members:
    return _rename("snap", new)


# ----------------------------------------------------------------------------- not archives
def misc_cases() -> list[Case]:
    rnd = random.Random("tar-misc")
    raw = tar_bytes(list(base_members()), compress=False)
    bad8 = frozenset({8})

    def data(name: str, blob: bytes) -> Callable[[Path, Sandbox], Path]:
        return _bytes_at(name, blob)

    def fifo(work: Path, sb: Sandbox) -> Path:
        os.mkfifo(work / ARCHIVE)
        return work / ARCHIVE

    def zero_dev(work: Path, sb: Sandbox) -> Path:
        os.mknod(work / ARCHIVE, stat.S_IFCHR | 0o600, os.makedev(1, 5))
        return work / ARCHIVE

    def link_secret(work: Path, sb: Sandbox) -> Path:
        os.symlink(sb.canary / "secret", work / ARCHIVE)
        return work / ARCHIVE

    def dir_named(work: Path, sb: Sandbox) -> Path:
        return write_dir(dict(base()), work / ARCHIVE)

    def dev_null(work: Path, sb: Sandbox) -> Path:
        return Path("/dev/null")

    def members_file(name: str, members: list[Member], **kw: object) -> Callable:
        return lambda work, sb: _write(work / name, tar_bytes(members, **kw))  # type: ignore

    inner = tar_bytes(list(base_members()))
    pax_escape = tarfile.TarInfo("snap/innocent")
    pax_escape.pax_headers = {"path": "../evil-pax"}
    pax_link = tarfile.TarInfo("snap/innocent-link")
    pax_link.type = tarfile.SYMTYPE
    pax_link.pax_headers = {"linkpath": "/etc"}
    gnu_long = info("snap/" + "x/" * 60 + "../" * 70 + "evil", data=b"x")
    spots: list[tuple[str, Callable[[Path, Sandbox], Path], frozenset[int], tuple[str, ...]]] = [
        ("random-bytes", data(ARCHIVE, rnd.randbytes(5000)), bad8, (ARCHIVE,)),
        ("empty", data(ARCHIVE, b""), bad8, (ARCHIVE,)),
        ("one-byte", data(ARCHIVE, b"\x1f"), bad8, (ARCHIVE,)),
        ("gzip-of-text", data(ARCHIVE, gzip.compress(b"hello\n" * 100)), bad8, (ARCHIVE,)),
        ("bzip2-inside", data(ARCHIVE, bz2.compress(raw)), frozenset({0, 8}), ()),
        ("xz-inside", data(ARCHIVE, lzma.compress(raw)), frozenset({0, 8}), ()),
        ("zip", data(ARCHIVE, b"PK\x03\x04" + rnd.randbytes(300)), bad8, (ARCHIVE,)),
        ("dir-named-tgz", dir_named, frozenset({0}), ()),
        ("fifo-named-tgz", fifo, bad8, (ARCHIVE,)),
        ("zero-device-named-tgz", zero_dev, bad8, (ARCHIVE,)),
        ("link-to-canary", link_secret, bad8, (ARCHIVE,)),
        ("dev-null", dev_null, frozenset({2, 8}), ("/dev/null",)),
        ("tar-in-tar", members_file(ARCHIVE, [info("snap.tar.gz", data=inner)]), bad8,
         ("snapshot.json",)),
        ("two-tops", members_file(ARCHIVE, list(base_members()) + [info("other/x", data=b"x")]),
         bad8, ("snapshot.json",)),
        ("only-dot", members_file(ARCHIVE, [info(".", tarfile.DIRTYPE)]), bad8, ()),
        ("dup-meta", members_file(ARCHIVE, insert([info("snap/snapshot.json", data=b"{")],
                                                  "last")), bad8, ("snapshot.json",)),
        ("pax-path-escape", members_file(ARCHIVE, insert([(pax_escape, b"")], "last")), bad8,
         ("evil-pax",)),
        ("pax-linkpath", members_file(ARCHIVE, insert([(pax_link, None)], "last")),
         frozenset({0, 8}), ()),
        ("gnu-longname-escape", members_file(ARCHIVE, insert([gnu_long], "last"),
                                             fmt=tarfile.GNU_FORMAT), bad8, (ARCHIVE,)),
        ("v7-format", members_file(ARCHIVE, list(base_members()), fmt=tarfile.USTAR_FORMAT),
         frozenset({0}), ()),
        ("trailing-garbage", data(ARCHIVE, gzip.compress(raw + rnd.randbytes(3000))),
         frozenset({0, 8}), ()),
        ("gzip-trailing-garbage", data(ARCHIVE, gzip.compress(raw) + rnd.randbytes(100)),
         frozenset({0, 8}), ()),
    ]
    return [raw_case("tar-misc", name, make, "inventory", allowed, names)
            for name, make, allowed, names in spots]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def tar_kinds() -> dict[str, list[Case]]:
    """Every archive kind, by name."""
    return {"tar-dotdot": dotdot_cases(), "tar-absolute": absolute_cases(),
            "tar-symlink-write": symlink_write_cases(), "tar-symlink-over": symlink_over_cases(),
            "tar-hardlink": hardlink_cases(), "tar-device": device_cases(),
            "tar-fifo": fifo_cases(), "tar-bomb": bomb_cases(), "tar-deep": deep_cases(),
            "tar-truncated": truncated_cases(), "tar-flip": flip_cases(),
            "tar-names": name_cases(), "tar-misc": misc_cases()}

