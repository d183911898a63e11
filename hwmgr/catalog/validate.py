"""Reading and checking one catalog file before it is trusted: only a regular file of bounded
size is read (a FIFO or device named as a catalog must not block or stream forever), JSON is
parsed strictly (bounded depth, no duplicate keys, no NaN/Infinity, no number too large to be
meant, no control characters or lone surrogates anywhere), and the facts JSON Schema cannot
express are checked (versions parse, kernel globs are well-formed, dates exist, applies_to
names a listed device, one recommended version per device and kernel set).

Every finding is a (JSON path, message) pair; `hwmgr.catalog` turns them into one-line
errors naming the file. The JSON Schema itself is applied by `hwmgr.catalog` (cached).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Dict, Iterator, Optional, Sequence, Tuple

from hwmgr.catalog import kbuild, versions
from hwmgr.catalog.entry import (
    CatalogDoc,
    DriverEntry,
    FirmwareRequirementItem,
    KnownIssueItem,
    VersionEntry,
    VersionRange,
)
from hwmgr.catalog.refs import (
    FIRMWARE_SCHEME,
    JsonPath,
    PathPart,
    device_ref,
    inbox_policies,
    json_path,
    ref_hits,
)
from hwmgr.errors import VersionError

MAX_FILE_BYTES = 16 << 20
MAX_INT_DIGITS = 19  # every integer a catalog holds (sizes, counts) fits in 64 bits
MAX_DEPTH = 32  # the schema nests 7 levels deep
Finding = tuple[str, str]
# where a parsed value sits, as (parent link, key) pairs back to the root (None): built for
# every node, spelled as a JSON path only for a node with a problem (_spelled)
_Link = Optional[Tuple["_Link", PathPart]]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_C1 = re.compile(r"[\x7f-\x9f]")
# a JSON escape that may decode to one of _CONTROL (\n, \u001b, \u0085, \ud800); the raw
# text is searched, so an escaped backslash before a letter ("\\n") only adds a false alarm
_CONTROL_ESCAPE = re.compile(r"\\[bfnrt]|\\u00[01789][0-9a-fA-F]|\\u[dD][89a-fA-F]")


# ----------------------------------------------------------------------------- reading
def _kind(mode: int) -> str:
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def read_catalog(path: Path) -> tuple[bytes | None, str | None]:
    """(content, None) or (None, why not): a regular file, at most MAX_FILE_BYTES + 1 bytes
    read, opened non-blocking after a stat so that nothing else is ever opened."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            return None, f"is {_kind(mode)}, not a catalog file"
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # replaced since the stat
            return None, f"is {_kind(mode)}, not a catalog file"
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_FILE_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), None
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- parsing
class _Obj(Dict[str, object]):
    """A JSON object that remembers keys that appeared twice (json keeps the last)."""

    dups: list[str] = []  # class default: shared, never mutated (see _pairs)


