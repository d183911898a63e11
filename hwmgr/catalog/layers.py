"""Catalog layering: a base catalog, then site files, merged in order with provenance.

Later layers win. Objects merge key by key; lists and scalars replace; `null` deletes a key.
Two top-level lists merge by a key instead of replacing: `sysctl` rules by `name` (a later rule
replaces the earlier one whole: one rule is one constraint) and `conditional_settings` by `id`
(merged key by key, so a site can write `{"id": "...", "enabled": false}`); a driver's
`known_issues` and `firmware_requirements` merge by `id` (a layer adds or replaces one). Every value
remembers the file it came from, for `hwmgr catalog show --effective`.

A layer after the first may be partial: it is checked against the catalog schema with every
`required` removed (its own shape: types, enums, known keys), and the merged result is then
checked against the full schema and the semantic rules.
"""

from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any, Iterator, Mapping

Key = tuple[Any, ...]  # a JSON path as its parts

KEYED_LISTS = {"sysctl": ("name", False), "conditional_settings": ("id", True)}
# lists of a driver entry merged by id (a layer adds or replaces a known issue, never wipes
# the base's others); an item replaced whole: one issue is one statement of its sources
DRIVER_KEYED_LISTS = {"known_issues": "id", "firmware_requirements": "id"}
_RELAX = ("required", "minProperties", "dependentRequired")
# what a layer gives whole, never amends: a known issue or firmware requirement (merged by
# id, replaced whole) and the ranges and sources inside them, so a layer's own check holds
# them to the full schema and the merged check need not walk them again
WHOLE_DEFS = ("known_issue", "firmware_requirement", "version_range", "kernel_range",
              "source_ref")
WHOLE_LISTS = tuple(DRIVER_KEYED_LISTS)


def relaxed_schema(schema: Any) -> Any:
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


def without_whole_lists(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow view of a merged catalog without the lists its layers gave whole (each item
    passed its own layer's full check): what the merged schema check still has to walk."""
    drivers = doc.get("drivers")
    if not isinstance(drivers, dict):
        return dict(doc)
    return {**doc, "drivers": {n: ({k: v for k, v in d.items() if k not in WHOLE_LISTS}
                                   if isinstance(d, dict) else d)
                               for n, d in drivers.items()}}


def without_nulls(doc: Any) -> Any:
    """A copy with every object member whose value is null left out (they mean 'delete')."""
    if isinstance(doc, dict):
        return {k: without_nulls(v) for k, v in doc.items() if v is not None}
    if isinstance(doc, list):
        return [without_nulls(v) for v in doc]
    return doc


class Provenance:
    """Which file set each value: longest recorded prefix of a JSON path wins."""

    def __init__(self) -> None:
        self._by: dict[Key, Path] = {}

    def record(self, path: Key, source: Path) -> None:
        """`path` (and everything below it) now comes from `source`."""
        n = len(path)
        for k in [k for k in self._by if k[:n] == path]:
            del self._by[k]
        self._by[path] = source

    def of(self, path: Key) -> Path | None:
        """The file the value at `path` came from."""
        for n in range(len(path), -1, -1):
            hit = self._by.get(tuple(path[:n]))
            if hit is not None:
                return hit
        return None

    def files_under(self, path: Key) -> set[Path]:
        """Every file that contributed something at or below `path`."""
        n = len(path)
        out = {p for k, p in self._by.items() if k[:n] == path}
        top = self.of(path)
        return out | ({top} if top else set())


def _own(val: Any, take: bool) -> Any:
    """The layer's value itself when the caller gives the layer up (`take`), else a copy."""
    return val if take else deepcopy(val)


def _merge_obj(dst: dict[str, Any], src: Mapping[str, Any], source: Path, prov: Provenance,
               path: Key, take: bool = False) -> None:
    for key, val in src.items():
        here = (*path, key)
        if val is None:
            dst.pop(key, None)
            prov.record(here, source)  # the deletion is this layer's doing
        elif isinstance(val, dict) and isinstance(dst.get(key), dict):
            _merge_obj(dst[key], val, source, prov, here, take)
        elif (len(path) == 2 and path[0] == "drivers" and key in DRIVER_KEYED_LISTS
              and isinstance(val, list) and isinstance(dst.get(key), list)):
            _merge_keyed(dst[key], val, DRIVER_KEYED_LISTS[key], False, source, prov, here,
                         take)
        else:
            dst[key] = _own(val, take)
            prov.record(here, source)


def _merge_keyed(dst: list[Any], src: list[Any], key: str, deep: bool, source: Path,
                 prov: Provenance, top: Key, take: bool) -> None:
    """Merge list items by `key`: a new key appends, a known one replaces or merges; `top`
    is the list's path (provenance is recorded per item)."""
    index = {item.get(key): i for i, item in enumerate(dst) if isinstance(item, dict)}
    for item in src:
        if not isinstance(item, dict) or item.get(key) is None:
            dst.append(_own(item, take))  # the schema check of the merged result names it
            continue
        here = (*top, item[key])
        if item[key] in index and deep:
            _merge_obj(dst[index[item[key]]], item, source, prov, here, take)
        elif item[key] in index:
            dst[index[item[key]]] = _own(item, take)
            prov.record(here, source)
        else:
            index[item[key]] = len(dst)
            dst.append(_own(item, take))
            prov.record(here, source)


def merge(dst: dict[str, Any], layer: Mapping[str, Any], source: Path,
          prov: Provenance, take: bool = False) -> None:
    """Apply one layer onto the merged document `dst` in place, recording provenance. With
    `take` the layer's values become part of `dst` (no copy): only for a layer read for this
    merge alone, since later layers then change them in place."""
    for key, val in layer.items():
        if key in KEYED_LISTS and isinstance(val, list) and isinstance(dst.get(key), list):
            ident, deep = KEYED_LISTS[key]
            _merge_keyed(dst[key], val, ident, deep, source, prov, (key,), take)
        elif key in KEYED_LISTS and isinstance(val, list):
            dst[key] = []
            _merge_keyed(dst[key], val, KEYED_LISTS[key][0], KEYED_LISTS[key][1], source, prov,
                         (key,), take)
        else:
            _merge_obj(dst, {key: val}, source, prov, (), take)


def leaves(value: Any, path: Key = ()) -> Iterator[tuple[Key, Any]]:
    """(path, value) of every scalar or list under `value` (objects are walked)."""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    else:
        yield path, value
