"""Generators of damaged snapshot directories (kinds `dir-*`), deterministic: every case is
one mutation of the base host (tests/support/hostile_tree.py) run through one `--root` verb."""

from __future__ import annotations

import json
import os
import random
from functools import lru_cache
from pathlib import Path
from typing import Callable

from support.hostile import Case, Sandbox
from support.hostile_tree import (
    CONFIG,
    DIR,
    EXPECT,
    JOURNAL,
    KVER,
    Link,
    Special,
    Tree,
    base_tree,
    journal_with,
    tree_members,
    write_dir,
    write_tar,
)

VERBS: dict[str, Callable[[str], list[str]]] = {
    "inventory": lambda r: ["inventory", "--root", r],
    "inventory-json": lambda r: ["inventory", "--json", "--root", r],
    "history": lambda r: ["history", "--root", r],
    "plan": lambda r: ["plan", "upgrade", "be2net", "--to", "10.2.470.14", "--kernel", KVER,
                       "--root", r],
    "verify": lambda r: ["verify", "--root", r],
}
# what each verb may answer for a damaged-but-readable host (the base answers 0 0 0 9 1):
# plan refuses (9) or fails (1) or misses the device (3); verify fails (1), finds nothing
# armed (4) or cannot tell (11)
BENIGN = {"inventory": {0}, "inventory-json": {0}, "history": {0}, "plan": {1, 3, 9},
          "verify": {1, 4, 11}}
VERB_ORDER = list(VERBS)
Mutate = Callable[[Tree, Sandbox, Path], None]

DEV = "sys/bus/pci/devices/0000:02:00.0"
OUTPUT = "commands/ethtool-i-eth2.txt"
# (location, what a damaged one must give: True = refused (8), False = read as unknown,
#  None = either)
FILE_LOCS: list[tuple[str, bool | None]] = [
    ("snapshot.json", True), ("commands/index.json", None), (OUTPUT, True),
    (f"{DEV}/vendor", False), (f"{DEV}/class", False), (f"{DEV}/driver", False),
    (f"{DEV}/uevent", False),
    ("sys/class/net/eth2/speed", False), ("sys/module/be2net/version", False),
    ("proc/net/route", False), ("proc/sys/kernel/osrelease", False),
    (EXPECT, None), (JOURNAL, None), (CONFIG, None),
]
# the verb that reads each state location (others would never look at it)
STATE_VERB = {JOURNAL: "history", "var/lib/hwmgr": "history", EXPECT: "verify",
              "var/lib/hwmgr/expectations": "verify", CONFIG: "verify", "etc/hwmgr": "verify"}
DIR_LOCS: list[tuple[str, bool | None]] = [
    ("sys/bus/pci/devices", False), (DEV, False), ("sys/class/net", False),
    ("sys/class/net/eth2", False), ("commands", None), ("var/lib/hwmgr", None),
    ("var/lib/hwmgr/expectations", None), ("etc/hwmgr", None), ("lib/modules", None),
]


@lru_cache(maxsize=1)
def base() -> Tree:
    return base_tree()


def codes(verb: str, refuse: bool | None) -> frozenset[int]:
    if refuse is True:
        return frozenset({8})
    return frozenset(BENIGN[verb] | ({8} if refuse is None else set()))


def dir_case(kind: str, name: str, mutate: Mutate, verb: str, refuse: bool | None,
             names: tuple[str, ...] = (), *, tar: bool = False,
             allowed: frozenset[int] | None = None,
             check_out: Callable[[str], str | None] | None = None) -> Case:
    """A case that damages a copy of the base tree, written as a directory (tar=False) or
    shipped as a .tar.gz of one (kind `tgz-*`: what a user would be handed)."""

    def build(work: Path, sb: Sandbox) -> list[str]:
        tree = dict(base())
        root = work / "snap"
        mutate(tree, sb, root)
        if tar:
            return VERBS[verb](str(write_tar(tree_members(tree), work / "snap.tar.gz")))
        return VERBS[verb](str(write_dir(tree, root)))

    if tar:
        kind = "tgz-" + kind[4:]
    return Case(kind, f"{kind}/{name}/{verb}", build, allowed or codes(verb, refuse), names,
                check_out=check_out)


