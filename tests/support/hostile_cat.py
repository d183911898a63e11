"""Generators of damaged catalogs (kinds `cat-*`), deterministic: each case is one mutation
of the shipped catalog, handed to `catalog validate`, `catalog show`, `inventory --catalog`
or `plan --catalog`. Every one must exit 8 with an error naming the file and, where the
damage has one, the JSON path."""

from __future__ import annotations

import json
import os
import random
import re
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator

from support.hostile import Case, Sandbox
from support.hostile_tree import KVER, SEED
from support.shipped import shipped_doc

FILE = "cat.json"
BAD = frozenset({8})
VERBS: dict[str, list[str]] = {
    "validate": ["catalog", "validate"],
    "show": ["catalog", "show", "be2net"],
    "inventory": ["inventory", "--root", str(SEED)],
    "plan": ["plan", "upgrade", "be2net", "--to", "10.2.470.14", "--kernel", KVER,
             "--root", str(SEED)],
}
VERB_ORDER = list(VERBS)
Make = Callable[[Path, Sandbox], "Path | list[Path]"]


def argv(verb: str, files: Path | list[Path]) -> list[str]:
    """The verb with its catalog file(s): validate's arguments, or --catalog options."""
    names = [str(f) for f in (files if isinstance(files, list) else [files])]
    if verb == "validate":
        return VERBS[verb] + names
    return VERBS[verb] + [a for n in names for a in ("--catalog", n)]
# a JSON path as hwmgr.catalog.json_path renders it: $.a.b[0]['4.1.307r']
_PATH = re.compile(r"\$(?:\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\]|\['(?:[^'\\]|\\.)*'\]"
                   r"|\[\"(?:[^\"\\]|\\.)*\"\])*")
MARK = "@@HOSTILE@@"


# the base the cases mutate: the shipped catalog merged into one document, cut to the
# entries of the field notes and the lab (whose facts every check here was written around)
# so that one case per value stays a few hundred cases, not tens of thousands
BASE_DRIVERS = ("be2net", "ixgbe", "megaraid_sas", "e1000e")


@lru_cache(maxsize=1)
def _base() -> str:
    doc = shipped_doc()
    drivers = {}
    for name in BASE_DRIVERS:
        entry = doc["drivers"][name]
        local = {v: ve for v, ve in entry["versions"].items()
                 if any(s.get("kind") for s in ve["evidence"])}
        named = {r for ve in local.values() for r in ve.get("applies_to", [])}
        devices = [d for i, d in enumerate(entry["devices"])
                   if i < 2 or f"{d.get('vendor')}:{d.get('device')}" in named]
        drivers[name] = {**entry, "devices": devices, "versions": local}
        drivers[name].pop("advice", None)  # free-form values: one type per value cannot hold
        for key in ("known_issues", "firmware_requirements"):  # one of each shape is enough:
            if entry.get(key):  # each value is a case, and each case validates the whole
                drivers[name][key] = entry[key][:1]
        if isinstance(entry.get("inbox"), list):  # one policy, in the object form
            drivers[name]["inbox"] = entry["inbox"][0]
    builds = {}  # two rows and one source of each table: the shapes, not the hundreds of rows
    for fam, table in doc.get("kernel_builds", {}).items():
        if fam == "ubuntu_lines":  # a table per line: its rows cut, each line whole
            builds[fam] = {line: _rows(t) for line, t in table.items()}
        else:
            builds[fam] = _rows(table)
    return json.dumps({**doc, "drivers": drivers, "kernel_builds": builds}, indent=1)


def _rows(table: dict[str, Any]) -> dict[str, Any]:
    """A kernel_builds table cut to two rows of each map and one item of each list."""
    return {k: (dict(list(v.items())[:2]) if isinstance(v, dict)
                else v[:1] if isinstance(v, list) else v)  # lifecycle's as_of
            for k, v in table.items()}


def shipped_bytes() -> bytes:
    """The base catalog as one file's bytes."""
    return _base().encode()


def shipped() -> Any:
    """A fresh copy of the base catalog document."""
    return json.loads(_base())


def jpath(parts: list[Any]) -> str:
    from hwmgr.catalog.load import json_path

    return json_path(parts)


def _rot(i: int) -> str:
    return VERB_ORDER[i % len(VERB_ORDER)]


