"""The fleet report model: per-host check results in, fleet-report.json and JUnit XML out.

Inputs are hostile (written by other machines): every field is checked and a bad one is a
`BadInputError` naming the file and the field, never a traceback or a half-written report.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any, Dict, Iterable, TypedDict

from hwmgr import safejson
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
READS = (1, 2)  # formats read back as --history (their host counts are the same)
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
MAX_INPUT_BYTES = 32 << 20
# a file of many hosts (a batch check of 10,000 snapshots is ~100 MB of JSON)
MAX_BATCH_BYTES = 1 << 30

Finding = Dict[str, Any]  # one check finding, fields checked (hwmgr/schemas/check.schema.json)


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


# ------------------------------------------------------------------------ reading one host
def _check_counts(raw: Any, where: str) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise BadInputError(f"{where}: expected an object of counts")
    out = {}
    for key in FINDING_STATUSES:
        val = raw.get(key, 0)
        if not isinstance(val, int) or isinstance(val, bool) or val < 0:
            raise BadInputError(f"{where}.{key}: expected a count (integer >= 0)")
        out[key] = val
    return out


FINDING_KEYS = frozenset(("layer", "device", "interface", "item", "expected", "actual",
                          "status", "reason", "fix", "evidence"))


def _finding(raw: Any, base: str, i: int) -> Finding:
    """One finding checked; `base` and `i` name it in an error (built only then). A finding
    with exactly the contract's keys is kept as it is (no copy: 190,000 at 10,000 hosts)."""
    if not isinstance(raw, dict):
        raise BadInputError(f"{base}.findings[{i}]: expected an object")
    out: Finding = raw if raw.keys() == FINDING_KEYS else {k: raw.get(k) for k in FINDING_KEYS}
    if out["layer"] not in LAYERS:
        raise BadInputError(f"{base}.findings[{i}].layer: {out['layer']!r} is not one of "
                            f"{', '.join(LAYERS)}")
    if out["status"] not in FINDING_STATUSES:
        raise BadInputError(f"{base}.findings[{i}].status: {out['status']!r} is not one of "
                            f"{', '.join(FINDING_STATUSES)}")
    if not isinstance(out["item"], str) or not out["item"]:
        raise BadInputError(f"{base}.findings[{i}].item: expected a non-empty string")
    for key in ("device", "interface", "reason", "fix"):
        if out[key] is not None and not isinstance(out[key], str):
            raise BadInputError(f"{base}.findings[{i}].{key}: expected a string or null")
    return out


def _unwrap(check: Any, where: str) -> tuple[Any, list[str]]:
    """A check envelope → (data, errors); a bare data object passes through."""
    if isinstance(check, dict) and "format_version" in check and "command" in check:
        if check.get("format_version") != 1:
            raise BadInputError(f"{where}.format_version: {check.get('format_version')!r} is "
                                "not supported (this hwmgr reads 1)")
        if check.get("command") != "check":
            raise BadInputError(f"{where}.command: {check.get('command')!r}, expected 'check'")
        errors = check.get("errors") or []
        if not isinstance(errors, list):
            raise BadInputError(f"{where}.errors: expected a list")
        return check.get("data"), [str(e) for e in errors]
    return check, []


def _status_from_check(data: dict[str, Any]) -> str:
    """A host's status when only the check data says it (raw envelope files)."""
    if data.get("reboot_pending") is True:
        return "reboot-pending"
    if data.get("compliant") is True:
        return "compliant"
    counts = data.get("summary") or {}
    if counts.get("drift"):
        return "drift"
    if counts.get("unknown"):
        return "unknown"
    return "drift" if data.get("compliant") is False else "unknown"


def load_host(raw: Any, where: str) -> LoadedHost:
    """One host's result (`{status, check, error}` or a raw check envelope) → report entry."""
    if not isinstance(raw, dict):
        raise BadInputError(f"{where}: expected a JSON object")
    is_envelope = "format_version" in raw and "command" in raw
    errors: list[str] = []
    if is_envelope:
        data, errors = _unwrap(raw, where)
        status = None
        error = "; ".join(errors) or None
        if data is None or raw.get("status") == "error":
            status, error = "failed", error or "hwmgr check printed no data"
            data = None
        data_where = f"{where}.data"
    else:
        status = raw.get("status")
        if status not in HOST_STATUSES:
            raise BadInputError(
                f"{where}.status: {status!r} is not one of {', '.join(HOST_STATUSES)}")
        error = raw.get("error")
        if error is not None and not isinstance(error, str):
            raise BadInputError(f"{where}.error: expected a string or null")
        data, errors = _unwrap(raw.get("check"), f"{where}.check")
        data_where = f"{where}.check"
        if status in NO_CHECK:
            data = None
            error = error or "; ".join(errors) or f"host {status} (no reason given)"
    findings: list[Finding] = []
    summary: dict[str, int] | None = None
    catalog_version = None
    if data is not None:
        if not isinstance(data, dict):
            raise BadInputError(f"{data_where}: expected the check's data object or null")
        raw_findings = data.get("findings", [])
        if not isinstance(raw_findings, list):
            raise BadInputError(f"{data_where}.findings: expected a list")
        findings = [_finding(f, data_where, i) for i, f in enumerate(raw_findings)]
        if data.get("summary") is not None:
            summary = _check_counts(data["summary"], f"{data_where}.summary")
        else:
            counts = Counter(f["status"] for f in findings)
            summary = {k: counts.get(k, 0) for k in FINDING_STATUSES}
        cv = data.get("catalog_version")
        catalog_version = cv if isinstance(cv, str) else None
        if status is None:
            status = _status_from_check(data)
    elif status not in NO_CHECK:
        raise BadInputError(f"{data_where}: a {status} host needs its check result")
    findings.sort(key=lambda f: (FINDING_ORDER[f["status"]], LAYERS.index(f["layer"]),
                                 f["device"] or "", f["interface"] or "", f["item"]))
    return {"status": str(status), "summary": summary, "findings": findings, "error": error,
            "catalog_version": catalog_version}