def _drop_under(tree: Tree, rel: str) -> None:
    for k in [k for k in tree if k.startswith(rel + "/")]:
        del tree[k]


def put(rel: str, node: object, *, clear: bool = True) -> Mutate:
    """Mutation: replace `rel` (and anything under it) by `node`."""

    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        if clear:
            _drop_under(tree, rel)
        tree[rel] = node  # type: ignore[assignment]

    return m


def link_to(rel: str, target: Callable[[Sandbox, Path], str]) -> Mutate:
    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        _drop_under(tree, rel)
        tree[rel] = Link(target(sb, root))

    return m


def file_of(rel: str) -> str:
    """The name an error must mention for a damaged `rel`."""
    return rel.rsplit("/", 1)[-1] if rel.startswith("commands/") else rel


def _rot(i: int) -> str:
    return VERB_ORDER[i % len(VERB_ORDER)]


# ----------------------------------------------------------------------------- kinds
def fifo_cases() -> list[Case]:
    """A FIFO (nobody writes to it: a blocking read would hang) at every file location."""
    out = []
    for rel, refuse in FILE_LOCS:
        for verb in VERB_ORDER:
            out.append(dir_case("dir-fifo", rel, put(rel, Special("fifo")), verb, refuse,
                                (file_of(rel),)))
    return out


# the shapes that hung a reader (issue 25) besides FIFOs and link loops (their own kinds):
# an endless device, a huge sparse file, a socket and a directory where a file belongs
SHAPES: dict[str, object] = {"zero": Special("chr", 1, 5), "sparse": Special("sparse", 1024),
                             "socket": Special("sock"), "dir": DIR}


def shape_cases() -> list[Case]:
    """Each shape at every file location: sys/ and proc/ attributes, recorded command
    outputs, the index, metadata and state; refused in one line or read as unknown."""
    out, i = [], 0
    for rel, refuse in FILE_LOCS:
        for shape, node in SHAPES.items():
            out.append(dir_case("dir-shape", f"{rel}:{shape}", put(rel, node),
                                STATE_VERB.get(rel, _rot(i)), refuse, (file_of(rel),)))
            i += 1
    return out


def _targets() -> list[tuple[str, Callable[[Sandbox, Path], str]]]:
    return [
        ("abs-file", lambda sb, root: str(sb.canary / "secret")),
        ("abs-dir", lambda sb, root: str(sb.canary / "dir")),
        ("abs-journal", lambda sb, root: str(sb.canary / "dir" / "journal.sqlite")),
        ("climb-abs", lambda sb, root: "../" * 40 + str(sb.canary / "secret").lstrip("/")),
        ("rel-exact", lambda sb, root: "REL:secret"),
        ("rel-exact-dir", lambda sb, root: "REL:dir"),
    ]


def _rel_link(rel: str, target: Callable[[Sandbox, Path], str]) -> Mutate:
    """A link at `rel`; 'REL:x' targets become the exact relative path to canary/x."""

    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        t = target(sb, root)
        if t.startswith("REL:"):
            where = (root / rel).parent
            t = os.path.relpath(sb.canary / t[4:], where)
        _drop_under(tree, rel)
        tree[rel] = Link(t)

    return m


def symlink_out_cases(tar: bool = False) -> list[Case]:
    """Every file and directory location replaced by a link out of the root."""
    out, i = [], 0
    for rel, refuse in FILE_LOCS + DIR_LOCS:
        names = (file_of(rel),) if rel in dict(FILE_LOCS) else ()
        for tname, target in _targets():
            out.append(dir_case("dir-symlink-out", f"{rel}->{tname}", _rel_link(rel, target),
                                STATE_VERB.get(rel, _rot(i)), refuse, names, tar=tar))
            i += 1
    return out


