"""The fleet report model: hosts loaded from their check results (`results`) in,
fleet-report.json out; the statuses, layers and orders every other fleet module shares."""

from __future__ import annotations

import datetime as _dt
import json
from collections import Counter
from importlib import resources
from typing import Callable, Iterator, TypedDict, cast

from hwmgr.errors import (
    EXIT_DRIFT,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_REBOOT_PENDING,
    EXIT_UNKNOWN,
    BadInputError,
)
from hwmgr.output import printable

FORMAT_VERSION = 2  # 2: the finding status `uncatalogued` and its per-host count
HOST_STATUSES = ("compliant", "drift", "unknown", "unreachable", "failed", "reboot-pending")
NO_CHECK = ("unreachable", "failed")  # no check result: the host has only an error
LAYERS = ("driver", "firmware", "setting", "sysctl")
FINDING_STATUSES = ("ok", "drift", "unknown", "uncatalogued", "unsupported")
# worst first: what a reader should look at first
HOST_ORDER = {s: i for i, s in enumerate(
    ("drift", "failed", "unreachable", "unknown", "reboot-pending", "compliant"))}
FINDING_ORDER = {s: i for i, s in enumerate(
    ("drift", "unknown", "uncatalogued", "unsupported", "ok"))}
SUMMARY_KEYS = ("hosts", "compliant", "drift", "unknown", "unreachable", "failed",
                "reboot_pending")


class SourceRef(TypedDict):
    """check schema 3's `source` of a finding: the catalog reference and its first URL."""

    ref: str
    url: str | None


class _FindingKeys(TypedDict):
    layer: str  # one of LAYERS
    device: str | None
    interface: str | None
    item: str
    expected: object  # what the catalog wants: a scalar or a flat object (a limit)
    actual: object
    status: str  # one of FINDING_STATUSES
    reason: str | None
    fix: str | None


class Finding(_FindingKeys, total=False):
    """One check finding as the report keeps it (fields checked by results._finding against
    hwmgr/schemas/check.schema.json): `evidence` (check schema 1-2) or `source` (3)."""

    evidence: object
    source: SourceRef | None


class HostEntry(TypedDict):
    """One host of fleet-report.json (hwmgr/schemas/fleet-report.schema.json)."""

    status: str  # one of HOST_STATUSES
    summary: dict[str, int] | None  # findings per FINDING_STATUSES; None without a check
    findings: list[Finding]  # worst first
    error: str | None


class LoadedHost(HostEntry):
    """A host as read, with the catalog version its check used (not part of the report)."""

    catalog_version: str | None


class Report(TypedDict):
    """fleet-report.json, format 2."""

    format_version: int
    generated: str  # UTC, "%Y-%m-%dT%H:%M:%SZ"
    catalog_version: str | None
    summary: dict[str, int]  # SUMMARY_KEYS
    hosts: dict[str, HostEntry]  # worst first, then by name


class Point(TypedDict):
    """One run on the trend: when, then its SUMMARY_KEYS counts (in that order)."""

    generated: str
    hosts: int
    compliant: int
    drift: int
    unknown: int
    unreachable: int
    failed: int
    reboot_pending: int


def point(generated: str, count: Callable[[str], int]) -> Point:
    """A trend point; `count(key)` gives each SUMMARY_KEYS count, asked in their order (so a
    checking `count` names the first bad one)."""
    return {"generated": generated, "hosts": count("hosts"), "compliant": count("compliant"),
            "drift": count("drift"), "unknown": count("unknown"),
            "unreachable": count("unreachable"), "failed": count("failed"),
            "reboot_pending": count("reboot_pending")}


MAX_EPOCH = 253402300799  # 9999-12-31T23:59:59Z


def utc_now(source_date_epoch: str | None = None) -> str:
    """The `generated` stamp: UTC, seconds, Z suffix; SOURCE_DATE_EPOCH (when a valid
    integer) fixes it, for reproducible reports."""
    epoch = source_date_epoch or ""
    if not epoch:
        return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    # ASCII digits only ('²'.isdigit() is true) and a year datetime can write (<= 9999)
    if not (epoch.isascii() and epoch.isdigit() and int(epoch[:12]) <= MAX_EPOCH
            and len(epoch) <= 12):
        raise BadInputError(f"SOURCE_DATE_EPOCH={printable(epoch[:40])}: expected seconds "
                            f"since 1970 (0 to {MAX_EPOCH})")
    return _dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------ the report