class BadNumber:
    """A number no catalog means (NaN, Infinity, an overflowing float, a huge integer), kept
    as a placeholder so the error can name its JSON path."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        digits = len(self.text.lstrip("-"))
        return self.text if digits <= 24 else f"a number with {digits} digits"


def _pairs(pairs: list[tuple[str, object]]) -> _Obj:
    obj = _Obj(pairs)  # built in C; the key-by-key walk only when a key came twice
    if len(obj) != len(pairs):
        seen: set[str] = set()
        obj.dups = [k for k, _ in pairs if k in seen or seen.add(k)]  # type: ignore[func-returns-value]
    return obj


def _int(text: str) -> int | BadNumber:
    return BadNumber(text) if len(text.lstrip("-")) > MAX_INT_DIGITS else int(text)


def _float(text: str) -> float | BadNumber:
    value = float(text)
    return value if math.isfinite(value) else BadNumber(text)


def parse(raw: bytes, values: bool = True) -> tuple[object, list[Finding]]:
    """JSON bytes -> (data, findings); data is None when the text is not JSON at all.
    (Not safejson.parse: unusable numbers become placeholders so errors can name their path.)
    `values=False` leaves out the walk over every value (`_value_errors`): only for bytes
    that passed it before (a remembered verdict, `hwmgr.catalog.schema`). Those bytes hold
    no duplicate key and no unusable number, so they are parsed by `json` alone, without the
    hooks that would find them: the same data, in less than half the time."""
    if len(raw) > MAX_FILE_BYTES:
        return None, [("$", f"file is larger than {MAX_FILE_BYTES} bytes")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [("$", f"not UTF-8 text (byte {exc.start})")]
    try:
        data = json.loads(text, object_pairs_hook=_pairs, parse_int=_int, parse_float=_float,
                          parse_constant=BadNumber) if values else json.loads(text)
    except json.JSONDecodeError as exc:
        return None, [("$", f"invalid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})")]
    except RecursionError:
        return None, [("$", f"invalid JSON: nested more than {MAX_DEPTH} levels deep")]
    # a control character or lone surrogate can only reach a string through an escape (\n,
    # \u0000, \ud800) or as a raw DEL or C1 character (strict JSON refuses raw C0; UTF-8
    # refuses surrogates): a text with neither needs no per-string check. Catalogs hold
    # backslashes (regexes, Windows-style paths) but almost never such an escape.
    if not values:
        return data, []
    texts = _CONTROL_ESCAPE.search(text) is not None or _C1.search(text) is not None
    return data, _value_errors(data, texts=texts)


def _text_problem(text: str) -> str | None:
    hit = _CONTROL.search(text)
    if hit is None:
        return None
    what = "a lone surrogate" if 0xD800 <= ord(hit.group()) <= 0xDFFF else "a control character"
    return f"{text[:40]!r} holds {what} ({hit.group()!r})"


def _value_errors(node: object, texts: bool = True) -> list[Finding]:
    """Duplicate keys, unusable numbers, control characters (when `texts`) and too deep
    nesting, anywhere (iterative, so no depth can exhaust the stack). A node's path is a
    (parent link, key) chain, spelled out only for a node with a problem: a 50,000-rule
    catalog has a million nodes and almost never one."""
    problem = _text_problem if texts else None
    out: list[Finding] = []
    stack: list[tuple[object, _Link, int]] = [(node, None, 0)]
    while stack:
        cur, link, depth = stack.pop()
        if isinstance(cur, (dict, list)) and depth >= MAX_DEPTH:
            out.append((_spelled(link), f"nested more than {MAX_DEPTH} levels deep"))
        elif isinstance(cur, dict):
            for k in getattr(cur, "dups", []):
                out.append((_spelled(link), f"duplicate key {k!r} (JSON keeps only the last)"))
            for k, v in cur.items():
                bad = problem(k) if problem is not None else None
                if bad:
                    out.append((_spelled(link), f"key {bad}"))
                if _worth_a_look(v, problem):
                    stack.append((v, (link, k), depth + 1))
        elif isinstance(cur, list):
            stack.extend((v, (link, i), depth + 1) for i, v in enumerate(cur)
                         if _worth_a_look(v, problem))
        elif isinstance(cur, BadNumber):
            out.append((_spelled(link), f"{cur!r} is not a usable number"))
        elif isinstance(cur, str) and problem is not None:
            bad = problem(cur)
            if bad:
                out.append((_spelled(link), bad))
    return sorted(out)


def _worth_a_look(value: object, problem: object) -> bool:
    """Containers and bad numbers always; strings only when texts are checked."""
    return isinstance(value, (dict, list, BadNumber)) or (problem is not None and
                                                        isinstance(value, str))


def _spelled(link: _Link) -> str:
    """The JSON path of a (parent link, key) chain."""
    keys: list[PathPart] = []
    while link is not None:
        link, key = link
        keys.append(key)
    return json_path(keys[::-1])


# ----------------------------------------------------------------------------- semantics
def glob_problem(glob: str) -> str | None:
    """Why a kernel glob is malformed: an unclosed '[' or an empty range such as [z-a]
    (fnmatch would quietly match the bracket literally, or never match at all)."""
    i = 0
    while i < len(glob):
        if glob[i] != "[":
            i += 1
            continue
        j = i + 1
        if j < len(glob) and glob[j] == "!":
            j += 1
        if j < len(glob) and glob[j] == "]":
            j += 1
        end = glob.find("]", j)
        if end < 0:
            return f"unclosed '[' at position {i}"
        body = glob[i + 1:end].lstrip("!")
        for a, b in re.findall(r"(.)-(.)", body):
            if a > b:
                return f"empty range {a}-{b}"
        i = end + 1
    return None


def _date_problem(text: str) -> str | None:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return f"{text!r} is not a date that exists"
    return None


def semantic_errors(data: CatalogDoc) -> list[Finding]:
    """Rules JSON Schema cannot say (runs on schema-valid data). Duplicate device rules
    across files are found while merging (Catalog._add)."""
    out: list[Finding] = []
    bad = _date_problem(data["released"])
    if bad:
        out.append(("$.released", bad))
    for name, drv in data["drivers"].items():
        base = ["drivers", name]
        listed = isinstance(drv.get("inbox"), list)
        for i, policy in enumerate(inbox_policies(drv)):
            where = base + (["inbox", i] if listed else ["inbox"])
            for k, glob in enumerate(policy.get("kernels", [])):
                bad = glob_problem(glob)
                if bad:
                    out.append((json_path(where + ["kernels", k]), bad))
        schemes = _scheme_errors(name, drv)
        out += schemes
        if schemes:
            continue  # versions cannot be judged under a scheme that does not exist
        devices = [r for r in (device_ref(d) for d in drv["devices"]) if r]
        refs = set(devices) | {r[:9] for r in devices}
        for ver, ve in drv["versions"].items():
            out += _version_errors(name, drv, ver, ve, refs)
        out += _recommended_errors(name, drv)
        out += _knowledge_errors(name, drv, refs)
    out += _v2_errors(data)
    return sorted(set(out))


V2_DRIVER_KEYS = ("netdev_drivers",)
V2_TOP_KEYS = ("sysctl", "conditional_settings")


def _v2_errors(data: CatalogDoc) -> list[Finding]:
    """Schema 2 keys only in schema 2 files; sysctl names and conditional ids unique."""
    out: list[Finding] = []
    if data["schema_version"] == 1:
        out += [(json_path([k]), "needs schema_version 2") for k in V2_TOP_KEYS if k in data]
        out += [(json_path(["drivers", n, k]), "needs schema_version 2")
                for n, drv in data["drivers"].items() for k in V2_DRIVER_KEYS if k in drv]
    sysctl = [r["name"] for r in data.get("sysctl", [])]
    conditional = [r["id"] for r in data.get("conditional_settings", [])]
    for key, field, names in (("sysctl", "name", sysctl),
                              ("conditional_settings", "id", conditional)):
        seen: set[str] = set()
        for i, name in enumerate(names):
            if name in seen:
                out.append((json_path([key, i, field]), f"{name!r} is listed twice"))
            seen.add(name)
    return out


V3_DRIVER_KEYS = ("version_formats", "vendor_releases", "advice", "known_issues",
                  "firmware_requirements")


def v3_errors(data: object) -> list[Finding]:
    """Per file, whole or layer: schema 3 cites its sources (every evidence a list of sources,
    text refused), and its keys (baseline, distributions, in-tree policy lists, ...) need
    schema_version 3. A v2 site layer over a v3 base keeps its text evidence."""
    out: list[Finding] = []
    version = data.get("schema_version", 1) if isinstance(data, dict) else 1
    v3 = isinstance(version, int) and version >= 3
    for path, key, value in _walk(data, ()):
        if key == "evidence" and v3 and not isinstance(value, list):
            out.append((json_path(path), "schema 3 evidence is a list of sources "
                        "({title, url, observed}), not text"))
        elif not v3 and (key == "distributions" or (key == "evidence" and isinstance(value, list))
                         or (key == "status" and value == "baseline")
                         or (key == "inbox" and isinstance(value, list))
                         or (key in V3_DRIVER_KEYS and len(path) == 3)
                         or (key == "kernel_builds" and len(path) == 1)):
            out.append((json_path(path), "needs schema_version 3"))
    return out


def _walk(node: object, path: JsonPath) -> Iterator[tuple[JsonPath, PathPart, object]]:
    """(path, key, value) of every member of every object below `node`."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield path + (k,), k, v
            yield from _walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, path + (i,))