def _loop(rel: str, how: str) -> Mutate:
    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        _drop_under(tree, rel)
        name = rel.rsplit("/", 1)[-1]
        parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
        sib = f"{parent}/{name}.x" if parent else f"{name}.x"
        if how == "self":
            tree[rel] = Link(name)
        elif how == "pair":
            tree[rel] = Link(sib.rsplit("/", 1)[-1])
            tree[sib] = Link(name)
        elif how == "chain":  # 45 hops, more than the 40 a resolver may follow
            for k in range(45):
                tree[f"{rel}.{k}" if k else rel] = Link(f"{name}.{k + 1}")
            tree[f"{rel}.45"] = b"end\n"
        elif how == "up":  # a link to its own ancestor: walking it never ends
            tree[rel] = Link("../" * rel.count("/") or ".")

    return m


def symlink_loop_cases(tar: bool = False) -> list[Case]:
    out, i = [], 0
    for rel, refuse in FILE_LOCS + DIR_LOCS:
        names = (file_of(rel),) if rel in dict(FILE_LOCS) else ()
        for how in ("self", "pair", "chain", "up"):
            out.append(dir_case("dir-symlink-loop", f"{rel}:{how}", _loop(rel, how),
                                STATE_VERB.get(rel, _rot(i)), refuse, names, tar=tar))
            i += 1
    return out


def _nest(depth: int, kind: str) -> str:
    return "[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth


META = {"format": "hwmgr-snapshot", "version": 1, "hostname": "Ustor", "kernel": KVER,
        "captured": "2014-12-31T10:00:00Z"}


def _json_with(rel: str, key_path: list[object] | None, raw: str) -> Mutate:
    """Replace the JSON value at key_path (None: the whole document) by raw JSON text."""

    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        if key_path is None:
            tree[rel] = raw.encode()
            return
        doc = json.loads(tree[rel])  # type: ignore[arg-type]
        marker = "@@HOSTILE@@"
        cur = doc
        for k in key_path[:-1]:
            cur = cur[k]
        last = key_path[-1]
        if isinstance(cur, list) and isinstance(last, int) and last >= len(cur):
            cur.append(marker)
        else:
            cur[last] = marker
        tree[rel] = json.dumps(doc).replace(json.dumps(marker), raw).encode()

    return m


# (file, key path, refuse when the value is garbage, name an error must mention)
JSON_SPOTS: list[tuple[str, list[object] | None, bool | None]] = [
    ("snapshot.json", None, True),
    ("snapshot.json", ["version"], True),
    ("snapshot.json", ["hostname"], True),
    ("snapshot.json", ["extra"], None),
    ("commands/index.json", None, True),
    ("commands/index.json", [0, "argv"], True),
    ("commands/index.json", [0, "rc"], True),
    ("commands/index.json", [0, "extra"], None),
    (EXPECT, None, None),
    (EXPECT, ["devices", 0, "links"], None),
    (CONFIG, ["link_wait_seconds"], None),
]


def deep_json_cases(tar: bool = False) -> list[Case]:
    """Nesting 10 to 100,000 levels deep, as the document or as one value."""
    out, i = [], 0
    for rel, path, refuse in JSON_SPOTS:
        for depth in (50, 990, 5000, 100_000):
            for shape in ("list", "dict"):
                out.append(dir_case("dir-deep-json", f"{rel}:{path}:{shape}{depth}",
                                    _json_with(rel, path, _nest(depth, shape)), _rot(i), refuse,
                                    (file_of(rel),), tar=tar))
                i += 1
    return out


NUMBERS = ["1" * 50_000, "-" + "9" * 50_000, "1" * 4301, "1e99999", "NaN", "-Infinity",
           "1" + "0" * 400 + ".5"]


def huge_number_cases(tar: bool = False) -> list[Case]:
    """50,000-digit integers, overflowing floats and NaN in every JSON the reader parses."""
    out, i = [], 0
    for rel, path, refuse in JSON_SPOTS:
        for num in NUMBERS:
            out.append(dir_case("dir-huge-number", f"{rel}:{path}:{num[:8]}..{len(num)}",
                                _json_with(rel, path, num), _rot(i), refuse, (file_of(rel),),
                                tar=tar))
            i += 1
    return out