def path_check(expected: str) -> Callable[[str], str | None]:
    """stderr must hold a JSON path on the way to (or below) `expected`."""

    def chk(stderr: str) -> str | None:
        found = _PATH.findall(stderr)
        if any(expected.startswith(p) or p.startswith(expected) for p in found):
            return None
        return f"no JSON path related to {expected} in the error (found {found[:3]})"

    return chk


def cat_case(kind: str, name: str, make: Make, verb: str, expect_path: str | None = "$",
             allowed: frozenset[int] = BAD, names: tuple[str, ...] = (FILE,)) -> Case:
    """One damaged catalog (written by `make`) through one verb."""

    def build(work: Path, sb: Sandbox) -> list[str]:
        return argv(verb, make(work, sb))

    return Case(kind, f"{kind}/{name}/{verb}", build, allowed, names,
                check_err=path_check(expect_path) if expect_path else None,
                one_line=verb != "validate")


def text_file(text: str | bytes, fname: str = FILE) -> Make:
    def make(work: Path, sb: Sandbox) -> Path:
        p = work / fname
        p.write_bytes(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
        return p

    return make


def with_raw(parts: list[Any], raw: str, doc: Any = None) -> str:
    """The catalog text with the value at `parts` replaced by raw JSON text."""
    doc = json.loads(json.dumps(doc if doc is not None else shipped()))
    cur = doc
    for k in parts[:-1]:
        cur = cur[k]
    cur[parts[-1]] = MARK
    return json.dumps(doc, indent=1).replace(json.dumps(MARK), raw)


def walk(node: Any, parts: list[Any] | None = None) -> Iterator[tuple[list[Any], Any]]:
    """Every (path, value) below the root, parents first."""
    parts = parts or []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(
        node, list) else []
    for k, v in items:
        yield parts + [k], v
        yield from walk(v, parts + [k])


# ----------------------------------------------------------------------------- kinds
def truncated_cases() -> list[Case]:
    raw = shipped_bytes()
    end = len(raw.rstrip()) - 1  # cuts below this lose at least the closing brace
    rnd = random.Random("cat-truncated")
    cuts = [0, 1, end] + sorted(rnd.randrange(end) for _ in range(57))
    return [cat_case("cat-truncated", f"@{c}", text_file(raw[:c]), _rot(i))
            for i, c in enumerate(cuts)]


WRONG: dict[type, list[str]] = {
    str: ["null", "1.5", "[]", "{}", "true"], bool: ['"true"', "1", "null"],
    int: ['"1"', "1.5", "null", "[]"], float: ['"0.5"', "null", "true", "{}"],
    list: ["{}", '"x"', "1", "null"], dict: ["[]", '"x"', "1", "null"],
    type(None): ['"x"', "[]", "true"],
}


def type_cases() -> list[Case]:
    """Every value of the shipped catalog replaced by a value of the wrong type (rotating
    through the wrong types, so each type is tried at every level)."""
    out = []
    for i, (parts, value) in enumerate(walk(shipped())):
        wrong = WRONG[type(value)]
        if parts[-1] in ("ring", "channels", "txqueuelen"):  # a count is valid there
            wrong = [w for w in wrong if w != "1"]
        raw = wrong[i % len(wrong)]
        out.append(cat_case("cat-types", f"{jpath(parts)}={raw}",
                            text_file(with_raw(parts, raw)), _rot(i), jpath(parts)))
    return out


def key_cases() -> list[Case]:
    """Object keys renamed to something the schema does not allow (every other key)."""
    out = []
    for i, (parts, _value) in enumerate(walk(shipped())):
        if not isinstance(parts[-1], str) or i % 2:
            continue
        doc = json.loads(json.dumps(shipped()))
        parent = doc
        for k in parts[:-1]:
            parent = parent[k]
        new = {(f"{k.upper()} !" if k == parts[-1] else k): v for k, v in parent.items()}
        parent.clear()
        parent.update(new)
        out.append(cat_case("cat-keys", jpath(parts), text_file(json.dumps(doc)), _rot(i),
                            jpath(parts[:-1])))
    return out


def _nest(depth: int, shape: str) -> str:
    return "[" * depth + "]" * depth if shape == "list" else '{"a":' * depth + "1" + "}" * depth


DEEP_SPOTS: list[list[Any]] = [
    [], ["notes", 0], ["drivers", "be2net", "description"],
    ["drivers", "be2net", "versions", "4.1.307r", "applies_to", 0], ["extra"],
]


def deep_cases() -> list[Case]:
    out, i = [], 0
    for parts in DEEP_SPOTS:
        for depth in (50, 990, 5000, 100_000):
            for shape in ("list", "dict"):
                raw = _nest(depth, shape)
                text = raw if not parts else with_raw(parts, raw)
                out.append(cat_case("cat-deep", f"{jpath(parts)}:{shape}{depth}",
                                    text_file(text), _rot(i), jpath(parts)))
                i += 1
    return out


NUMBERS = ["1" * 50_000, "-" + "9" * 50_000, "1" * 4301, "1e99999", "-1e99999", "NaN",
           "Infinity", "-Infinity", "1" + "0" * 400 + ".5"]
NUMBER_SPOTS: list[list[Any]] = [
    ["schema_version"], ["drivers", "ixgbe", "settings", "txqueuelen", "min"],
    ["drivers", "ixgbe", "throughput", "min_fraction_of_link"],
    ["drivers", "ixgbe", "settings", "ring", "rx"], ["notes", 0], ["catalog_version"],
]


def number_cases() -> list[Case]:
    """50,000-digit integers, overflowing floats, NaN and Infinity where numbers go."""
    out, i = [], 0
    for parts in NUMBER_SPOTS:
        for num in NUMBERS:
            out.append(cat_case("cat-numbers", f"{jpath(parts)}={num[:8]}..{len(num)}",
                                text_file(with_raw(parts, num)), _rot(i), jpath(parts)))
            i += 1
    return out


BE = ["drivers", "be2net", "versions"]
REC = BE + ["10.2.470.14"]


def _rekey(parts: list[Any], old: str, new: str) -> str:
    doc = json.loads(json.dumps(shipped()))
    obj = doc
    for k in parts:
        obj = obj[k]
    items = [(new if k == old else k, v) for k, v in obj.items()]
    obj.clear()
    obj.update(items)
    return json.dumps(doc)


def version_cases() -> list[Case]:
    """Version keys, firmware minimums, catalog versions and dates that do not parse."""
    out, i = [], 0
    for v in ["abc", "1.2.3-", "a.b.c", "A", "-1", "~1", ".1", "", " 1.0", "1.0\n", "1" * 65,
              "\uff11.\uff12", "1/2", "../x"]:
        out.append(cat_case("cat-versions", f"key={v!r}", text_file(_rekey(BE, "4.1.307r", v)),
                            _rot(i), jpath(BE)))
        i += 1
    for v in ["abc", "~1", "-1", "", "A", ".1"]:
        parts = REC + ["firmware", "min"]
        out.append(cat_case("cat-versions", f"firmware={v!r}",
                            text_file(with_raw(parts, json.dumps(v))), _rot(i), jpath(parts)))
        i += 1
    for key, values in (("catalog_version", ["2026.13.0", "2026.1", "x", "", "2026.11.00"]),
                        ("released", ["2026-02-30", "2026-13-01", "26-11-21", "",
                                      "2026-11-21T00:00", "2025-02-29"])):
        for v in values:
            out.append(cat_case("cat-versions", f"{key}={v!r}",
                                text_file(with_raw([key], json.dumps(v))), _rot(i), jpath([key])))
            i += 1
    for v in ["2026-02-31", "2023-04-31"]:
        parts = REC + ["released"]
        out.append(cat_case("cat-versions", f"version-released={v!r}",
                            text_file(with_raw(parts, json.dumps(v))), _rot(i), jpath(parts)))
        i += 1
    return out


GLOBS = ["[", "[]", "[!", "[z-a]", "2.6.32-[9-0]*", "[[[[", "[!]", "\\", "*" * 200, "",
         "a b", "2.6.32-*.el6.x86_64\n", "\uff16.1", "2.6.[", "x[9-0]y", "[a-"]
# well-formed but costly for a naive matcher: accepted, and must not hang or crash
SLOW_GLOBS = ["?*" * 60 + "x", "*a" * 60, "[a-z]*" * 20]
ACCEPTED = {"validate": {0}, "show": {0}, "inventory": {0, 5}, "plan": {1, 9}}


def glob_cases() -> list[Case]:
    """Kernel globs that are malformed (unclosed or empty ranges) or not globs at all."""
    out, i = [], 0
    for g in GLOBS + SLOW_GLOBS:
        for parts in (REC + ["kernels", 0], ["drivers", "e1000e", "inbox", "kernels", 0]):
            verb = _rot(i)
            allowed = frozenset(ACCEPTED[verb]) if g in SLOW_GLOBS else BAD
            out.append(cat_case("cat-globs", f"{jpath(parts)}={g[:30]!r}",
                                text_file(with_raw(parts, json.dumps(g))), verb,
                                jpath(parts) if allowed == BAD else None, allowed))
            i += 1
    return out


def dup_cases() -> list[Case]:
    """A key written twice (JSON keeps the last, silently) in every object."""
    out = []
    objs = [([], shipped())] + [(p, v) for p, v in walk(shipped()) if isinstance(v, dict)]
    for i, (parts, obj) in enumerate(objs):
        if not obj:
            continue
        key = list(obj)[i % len(obj)]
        doc = json.loads(json.dumps(shipped()))
        target = doc
        for k in parts:
            target = target[k]
        items = [(MARK, target[key])] + list(target.items())
        target.clear()
        target.update(items)
        text = json.dumps(doc).replace(json.dumps(MARK), json.dumps(key), 1)
        out.append(cat_case("cat-dups", f"{jpath(parts)}.{key}", text_file(text), _rot(i),
                            jpath(parts)))
    return out


def encoding_cases() -> list[Case]:
    """Bytes that are not UTF-8, other encodings, BOMs, lone surrogates, control chars."""
    raw = shipped_bytes()
    text = raw.decode()
    rnd = random.Random("cat-encoding")
    out, i = [], 0
    for k in range(20):
        pos = rnd.randrange(len(raw))
        junk = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"][k % 5]
        out.append(cat_case("cat-encoding", f"bytes{junk!r}@{pos}",
                            text_file(raw[:pos] + junk + raw[pos:]), _rot(i)))
        i += 1
    for enc in ("utf-16", "utf-16-be", "utf-32", "utf-8-sig"):
        out.append(cat_case("cat-encoding", enc, text_file(text.encode(enc)), _rot(i)))
        i += 1
    out.append(cat_case("cat-encoding", "latin-1", text_file(
        with_raw(["notes", 0], json.dumps("caf\u00e9")).encode("latin-1", "replace").replace(
            b"caf\\u00e9", b"caf\xe9")), _rot(i)))
    i += 1
    spots: list[list[Any]] = [["description"], ["notes", 0], ["drivers", "be2net", "description"],
                              ["drivers", "be2net", "devices", 0, "name"], REC + ["reason"],
                              REC + ["evidence"], ["drivers", "e1000e", "inbox", "reason"]]
    values = ["\\ud800", "x\\udfffy", "\\u0000", "\\u001b[2J\\u001b[31mred", "a\\nb",
              "\\u009b31m", "bell\\u0007", "\\r"]
    for parts in spots:
        for v in values:
            out.append(cat_case("cat-encoding", f"{jpath(parts)}={v}",
                                text_file(with_raw(parts, f'"{v}"')), _rot(i), jpath(parts)))
            i += 1
    return out


def _fifo(work: Path, sb: Sandbox) -> Path:
    os.mkfifo(work / FILE)
    return work / FILE


def _zero(work: Path, sb: Sandbox) -> Path:
    os.mknod(work / FILE, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    return work / FILE


def _in_dir(entry: Callable[[Path], None]) -> Make:
    def make(work: Path, sb: Sandbox) -> Path:
        d = work / "cats"
        d.mkdir()
        entry(d / FILE)
        return d

    return make


def _link(target: Callable[[Path, Sandbox], str]) -> Make:
    def make(work: Path, sb: Sandbox) -> Path:
        os.symlink(target(work, sb), work / FILE)
        return work / FILE

    return make


def _two(second: str) -> Make:
    def make(work: Path, sb: Sandbox) -> list[Path]:
        (work / "a.json").write_bytes(shipped_bytes())
        (work / FILE).write_text(second)
        return [work / "a.json", work / FILE]

    return make


def file_cases() -> list[Case]:
    """Not a catalog at all: empty, scalars, a directory, /dev/null, a FIFO, a device, link
    loops, 17 MiB, a layer that breaks the merged result, one driver claiming a device twice."""
    doc = shipped()
    devs = doc["drivers"]["be2net"]["devices"]  # several drivers may claim one device; one
    clash = {"drivers": {"be2net": {"devices": devs + [devs[0]]}}}  # driver twice may not
    spots: list[tuple[str, Make, frozenset[int], str | None]] = [
        ("empty", text_file(""), BAD, "$"), ("spaces", text_file(" \n\t "), BAD, "$"),
        ("null", text_file("null"), BAD, "$"), ("list", text_file("[]"), BAD, "$"),
        ("object", text_file("{}"), BAD, "$"), ("zero", text_file("0"), BAD, "$"),
        ("string", text_file('"catalog"'), BAD, "$"), ("true", text_file("true"), BAD, "$"),
        ("17MiB", text_file(shipped_bytes() + b" " * (17 << 20)), BAD, "$"),
        ("fifo", _fifo, BAD, None), ("char-device", _zero, BAD, None),
        ("dev-null", lambda w, sb: Path("/dev/null"), BAD, None),
        ("dir-with-fifo", _in_dir(lambda p: os.mkfifo(p)), BAD, None),
        ("dir-with-dir", _in_dir(lambda p: p.mkdir()), BAD, None),
        ("dir-with-broken", _in_dir(lambda p: p.write_text("{")), BAD, "$"),
        ("link-loop", _link(lambda w, sb: FILE), BAD, None),
        ("link-dangling", _link(lambda w, sb: "nowhere.json"), frozenset({3, 8}), None),
        ("link-to-canary", _link(lambda w, sb: str(sb.canary / "secret")), BAD, "$"),
        # a later layer merges over the base (contract "Layering"); one that deletes a
        # required key breaks the merged result, which is refused naming the path
        ("layer-deletes-required", _two(json.dumps({"drivers": {"be2net": {"versions": None}}})),
         BAD, "$.drivers.be2net"),
        ("same-device-twice", _two(json.dumps(clash)), BAD, "$.drivers.be2net.devices"),
    ]
    out = []
    for name, make, allowed, where in spots:
        for verb in VERB_ORDER:
            names = (FILE,) if name not in ("dev-null",) else ("/dev/null",)
            if name.startswith("dir-") and verb == "validate":  # validate takes files only
                names, where = ("cats",), None
            if name == "object" and verb == "validate":  # `{}` alone is an empty site layer:
                out.append(cat_case("cat-files", name, make, verb, None,  # valid over the
                                    frozenset({0}), names))  # catalog in force (docs/catalog.md)
                continue
            out.append(cat_case("cat-files", name, make, verb, where, allowed, names))
    return out


def semantic_cases() -> list[Case]:
    """Schema-valid catalogs whose facts contradict each other."""
    d = shipped()["drivers"]
    two_rec = with_raw(BE + ["4.1.307r", "status"], '"recommended"')
    no_kernels = json.loads(two_rec)
    del no_kernels["drivers"]["be2net"]["versions"]["10.2.470.14"]["kernels"]
    spots: list[tuple[str, str, str]] = [
        ("two-recommended", json.dumps(no_kernels), jpath(BE)),
        ("applies-to-unknown", with_raw(BE + ["4.1.307r", "applies_to", 0], '"dead:beef"'),
         jpath(BE + ["4.1.307r", "applies_to", 0])),
        ("device-twice", with_raw(["drivers", "be2net", "devices", 1],
                                  json.dumps(d["be2net"]["devices"][0])), "$.drivers.be2net"),
        ("fw-min-unparsable", with_raw(REC + ["firmware", "min"], '"x"'),
         jpath(REC + ["firmware", "min"])),
    ]
    return [cat_case("cat-semantic", name, text_file(text), verb, where)
            for name, text, where in spots for verb in VERB_ORDER]


def cat_kinds() -> dict[str, list[Case]]:
    """Every catalog kind, by name."""
    kinds = [truncated_cases, type_cases, key_cases, deep_cases, number_cases, version_cases,
             glob_cases, dup_cases, encoding_cases, file_cases, semantic_cases]
    out = {}
    for make in kinds:
        cases = make()
        out[cases[0].kind] = cases
    return out