def read_results(paths: list[Path]) -> dict[str, LoadedHost]:
    """Every host of every `--results` input: a directory of `<host>.json` files, or one file
    holding many hosts (`{"hosts": {name: entry}}`, or `hwmgr check --roots-from --json`'s
    envelope). A host named in two inputs is an error naming both."""
    hosts: dict[str, LoadedHost] = {}
    where: dict[str, str] = {}
    for path in paths:
        found = read_results_dir(path) if path.is_dir() else read_results_file(path)
        for name, host in found.items():
            if name in hosts:
                raise BadInputError(f"{path}: host {printable(name)} is also in {where[name]}")
            hosts[name], where[name] = host, str(path)
    if not hosts:  # a file may hold no host (e.g. a run with only snapshots); the run may not
        raise BadInputError(f"{', '.join(map(str, paths))}: no host results")
    return hosts


def read_results_file(path: Path) -> dict[str, LoadedHost]:
    """One file of many hosts' results, each entry checked like a per-host file."""
    doc = read_json(path, limit=MAX_BATCH_BYTES)
    base = str(path)
    if isinstance(doc, dict) and doc.get("command") == "check" and "format_version" in doc:
        data = doc.get("data")
        if not (isinstance(data, dict) and data.get("batch") is True):
            raise BadInputError(f"{path}: one host's check output; put it in a --results "
                                "directory as <host>.json")
        doc, base = data, f"{path}: data"
    entries = doc.get("hosts") if isinstance(doc, dict) else None
    if not isinstance(entries, dict):
        raise BadInputError(f"{path}: expected {{\"hosts\": {{name: result}}}}")
    return {str(name): load_host(raw, f"{base}.hosts[{name!r}]")
            for name, raw in entries.items()}


def read_results_dir(directory: Path) -> dict[str, LoadedHost]:
    """Every `*.json` in `directory` as one host (name = file stem), checked."""
    if not directory.is_dir():
        raise BadInputError(f"{directory}: not a directory of per-host results")
    hosts: dict[str, LoadedHost] = {}
    for path in sorted(directory.glob("*.json")):
        # a file name that is not UTF-8 names its host with the bytes escaped (\xff)
        where = safejson.printable_path(path)
        hosts[printable(path.stem)] = load_host(read_json(path), where)
    if not hosts:
        raise BadInputError(f"{directory}: no per-host result files (*.json)")
    return hosts


def read_json(path: Path, limit: int = MAX_INPUT_BYTES) -> Any:
    """A JSON file, size-limited; any problem is a BadInputError naming the file (a FIFO or
    device refused before opening, nesting and integer length bounded: `safejson`)."""
    return safejson.load_file(path, max_bytes=limit)


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


def schema() -> dict[str, Any]:
    """The bundled JSON Schema of fleet-report.json."""
    text = resources.files("hwmgr").joinpath("schemas/fleet-report.schema.json").read_text()
    doc: dict[str, Any] = json.loads(text)
    return doc


def load_history(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Earlier fleet-report.json files for the trend, oldest first; each one checked."""
    out = []
    for path in paths:
        doc = read_json(path)
        if not isinstance(doc, dict):
            raise BadInputError(f"{path}: expected a fleet-report.json object")
        if doc.get("format_version") not in READS:
            raise BadInputError(f"{path}: format_version {doc.get('format_version')!r} is not "
                                f"supported (this hwmgr reads {', '.join(map(str, READS))})")
        gen, summary = doc.get("generated"), doc.get("summary")
        if not isinstance(gen, str) or not isinstance(summary, dict):
            raise BadInputError(f"{path}: 'generated' and 'summary' are required")
        point: dict[str, Any] = {"generated": gen}
        for key in SUMMARY_KEYS:
            val = summary.get(key, 0)
            if not isinstance(val, int) or isinstance(val, bool) or val < 0:
                raise BadInputError(f"{path}: summary.{key}: expected a count (integer >= 0)")
            point[key] = val
        out.append(point)
    out.sort(key=lambda p: p["generated"])
    return out


def finding_name(f: Finding) -> str:
    """'setting eth2 ring.rx' style name of one item: layer, where, what."""
    where = f.get("interface") or f.get("device")
    return " ".join(p for p in (f["layer"], where, f["item"]) if p)
