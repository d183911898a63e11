"""Catalog layering: a base catalog, then site files, merged in order with provenance.

Later layers win. Objects merge key by key; scalars replace; `null` deletes a key. A list
replaces, except the lists of KEYED (docs/catalog-trust.md has the table): their members
merge by a key, so a layer that adds one member need not repeat the others. A member with a
known key replaces that member (whole, or key by key for a `deep` list), a new key is added,
and `{KEY: null}` or a member with `"remove": true` takes one out (removing a member that is
not there changes nothing). Every value remembers the file it came from (a member by its key),
for `hwmgr catalog show --effective` and for naming the layer behind an error (`blame`).

A layer after the first may be partial: it is checked against the catalog schema with every
`required` removed (its own shape: types, enums, known keys), and the merged result is then
checked against the full schema and the semantic rules.
"""

from __future__ import annotations

import re
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, Mapping, Sequence, TypeVar, Union

from hwmgr.catalog.refs import JsonPath, PathPart, json_path, rule_ref

Key = JsonPath  # a JSON path as its parts; a keyed list's member by its key
_T = TypeVar("_T")


@dataclass(frozen=True)
class Keyed:
    """How one list merges: what its members are called, the key of a member (`key`; None
    for a list of plain values, each its own key), and whether a member a layer names again
    is merged key by key (`deep`) or replaced whole."""

    noun: str
    key: Callable[[Mapping[str, object]], str | None] | None = None
    deep: bool = False

    def of(self, member: object) -> str | None:
        """The member's key; None when it has none (the merged schema check names it)."""
        if self.key is None:
            return member if isinstance(member, str) else None
        return self.key(member) if isinstance(member, dict) else None

    def removes(self, member: object) -> str | None:
        """The key of the member a layer's item takes out (`{KEY: null}`, or a member with
        `"remove": true`), else None."""
        if isinstance(member, dict) and len(member) == 1:
            (key, value), = member.items()
            if value is None:
                return str(key)  # a JSON member name
        if isinstance(member, dict) and member.get("remove") is True:
            return self.of({k: v for k, v in member.items() if k != "remove"})
        return None


def _field(name: str) -> Callable[[Mapping[str, object]], str | None]:
    def key(member: Mapping[str, object]) -> str | None:
        value = member.get(name)
        return value if isinstance(value, str) else None
    return key


# a node of KEYED: "" holds a keyed list's rule, "*" any key's node, a literal key its own
KeyedNode = Dict[str, Union["KeyedNode", Keyed]]


def _list(spec: Keyed, members: KeyedNode | None = None) -> KeyedNode:
    """A node of KEYED for a keyed list ("" holds its rule, "*" what lies in its members)."""
    return {"": spec, **({"*": members} if members else {})}


# The one table of the lists that merge by key: a path of object keys ("*": any key; a deep
# list's members are found by their key) to the list's rule. Every other list replaces.
KEYED: KeyedNode = {
    "sysctl": _list(Keyed("sysctl rule", _field("name"))),  # one rule, one constraint: whole
    "conditional_settings": _list(Keyed("conditional setting", _field("id"), deep=True), {
        "drivers": _list(Keyed("driver name")), "when": {"qdisc": _list(Keyed("qdisc"))}}),
    "drivers": {"*": {
        "devices": _list(Keyed("device", rule_ref)),  # one rule, one match statement: whole
        "known_issues": _list(Keyed("known issue", _field("id"))),  # one cited statement
        "firmware_requirements": _list(Keyed("firmware requirement", _field("id"))),
        "pci_drivers": _list(Keyed("PCI driver name")),
        "netdev_drivers": _list(Keyed("netdev driver name")),
        "versions": {"*": {"kernels": _list(Keyed("kernel glob")),
                           "applies_to": _list(Keyed("device reference")),
                           "distributions": _list(Keyed("distribution")),
                           "source": {"mirrors": _list(Keyed("mirror"))}}},
        "inbox": {"kernels": _list(Keyed("kernel glob")),
                  "distributions": _list(Keyed("distribution"))},
    }},
}
# lists of a driver entry each layer gives member by member, whole, and checks against the
# full schema itself (WHOLE_DEFS), so the merged check need not walk them again
WHOLE_LISTS = ("known_issues", "firmware_requirements")
_RELAX = ("required", "minProperties", "dependentRequired")
# what a layer gives whole, never amends: a known issue or firmware requirement (merged by
# id, replaced whole) and the ranges and sources inside them, so a layer's own check holds
# them to the full schema and the merged check need not walk them again
WHOLE_DEFS = ("known_issue", "firmware_requirement", "version_range", "kernel_range",
              "source_ref")