WRONG = ['null', 'true', '0', '-1', '1.5', '""', '"x"', '[]', '{}', '[1]', '{"a": 1}']
META_KEYS: list[tuple[list[object] | None, list[str]]] = [
    (None, ['[]', '"hwmgr-snapshot"', 'null', '1', 'true', '{}']),
    (["format"], ['null', '1', '"HWMGR-SNAPSHOT"', '["hwmgr-snapshot"]', '""']),
    (["version"], ['"1"', 'null', '2', '0', '-1', '1.5', 'true', '[1]', '{}']),
    (["hostname"], ['1', '[]', '{}', 'true', '["Ustor"]']),
    (["kernel"], ['1', '[]', '{}', 'false', '[null]']),
    (["captured"], ['1', '[]', '{"t": 1}']),
]


def meta_type_cases(tar: bool = False) -> list[Case]:
    """snapshot.json with the wrong type at every field (and as the whole document)."""
    out, i = [], 0
    for path, values in META_KEYS:
        for v in values:
            out.append(dir_case("dir-meta-types", f"{path}={v}",
                                _json_with("snapshot.json", path, v), _rot(i), True,
                                ("snapshot.json",), tar=tar))
            i += 1
    out.append(dir_case("dir-meta-types", "no-format",
                        _json_with("snapshot.json", None, json.dumps(
                            {k: v for k, v in META.items() if k != "format"})),
                        "inventory", True, ("snapshot.json",), tar=tar))
    return out


INDEX_BAD: list[tuple[list[object] | None, list[str]]] = [
    (None, ['{}', '"x"', 'null', '1', '{"argv": ["ethtool"]}']),
    ([0], ['"ethtool -i eth2"', 'null', '[]', '1', '[["ethtool"]]']),
    ([0, "argv"], ['"ethtool -i eth2"', '[]', '[1]', '[null]', '[["ethtool", "-i"]]', '{}',
                   '["ethtool", 1]', 'null']),
    ([0, "rc"], ['"0"', '1.5', 'true', 'null', '[]', '{}']),
]


def _escapes(sb: Sandbox) -> list[str]:
    return ["/etc/passwd", str(sb.canary / "secret"), "../../canary/secret",
            "commands/../../x", "commands/./../snapshot.json", "commands", "", ".",
            "commands/missing.txt", "../" * 30 + str(sb.canary / "secret").lstrip("/")]


def _out_ref(stream: str, k: int) -> Mutate:
    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        doc = json.loads(tree["commands/index.json"])  # type: ignore[arg-type]
        doc[0][stream] = _escapes(sb)[k]
        tree["commands/index.json"] = json.dumps(doc).encode()

    return m


def index_type_cases(tar: bool = False) -> list[Case]:
    """commands/index.json: wrong types everywhere; output paths that leave the snapshot."""
    out, i = [], 0
    for path, values in INDEX_BAD:
        for v in values:
            out.append(dir_case("dir-index-types", f"{path}={v}",
                                _json_with("commands/index.json", path, v), _rot(i), True,
                                ("index.json",), tar=tar))
            i += 1
    for stream in ("stdout", "stderr"):
        for k in range(10):
            out.append(dir_case("dir-index-types", f"{stream}-escape-{k}", _out_ref(stream, k),
                                _rot(i), True, ("index.json",), tar=tar))
            i += 1
    for v in ('5', '[]', '{}', 'true'):
        out.append(dir_case("dir-index-types", f"stdout={v}",
                            _json_with("commands/index.json", [0, "stdout"], v), _rot(i), True,
                            ("index.json",), tar=tar))
        i += 1
    return out


CONTROL = ["\x1b[2J\x1b[31mred", "a\nb", "tab\there", "cr\rover", "nul\x00x", "bell\x07",
           "csi\x9b31m", "del\x7fx", "esc\x1b]0;title\x07",
           "[/]", "[red]markup[/red]", "[link=https:x]x[/link]"]  # rich markup