def build_report(hosts: dict[str, LoadedHost], *, generated: str | None = None,
                 source_date_epoch: str | None = None,
                 catalog_version: str | None = None) -> Report:
    """The fleet-report.json object (FORMAT_VERSION) from loaded hosts; `generated` defaults to
    now, or to SOURCE_DATE_EPOCH (the verb passes the run's config value) when set."""
    versions = sorted({v for h in hosts.values() if (v := h["catalog_version"])})
    counts = Counter(h["status"] for h in hosts.values())
    summary = {"hosts": len(hosts)}
    for key in SUMMARY_KEYS[1:]:
        summary[key] = counts.get(key.replace("_", "-"), 0)
    ordered = sorted(hosts.items(), key=lambda kv: (HOST_ORDER[kv[1]["status"]], kv[0]))
    return {
        "format_version": FORMAT_VERSION,
        "generated": generated or utc_now(source_date_epoch),
        "catalog_version": catalog_version or (", ".join(versions) if versions else None),
        "summary": summary,
        "hosts": {name: {"status": h["status"], "summary": h["summary"],
                         "findings": h["findings"], "error": h["error"]}
                  for name, h in ordered},
    }


CHUNK = 1 << 20  # bytes of JSON handed to the writer at a time


def report_chunks(report: Report) -> Iterator[bytes]:
    """fleet-report.json, compact (what `json.dumps(report, ensure_ascii=False, separators=
    (",", ":"))` writes, and a newline) in pieces of about a megabyte: the whole text is
    100-300 MB at 10,000 real hosts. Each distinct finding is encoded once, to UTF-8 too
    (hosts share equal findings: `results`); the C encoder does the rest."""
    enc = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def b(obj: object) -> bytes:
        return enc(obj).encode()

    done: dict[int, bytes] = {}  # id of a finding (all alive in `report`) -> its JSON
    parts = [b"{"]
    for n, (key, value) in enumerate(report.items()):
        parts.append((b"," if n else b"") + b(key) + b":")
        if key != "hosts":
            parts.append(b(value))
            continue
        parts.append(b"{")
        size = 0
        for i, (name, host) in enumerate(cast("dict[str, HostEntry]", value).items()):
            parts.append((b"," if i else b"") + b(name) + b":{")
            for j, (field, val) in enumerate(host.items()):
                parts.append((b"," if j else b"") + b(field) + b":")
                if field != "findings":
                    parts.append(b(val))
                    continue
                texts = []
                for f in cast("list[Finding]", val):
                    text = done.get(id(f))
                    if text is None:
                        text = done[id(f)] = b(f)
                    texts.append(text)
                    size += len(text)
                parts.append(b"[" + b",".join(texts) + b"]")
            parts.append(b"}")
            if size > CHUNK:
                yield b"".join(parts)
                parts, size = [], 0
        parts.append(b"}")
    parts.append(b"}\n")
    yield b"".join(parts)


def exit_code(report: Report) -> int:
    """Drift (5) first: it is a confirmed finding; then partial (6) for hosts without a
    result, reboot pending (7), unknown (11); 0 only when every host is compliant."""
    s = report["summary"]
    if s["drift"]:
        return EXIT_DRIFT
    if s["unreachable"] or s["failed"]:
        return EXIT_PARTIAL
    if s["reboot_pending"]:
        return EXIT_REBOOT_PENDING
    if s["unknown"]:
        return EXIT_UNKNOWN
    return EXIT_OK


def schema() -> dict[str, object]:
    """The bundled JSON Schema of fleet-report.json."""
    text = resources.files("hwmgr").joinpath("schemas/fleet-report.schema.json").read_text()
    doc: dict[str, object] = json.loads(text)
    return doc


def finding_name(f: Finding) -> str:
    """'setting eth2 ring.rx' style name of one item: layer, where, what."""
    where = f.get("interface") or f.get("device")
    return " ".join(p for p in (f["layer"], where, f["item"]) if p)