def _scheme_errors(name: str, drv: DriverEntry) -> list[Finding]:
    """version_scheme and firmware_scheme must name registered schemes (schemes.json)."""
    out: list[Finding] = []
    for key, scheme in (("version_scheme", drv["version_scheme"]),
                        ("firmware_scheme", drv.get("firmware_scheme", FIRMWARE_SCHEME))):
        try:
            versions.get_scheme(scheme)
        except VersionError as exc:
            out.append((json_path(["drivers", name, key]), str(exc)))
    return out


def _version_errors(name: str, drv: DriverEntry, ver: str, ve: VersionEntry,
                    refs: set[str]) -> list[Finding]:
    """One version's problems; `refs` is the driver's device refs and their 'v:d' prefixes,
    made once per driver (a driver has hundreds of versions and dozens of devices)."""
    out: list[Finding] = []
    where = ["drivers", name, "versions", ver]
    scheme = drv["version_scheme"]
    try:
        versions.parse(ver, scheme)
    except VersionError as exc:
        out.append((json_path(where), f"does not parse under scheme {scheme!r}: {exc}"))
    fw = ve.get("firmware")
    if fw:
        try:
            versions.parse(fw["min"], drv.get("firmware_scheme", FIRMWARE_SCHEME))
        except VersionError as exc:
            out.append((json_path(where + ["firmware", "min"]), str(exc)))
    for i, ref in enumerate(ve.get("applies_to", [])):
        if ref not in refs and ref[:9] not in refs:  # 'v:d' prefix narrows a rule
            out.append((json_path(where + ["applies_to", i]),
                        f"{ref} is not one of the devices of {name!r}"))
    for k, glob in enumerate(ve.get("kernels", [])):
        bad = glob_problem(glob)
        if bad:
            out.append((json_path(where + ["kernels", k]), bad))
    if "released" in ve:
        bad = _date_problem(ve["released"])
        if bad:
            out.append((json_path(where + ["released"]), bad))
    return out