def _node(path: Key) -> KeyedNode | None:
    """The node of KEYED at `path` (a literal key before "*"), or None."""
    node: KeyedNode | Keyed | None = KEYED
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part) if part in node and part != "" else node.get("*")
        if node is None:
            return None
    return node if isinstance(node, dict) else None


def keyed(path: Key) -> Keyed | None:
    """How the list at `path` merges by key, or None when it replaces."""
    node = _node(path)
    rule = node.get("") if node is not None else None
    return rule if isinstance(rule, Keyed) else None


def relaxed_schema(schema: object) -> object:
    """The schema with every requirement to *have* a key removed (a partial layer's shape);
    alternatives under oneOf/anyOf keep theirs, since that is how they tell themselves apart
    (a sysctl rule is one of value/min/max/fields, and is replaced whole, never amended), and
    so do the definitions a layer gives whole (WHOLE_DEFS)."""
    if isinstance(schema, dict):
        return {k: (v if k in ("oneOf", "anyOf") else
                    {n: (d if n in WHOLE_DEFS else relaxed_schema(d)) for n, d in v.items()}
                    if k == "$defs" and isinstance(v, dict) else relaxed_schema(v))
                for k, v in schema.items() if k not in _RELAX}
    if isinstance(schema, list):
        return [relaxed_schema(v) for v in schema]
    return schema


def without_whole_lists(doc: Mapping[str, object]) -> dict[str, object]:
    """A shallow view of a merged catalog without the lists its layers gave whole (each item
    passed its own layer's full check): what the merged schema check still has to walk."""
    drivers = doc.get("drivers")
    if not isinstance(drivers, dict):
        return dict(doc)
    return {**doc, "drivers": {n: ({k: v for k, v in d.items() if k not in WHOLE_LISTS}
                                   if isinstance(d, dict) else d)
                               for n, d in drivers.items()}}


def without_nulls(doc: object) -> object:
    """A copy with every object member whose value is null left out (they mean 'delete'),
    and every list item that only deletes (`{KEY: null}`: it takes a member out), for the
    schema check of a layer's own shape."""
    if isinstance(doc, dict):
        return {k: without_nulls(v) for k, v in doc.items() if v is not None}
    if isinstance(doc, list):
        return [without_nulls(v) for v in doc
                if not (isinstance(v, dict) and v and all(x is None for x in v.values()))]
    return doc


class Provenance:
    """Which file set each value (longest recorded prefix of a JSON path wins; a keyed list's
    member is found by its key), and which file took out a member or key (`removed`)."""

    def __init__(self) -> None:
        self._by: dict[Key, Path] = {}
        self.removed: dict[Key, Path] = {}

    def record(self, path: Key, source: Path, removed: bool = False) -> None:
        """`path` (and everything below it) now comes from `source`, or was taken out by it."""
        n = len(path)
        for table in (self._by, self.removed):
            for k in [k for k in table if k[:n] == path]:
                del table[k]
        self._by[path] = source
        if removed:
            self.removed[path] = source

    def owner(self, path: Key) -> tuple[Key, Path] | None:
        """(recorded path, file) of the record that covers `path`."""
        for n in range(len(path), -1, -1):
            hit = self._by.get(tuple(path[:n]))
            if hit is not None:
                return tuple(path[:n]), hit
        return None

    def of(self, path: Key) -> Path | None:
        """The file the value at `path` came from."""
        hit = self.owner(path)
        return hit[1] if hit else None

    def changes(self, path: Key) -> list[tuple[Key, Path]]:
        """(recorded path, file) of every record at or below `path`, and the one covering it."""
        n = len(path)
        out = [(k, p) for k, p in self._by.items() if k[:n] == path]
        top = self.owner(path)
        return out + ([top] if top and top not in out else [])

    def files_under(self, path: Key) -> set[Path]:
        """Every file that contributed something at or below `path`."""
        return {p for _k, p in self.changes(path)}


