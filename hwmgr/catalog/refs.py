"""The catalog's small shared vocabulary: device references, the default firmware scheme,
and JSON paths in messages.

Kept apart from validation and loading: matching, validation and verdicts all use them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Tuple, Union, cast

from hwmgr.catalog.entry import InboxPolicy

FIRMWARE_SCHEME = "firmware"  # an entry's firmware_scheme when it names none
PathPart = Union[str, int]  # a member name or a list index
JsonPath = Tuple[PathPart, ...]


def json_path(parts: Iterable[object]) -> str:
    """Render a path like $.drivers.be2net.versions['4.1.307r'].status."""
    out = "$"
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and p.isascii() and p.isidentifier():  # [A-Za-z_]\w*
            out += f".{p}"
        else:
            out += f"[{str(p)!r}]"
    return out


_PATH_PART = re.compile(r"""\.([A-Za-z_]\w*)|\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\]""")


def parse_json_path(text: str) -> JsonPath | None:
    """The parts of a path json_path rendered ('$.a[0]['x.y']' -> ('a', 0, 'x.y')), or None
    for text json_path does not write."""
    if not text.startswith("$"):
        return None
    parts: list[PathPart] = []
    pos = 1
    while pos < len(text):
        m = _PATH_PART.match(text, pos)
        if m is None:
            return None
        name, index, quoted = m.groups()
        parts.append(name if name is not None else int(index) if index is not None
                     else ast.literal_eval(quoted))
        pos = m.end()
    return tuple(parts)


def device_ref(rule: Mapping[str, object]) -> str | None:
    """'vendor:device[:subvendor:subdevice]' of a device rule, None for a class rule."""
    if "device" not in rule:
        return None
    ref = f"{rule['vendor']}:{rule['device']}"
    if "subvendor" in rule:
        ref += f":{rule['subvendor']}:{rule['subdevice']}"
    return ref


def rule_ref(rule: Mapping[str, object]) -> str | None:
    """A device rule's identity as layers merge it and `catalog show --effective` names it:
    its device_ref, or 'class [vendor:]CLASS' for a class rule; None for neither."""
    ref = device_ref(rule) if "vendor" in rule else None
    if ref is not None or "device" in rule:
        return ref
    if isinstance(rule.get("class"), str):
        vendor = rule.get("vendor")
        return f"class {vendor}:{rule['class']}" if isinstance(vendor, str) else \
            f"class {rule['class']}"
    return None


def ref_hits(ref: str, ids: tuple[str | None, ...]) -> bool:
    """Does an applies_to ref ('v:d' or 'v:d:sv:sd') name the device with these IDs?"""
    want = ref.split(":")
    return all(w == have for w, have in zip(want, ids))


def inbox_policies(entry: Mapping[str, object]) -> list[InboxPolicy]:
    """An entry's in-tree policies in the order they are tried: schema 3 allows a list (one
    per kernel family), schema 1-2 one object (as the schema checked it)."""
    inbox = entry.get("inbox")
    if not inbox:
        return []
    return cast("list[InboxPolicy]", list(inbox) if isinstance(inbox, list) else [inbox])


def evidence_text(evidence: object) -> str | None:
    """One line for people and findings: schema 1-2 evidence is text already; schema 3's
    sources read 'title <url>: observed', joined with '; '."""
    if isinstance(evidence, str):
        return evidence
    if not isinstance(evidence, list) or not evidence:
        return None
    parts = []
    for src in evidence:
        if not isinstance(src, dict):
            continue
        where = f" <{src['url']}>" if src.get("url") else ""
        parts.append(f"{src.get('title', '')}{where}: {src.get('observed', '')}")
    return "; ".join(parts) or None


_URL = re.compile(r"https?://[^\s<>\"']+")


def first_url(evidence: object) -> str | None:
    """The first URL evidence names: schema 3's first source with one, or the first
    http(s) URL in schema 1-2 text (a seed's field note names a file, not a URL)."""
    if isinstance(evidence, list):
        return next((s["url"] for s in evidence if isinstance(s, dict)
                     and isinstance(s.get("url"), str) and s["url"]), None)
    found = _URL.search(evidence) if isinstance(evidence, str) else None
    return found.group(0) if found else None


@dataclass(frozen=True)
class Cite:
    """Where a finding's rule or verdict comes from: a reference into the catalog
    ('version:DRIVER/VERSION', 'known_issue:ID', 'settings:DRIVER', 'rule:ID', …) and the
    first URL of its evidence. `text` is the evidence in full, for a terminal only: a result
    carries the reference, the catalog keeps the text (`hwmgr catalog show`)."""

    ref: str
    url: str | None = None
    text: str | None = None

    def to_json(self) -> dict[str, str | None]:
        """The citation as a finding's `source` member."""
        return {"ref": self.ref, "url": self.url}


def cite(ref: str, evidence: object) -> Cite:
    """A citation of catalog evidence (schema 1-2 text or schema 3 sources) under `ref`."""
    return Cite(ref, first_url(evidence), evidence_text(evidence))


def driver_key(name: object) -> str | None:
    """A driver name as module names compare ('mlx4-en' and 'mlx4_en' are one module), or
    None for no name."""
    return name.strip().replace("-", "_") if isinstance(name, str) and name.strip() else None


HEX4 = re.compile(r"^[0-9a-f]{4}$")


def hex4(value: object) -> str | None:
    """Normalise an ID ('0x19A2', '19a2') to 4 lowercase hex digits, else None."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower()
    v = v[2:] if v.startswith("0x") else v
    return v if HEX4.match(v) else None


def class4(value: object) -> str | None:
    """Base class + subclass from '0200', '020000' or '0x020000'."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower()
    v = v[2:] if v.startswith("0x") else v
    return hex4(v[:4]) if len(v) in (4, 6) else None