def _knowledge_errors(name: str, drv: DriverEntry, refs: set[str]) -> list[Finding]:
    """Known issues and firmware requirements: unique ids, bounds that parse in the driver's
    scheme (and kernel versions on their line), a published source, devices of the entry."""
    scheme = drv["version_scheme"]
    issues = drv.get("known_issues", [])
    floors = drv.get("firmware_requirements", [])
    out = _item_errors(name, "known_issues", issues, refs)
    out += _item_errors(name, "firmware_requirements", floors, refs)
    for i, floor in enumerate(floors):
        where: list[PathPart] = ["drivers", name, "firmware_requirements", i, "driver_versions"]
        for j, rng in enumerate(floor.get("driver_versions", [])):
            out += _range_errors(where + [j], rng, scheme)
    for i, issue in enumerate(issues):
        for k, glob in enumerate(issue.get("kernel_releases", [])):
            bad = glob_problem(glob)
            if bad:
                out.append((json_path(["drivers", name, "known_issues", i, "kernel_releases",
                                       k]), bad))
        where = ["drivers", name, "known_issues", i, "affected"]
        affected = issue.get("affected", {})
        for j, rng in enumerate(affected.get("driver_versions", [])):
            out += _range_errors(where + ["driver_versions", j], rng, scheme)
        for line, krange in affected.get("kernels", {}).items():
            bounds: list[tuple[list[PathPart], str]] = [
                (["introduced"], krange["introduced"])] if "introduced" in krange else []
            bounds += [(["fixed", k], v) for k, v in enumerate(krange["fixed"])]
            for at, v in bounds:
                if not kbuild.valid(line, v):
                    out.append((json_path(where + ["kernels", line, *at]),
                                f"{v!r} is not a kernel version of the {line} line"))
    return out


def _item_errors(name: str, key: str,
                 items: Sequence[KnownIssueItem] | Sequence[FirmwareRequirementItem],
                 refs: set[str]) -> list[Finding]:
    """What known issues and firmware requirements share: unique ids, a published source,
    devices of the entry."""
    out: list[Finding] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where: list[PathPart] = ["drivers", name, key, i]
        if item["id"] in seen:
            out.append((json_path(where + ["id"]), f"{item['id']!r} is listed twice"))
        seen.add(item["id"])
        if not any(src.get("url") for src in item["sources"]):
            out.append((json_path(where + ["sources"]), "no published source (a url) "
                        "states the affected version and the fix"))
        for k, ref in enumerate(item.get("applies_to", [])):
            if ref not in refs and ref[:9] not in refs:
                out.append((json_path(where + ["applies_to", k]),
                            f"{ref} is not one of the devices of {name!r}"))
    return out


def _range_errors(where: list[PathPart], rng: VersionRange, scheme: str) -> list[Finding]:
    """Both bounds parse in the driver's scheme and the range is not empty."""
    out: list[Finding] = []
    for k, bound in (("introduced", rng.get("introduced")), ("fixed", rng.get("fixed"))):
        if bound is not None:
            try:
                versions.parse(bound, scheme)
            except VersionError as exc:
                out.append((json_path(where + [k]), f"does not parse under scheme "
                            f"{scheme!r}: {exc}"))
    if not out and "introduced" in rng and "fixed" in rng:
        try:
            if versions.compare(rng["introduced"], rng["fixed"], scheme) >= 0:
                out.append((json_path(where), f"empty range: {rng['introduced']} is not "
                            f"before {rng['fixed']}"))
        except VersionError as exc:
            out.append((json_path(where), str(exc)))
    return out


def _recommended_errors(name: str, drv: DriverEntry) -> list[Finding]:
    """At most one recommended version per device (per kernel set)."""
    out: list[Finding] = []
    recs = [(v, ve) for v, ve in drv["versions"].items() if ve["status"] == "recommended"]
    for rule in drv["devices"]:
        ref = device_ref(rule)
        ids = tuple(ref.split(":")) if ref else ()
        hits = [(v, ve) for v, ve in recs if "applies_to" not in ve
                or (ids and any(ref_hits(r, ids) for r in ve["applies_to"]))]
        for a, (va, ea) in enumerate(hits):
            for vb, eb in hits[a + 1:]:
                ka, kb = ea.get("kernels"), eb.get("kernels")
                if not ka or not kb or sorted(ka) == sorted(kb):
                    out.append((json_path(["drivers", name, "versions"]),
                                f"{va} and {vb} are both recommended for "
                                f"{rule['name']!r} on the same kernels"))
    return out