def _own(val: _T, take: bool) -> _T:
    """The layer's value itself when the caller gives the layer up (`take`), else a copy."""
    return val if take else deepcopy(val)


def _fresh(path: Key, val: _T, take: bool) -> _T:
    """A value new to the merged document: the layer's own (or a copy) with the removals in
    its keyed lists dropped, since there is nothing earlier for them to take out."""
    val = _own(val, take)
    _drop_removals(_node(path), val)
    return val


def _drop_removals(node: object, val: object) -> None:
    """Walk `val` along the KEYED node `node` and drop every removal item of a keyed list."""
    if not isinstance(node, dict):
        return
    if isinstance(val, list) and isinstance(node.get(""), Keyed):
        spec: Keyed = node[""]
        val[:] = [m for m in val if spec.removes(m) is None]
        if "*" in node:
            for member in val:
                _drop_removals(node["*"], member)
    elif isinstance(val, dict):
        for key, sub in node.items():
            if key == "*":
                for child in val.values():
                    _drop_removals(sub, child)
            elif key and key in val:
                _drop_removals(sub, val[key])


def _merge_obj(dst: dict[str, object], src: Mapping[str, object], source: Path,
               prov: Provenance, path: Key, take: bool = False) -> None:
    for key, val in src.items():
        here = (*path, key)
        spec = keyed(here) if isinstance(val, list) else None
        old = dst.get(key)
        if val is None:
            dst.pop(key, None)
            prov.record(here, source, removed=True)  # the deletion is this layer's doing
        elif isinstance(val, dict) and isinstance(old, dict):
            _merge_obj(old, val, source, prov, here, take)
        elif spec is not None and isinstance(val, list):
            if not isinstance(old, list):
                old = dst[key] = []
                prov.record(here, source)
            _merge_keyed(old, val, spec, source, prov, here, take)
        else:
            dst[key] = _fresh(here, val, take)
            prov.record(here, source)


def _merge_keyed(dst: list[object], src: list[object], spec: Keyed, source: Path,
                 prov: Provenance, top: Key, take: bool) -> None:
    """Merge a layer's list into the merged one by key: a removal takes its member out, a
    known key replaces (or, deep, merges into) its member, a new key is appended; `top` is
    the list's path (provenance is recorded per member, by key)."""
    index = {spec.of(m): i for i, m in enumerate(dst)}
    for item in src:
        gone = spec.removes(item)
        if gone is not None:
            if gone in index:
                del dst[index[gone]]
                index = {spec.of(m): i for i, m in enumerate(dst)}
                prov.record((*top, gone), source, removed=True)
            continue
        key = spec.of(item)
        if key is None:
            dst.append(_own(item, take))  # the schema check of the merged result names it
            continue
        here = (*top, key)
        old = dst[index[key]] if key in index else None
        if spec.deep and isinstance(old, dict) and isinstance(item, dict):  # (one with a key is)
            _merge_obj(old, item, source, prov, here, take)
        elif key in index:
            dst[index[key]] = _fresh(here, item, take)
            prov.record(here, source)
        else:
            index[key] = len(dst)
            dst.append(_fresh(here, item, take))
            prov.record(here, source)


def merge(dst: dict[str, object], layer: Mapping[str, object], source: Path,
          prov: Provenance, take: bool = False) -> None:
    """Apply one layer onto the merged document `dst` in place, recording provenance. With
    `take` the layer's values become part of `dst` (no copy): only for a layer read for this
    merge alone, since later layers then change them in place."""
    _merge_obj(dst, layer, source, prov, (), take)