def _rename_iface(new: str) -> Mutate:
    """eth2 -> `new` everywhere: class/net, the device's net/, ethtool argv and output."""

    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        for k in [k for k in tree if "eth2" in k.split("/")]:
            tree[k.replace("/eth2", "/" + new)] = tree.pop(k)
        doc = json.loads(tree["commands/index.json"])  # type: ignore[arg-type]
        for e in doc:
            e["argv"] = [new if a == "eth2" else a for a in e["argv"]]
        tree["commands/index.json"] = json.dumps(doc).encode()

    return m


def control_cases(tar: bool = False) -> list[Case]:
    """Control characters in hostname, kernel, interface names, attributes, tool output."""
    out, i = [], 0
    for c in CONTROL:
        if c.startswith("["):  # markup in a hostname is shown as it is, not interpreted
            out.append(dir_case("dir-control", f"hostname-literal:{c!r}", _json_with(
                "snapshot.json", ["hostname"], json.dumps(c)), "inventory", False, tar=tar,
                check_out=lambda o, c=c: None if c in o else f"hostname {c!r} not shown as is"))
        muts: list[tuple[str, Mutate, bool | None]] = [
            ("hostname", _json_with("snapshot.json", ["hostname"], json.dumps(c)), False),
            ("kernel", _json_with("snapshot.json", ["kernel"], json.dumps(c)), None),
            ("ethtool-driver", put(OUTPUT, f"driver: be2net{c}\nversion: 4.1{c}\n"
                                   f"firmware-version: {c}\nbus-info: 0000:02:00.0\n".encode()),
             False),
            ("vendor-attr", put(f"{DEV}/vendor", f"0x19a2{c}\n".encode()), False),
            ("uevent", put(f"{DEV}/uevent", f"DRIVER=be2net{c}\nPCI_CLASS=20000\nPCI_ID="
                           f"19A2:0710\nPCI_SUBSYS_ID=10DF:E70B\nX={c}\n".encode()), False),
            ("module-version", put("sys/module/be2net/version", f"4.1{c}\n".encode()), False),
        ]
        if "\x00" not in c:  # a file name cannot hold NUL
            muts.append(("device-name", put(f"sys/bus/pci/devices/0000:09:00.{c}", DIR), False))
            muts.append(("iface", _rename_iface("eth" + c), False))
            muts.append(("expect-driver", _json_with(EXPECT, ["driver"], json.dumps(c)), None))
        for what, mut, refuse in muts:
            out.append(dir_case("dir-control", f"{what}:{c!r}", mut, _rot(i), refuse, tar=tar))
            i += 1
    return out


def _sql(sql: str) -> Mutate:
    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        tree[JOURNAL] = journal_with(sql)

    return m


