"""The catalog's small shared vocabulary: device references, the default firmware scheme,
and JSON paths in messages.

Kept apart from validation and loading: matching, validation and verdicts all use them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

FIRMWARE_SCHEME = "firmware"  # an entry's firmware_scheme when it names none


def json_path(parts: Iterable[Any]) -> str:
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


def device_ref(rule: Mapping[str, Any]) -> str | None:
    """'vendor:device[:subvendor:subdevice]' of a device rule, None for a class rule."""
    if "device" not in rule:
        return None
    ref = f"{rule['vendor']}:{rule['device']}"
    if "subvendor" in rule:
        ref += f":{rule['subvendor']}:{rule['subdevice']}"
    return ref


def ref_hits(ref: str, ids: tuple[str | None, ...]) -> bool:
    """Does an applies_to ref ('v:d' or 'v:d:sv:sd') name the device with these IDs?"""
    want = ref.split(":")
    return all(w == have for w, have in zip(want, ids))