def leaves(value: object, path: Key = ()) -> Iterator[tuple[Key, object]]:
    """(path, value) of every scalar or list under `value`, which sits at `path`: objects are
    walked, a keyed list gives each member under its key (a deep list's members walked too)."""
    spec = keyed(path) if isinstance(value, list) and value else None
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    elif spec is not None and isinstance(value, list):  # (a keyed list: spec says so)
        for i, member in enumerate(value):
            key = spec.of(member)
            here = (*path, i if key is None else key)
            if spec.deep:
                yield from leaves(member, here)
            else:
                yield here, member
    else:
        yield path, value


def _members(doc: object, node: object = None,
             path: Key = ()) -> Iterator[tuple[Key, Keyed, object]]:
    """(path, rule, member) of every member of every keyed list in `doc` (a layer as read)."""
    node = KEYED if node is None else node
    if not isinstance(node, dict):
        return
    if isinstance(doc, list) and isinstance(node.get(""), Keyed):
        for i, member in enumerate(doc):
            yield (*path, i), node[""], member
            if "*" in node and node[""].removes(member) is None:
                yield from _members(member, node["*"], (*path, i))
    elif isinstance(doc, dict):
        for key, sub in node.items():
            for k in (doc if key == "*" else [key] if key and key in doc else []):
                yield from _members(doc[k], sub, (*path, k))


def removals(doc: object) -> list[Key]:
    """The path of every removal item in the keyed lists of `doc` (a complete catalog has
    nothing to take out: it leaves the member out)."""
    return [p for p, spec, member in _members(doc) if spec.removes(member) is not None]


def repeated(doc: object) -> list[tuple[Key, str]]:
    """(path, message) of every member of one file's keyed list whose key an earlier member
    of that list has: merged, the later would silently win."""
    out: list[tuple[Key, str]] = []
    seen: set[tuple[Key, str | None]] = set()
    for p, spec, member in _members(doc):
        key = spec.removes(member)
        key = spec.of(member) if key is None else key
        if key is not None and (p[:-1], key) in seen:
            out.append((p, f"{spec.noun} {key} is listed twice"))
        seen.add((p[:-1], key))
    return out


def keyed_path(doc: object, path: Sequence[PathPart]) -> Key:
    """A path of the merged document with each index into a keyed list replaced by that
    member's key: the path provenance knows it by."""
    out: list[PathPart] = []
    node = doc
    for part in path:
        if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            spec = keyed(tuple(out))
            key = spec.of(node[part]) if spec else None
            out.append(part if key is None else key)
            node = node[part]
            continue
        out.append(part)
        node = node.get(part) if isinstance(node, dict) else None
    return tuple(out)


def blame(doc: object, prov: Provenance, order: Sequence[Path], path: Sequence[PathPart],
          message: str) -> str:
    """One line for a semantic error of the merged document at `path`, naming the layer that
    caused it: the one that took out a member the error names (a removed device that a
    version's applies_to still names), else the last layer that set a value at or under the
    path (and a later one that changed its driver entry elsewhere)."""
    where = json_path(path)
    kpath = keyed_path(doc, path)
    rank = {p: i for i, p in enumerate(order)}
    scope = kpath[:2] if kpath[:1] == ("drivers",) else kpath[:1]
    for gone, src in sorted(prov.removed.items(), key=lambda r: -rank.get(r[1], -1)):
        key = gone[-1]
        spec = keyed(gone[:-1])
        if (gone[:2] == scope and spec is not None and isinstance(key, str)
                and re.search(rf"(?<![\w:]){re.escape(key)}(?!\w)", message)):
            owner = f" of {gone[1]}" if gone[0] == "drivers" and len(gone) > 3 else ""
            return f"{src} removed {spec.noun} {key}{owner}, which {where} names ({message})"
    here = max(prov.changes(kpath), key=lambda c: rank.get(c[1], -1), default=None)
    if here is None:
        return f"{where}: {message}"
    line = f"{where}: {message} ({here[1]} set {json_path(here[0])}"
    later = max(prov.changes(scope), key=lambda c: rank.get(c[1], -1), default=None)
    if later is not None and rank.get(later[1], -1) > rank.get(here[1], -1):
        line += f"; {later[1]} changed {json_path(later[0])} after"
    return line + ")"