def state_cases(tar: bool = False) -> list[Case]:
    """A snapshot's own state dir: damaged journal, expectation and site config."""
    rnd = random.Random("dir-state")
    good = base()[JOURNAL]
    journal_muts: list[tuple[str, Mutate]] = [
        ("garbage", put(JOURNAL, bytes(rnd.randrange(256) for _ in range(4096)))),
        ("empty", put(JOURNAL, b"")),
        ("truncated", put(JOURNAL, good[:100])),  # type: ignore[index]
        ("header-only", put(JOURNAL, good[:512])),  # type: ignore[index]
        ("dir", put(JOURNAL, DIR)),
        ("newer-schema", _sql("PRAGMA user_version=999;")),
        ("no-tables", _sql("DROP TABLE steps; DROP TABLE transactions; DROP TABLE events;")),
        ("wrong-columns", _sql("DROP TABLE transactions; CREATE TABLE transactions(x);")),
        ("bad-json-rows", _sql(
            "INSERT INTO transactions(kind,target,params,state,started,notes,results) VALUES"
            "('upgrade','be2net','{[','committed','2020','nope','[1]');")),
        ("null-rows", _sql(
            "INSERT INTO transactions(kind,target,params,state,started) VALUES"
            "('upgrade','be2net','null','committed','2020');"
            "INSERT INTO steps(txn_id,seq,name,reversible,commit_point,data) VALUES"
            "(1,1,'x',0,0,'\"str\"');")),
        ("control-rows", _sql(
            "INSERT INTO transactions(kind,target,params,state,started) VALUES"
            "('up\x1b[2Jgrade','be\x1b]0;x\x07net','{\"version\": \"1\\u001b[31m\"}',"
            "'committed','20\r20');")),
    ]
    for k in range(6):
        pos = rnd.randrange(100, len(good))  # type: ignore[arg-type]
        flipped = bytearray(good)  # type: ignore[arg-type]
        flipped[pos] ^= 1 << rnd.randrange(8)
        journal_muts.append((f"flip{k}@{pos}", put(JOURNAL, bytes(flipped))))
    out = []
    for name, mut in journal_muts:
        out.append(dir_case("dir-state", f"journal:{name}", mut, "history", None,
                            ("journal.sqlite",), tar=tar))
    exp_bad = ['[]', '{"format": "hwmgr-expectation", "version": 1}',
               '{"format": "hwmgr-expectation", "version": 1, "driver": "be2net",'
               ' "modules": "be2net"}',
               '{"format": "hwmgr-expectation", "version": 1, "driver": "be2net",'
               ' "modules": ["be2net"], "devices": [{"address": 5}]}',
               '{"format": "hwmgr-expectation", "version": 1, "driver": "be2net",'
               ' "modules": ["be2net"], "kernels": {"k": {"be2net": "x"}}}',
               '{"format": "hwmgr-expectation", "version": 1, "driver": "be2net",'
               ' "modules": ["be2net"], "devices": [{"address": "0000:02:00.0",'
               ' "links": {"eth2": 5}}]}',
               '{"format": "hwmgr-expectation", "version": 1, "driver": "../../../etc",'
               ' "modules": ["../../x"]}', '\xff\xfe', '']
    for inner in ('"x"', '{"be2net": "x"}', '{"be2net": {"version": 5, "sha256": []}}',
                  '{"be2net": {"path": "/../../etc/passwd", "version": "1"}}'):
        exp_bad.append('{"format": "hwmgr-expectation", "version": 1, "driver": "be2net",'
                       f' "modules": ["be2net"], "kernels": {{"{KVER}": {inner}}}}}')
    exp_bad.append('{"format": "hwmgr-expectation", "version": true, "driver": "be2net",'
                   ' "modules": ["be2net"]}')
    for k, raw in enumerate(exp_bad):
        out.append(dir_case("dir-state", f"expectation:{k}", put(EXPECT, raw.encode(
            "utf-8", "surrogateescape") if raw != '\xff\xfe' else b"\xff\xfe"), "verify",
            None, ("be2net.json",), tar=tar, allowed=frozenset({0, 1, 4, 8, 11})))
    cfg_bad = ['[]', '{"link_wait_seconds": "x"}', '{"reboot_command": "rm -rf /"}',
               '{"unknown": 1}', '{"on_failure": 5}', '{"max_boot_attempts": -1}',
               '{"link_wait_seconds": 1e999}', '{"throughput_peer": ["x"]}', '\xff']
    for k, raw in enumerate(cfg_bad):
        out.append(dir_case("dir-state", f"config:{k}", put(CONFIG, raw.encode(
            "latin-1")), "verify", None, ("hwmgr.json",), tar=tar))
    return out


def misc_cases(tar: bool = False) -> list[Case]:
    """Missing, empty, oversized and mis-encoded core files; files where dirs belong."""
    big = b'{"format": "hwmgr-snapshot", "version": 1, "hostname": "' + b"x" * (2 << 20) + b'"}'
    meta = json.dumps(META)
    spots: list[tuple[str, Mutate, bool | None, tuple[str, ...]]] = [
        ("no-meta", _del("snapshot.json"), True, ("snapshot.json",)),
        ("empty-meta", put("snapshot.json", b""), True, ("snapshot.json",)),
        ("meta-dir", put("snapshot.json", DIR), True, ("snapshot.json",)),
        ("meta-2MB", put("snapshot.json", big), True, ("snapshot.json",)),
        ("meta-latin1", put("snapshot.json", meta.replace("Ustor", "Üstor").encode("latin-1")),
         True, ("snapshot.json",)),
        ("meta-utf16", put("snapshot.json", meta.encode("utf-16")), True, ("snapshot.json",)),
        ("meta-bom", put("snapshot.json", b"\xef\xbb\xbf" + meta.encode()), None,
         ("snapshot.json",)),
        ("meta-dup-keys", put("snapshot.json", meta[:-1].encode() + b', "version": 2}'), None,
         ("snapshot.json",)),
        ("index-dir", put("commands/index.json", DIR), None, ("index.json",)),
        ("index-empty", put("commands/index.json", b""), True, ("index.json",)),
        ("index-2MB", put("commands/index.json", b"[" + b" " * (2 << 20) + b"]"), None,
         ("index.json",)),
        ("index-bytes", put("commands/index.json", b"\xff\xfe[]"), True, ("index.json",)),
        ("output-2MB", put(OUTPUT, b"driver: be2net\n" + b"x" * (2 << 20)), None, ()),
        ("output-binary", put(OUTPUT, bytes(range(256)) * 8), None, ()),
        ("empty-root", _only({}), True, ("snapshot.json",)),
        ("only-meta", _only({"snapshot.json": meta.encode()}), False, ()),
        ("sys-file", put("sys", b"not a dir\n"), False, ()),
        ("devices-file", put("sys/bus/pci/devices", b"x"), False, ()),
        ("device-file", put(DEV, b"x"), False, ()),
        ("attr-2MB", put(f"{DEV}/vendor", b"0x19a2" + b" " * (2 << 20)), False, ()),
        ("net-file", put("sys/class/net/eth2", b"x"), False, ()),
        ("uevent-2MB", put(f"{DEV}/uevent", b"PCI_ID=19A2:0710\n" * (2 << 17)), False, ()),
        ("uevent-binary", put(f"{DEV}/uevent", bytes(range(256)) * 8), False, ()),
        ("uevent-dir", put(f"{DEV}/uevent", DIR), False, ()),
        ("many-devices", _many_devices(3000), False, ()),
        ("long-name", put(f"sys/bus/pci/devices/{'0' * 250}", DIR), False, ()),
        ("deep-dirs", put("sys/bus/pci/devices/" + "/".join(["d"] * 400), DIR), None, ()),
    ]
    return [dir_case("dir-misc", name, mut, _rot(i), refuse, names, tar=tar)
            for i, (name, mut, refuse, names) in enumerate(spots)]


def _del(rel: str) -> Mutate:
    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        tree.pop(rel, None)

    return m


def _only(content: Tree) -> Mutate:
    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        tree.clear()
        tree.update(content)

    return m


def _many_devices(n: int) -> Mutate:
    def m(tree: Tree, sb: Sandbox, root: Path) -> None:
        for k in range(n):
            d = f"sys/bus/pci/devices/0000:{k // 256:02x}:{(k % 256) // 8:02x}.{k % 8}"
            tree[f"{d}/vendor"] = b"0x8086\n"
            tree[f"{d}/device"] = b"0x10d3\n"

    return m


def dir_kinds(tar: bool = False) -> dict[str, list[Case]]:
    """Every directory kind by name; tar=True: the same damage shipped as .tar.gz (tgz-*),
    except FIFOs, which an archive cannot hand over (a FIFO member is refused: tar-fifo)."""
    kinds = [symlink_out_cases, symlink_loop_cases, deep_json_cases, huge_number_cases,
             meta_type_cases, index_type_cases, control_cases, state_cases, misc_cases]
    out = {} if tar else {"dir-fifo": fifo_cases(), "dir-shape": shape_cases()}
    for make in kinds:
        cases = make(tar=tar)
        out[cases[0].kind] = cases
    return out
