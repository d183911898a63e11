"""The fleet report model: per-host check results in, fleet-report.json and JUnit XML out.

Inputs are hostile (written by other machines): every field is checked and a bad one is a
`BadInputError` naming the file and the field, never a traceback or a half-written report.
"""

from __future__ import annotations

import datetime as _dt
import json
import xml.etree.ElementTree as ET
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


def _finding(raw: Any, where: str) -> Finding:
    if not isinstance(raw, dict):
        raise BadInputError(f"{where}: expected an object")
    if raw.get("layer") not in LAYERS:
        raise BadInputError(
            f"{where}.layer: {raw.get('layer')!r} is not one of {', '.join(LAYERS)}")
    if raw.get("status") not in FINDING_STATUSES:
        raise BadInputError(
            f"{where}.status: {raw.get('status')!r} is not one of {', '.join(FINDING_STATUSES)}")
    if not isinstance(raw.get("item"), str) or not raw["item"]:
        raise BadInputError(f"{where}.item: expected a non-empty string")
    for key in ("device", "interface", "reason", "fix"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise BadInputError(f"{where}.{key}: expected a string or null")
    out = {k: raw.get(k) for k in ("layer", "device", "interface", "item", "expected", "actual",
                                    "status", "reason", "fix")}
    out["evidence"] = raw.get("evidence")
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
        findings = [_finding(f, f"{data_where}.findings[{i}]")
                    for i, f in enumerate(raw_findings)]
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


def read_json(path: Path) -> Any:
    """A JSON file, size-limited; any problem is a BadInputError naming the file (a FIFO or
    device refused before opening, nesting and integer length bounded: `safejson`)."""
    return safejson.load_file(path, max_bytes=MAX_INPUT_BYTES)


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


# ------------------------------------------------------------------------ JUnit
def _x(value: Any) -> str:
    """Text safe for XML 1.0 (no control characters); ElementTree escapes the markup."""
    if isinstance(value, str):
        return printable(value)
    return printable(json.dumps(value, ensure_ascii=False))


def _x_lines(text: str) -> str:
    return "\n".join(printable(line) for line in text.split("\n"))


def finding_name(f: Finding) -> str:
    """'setting eth2 ring.rx' style name of one item: layer, where, what."""
    where = f.get("interface") or f.get("device")
    return " ".join(p for p in (f["layer"], where, f["item"]) if p)


def junit_xml(report: Report) -> bytes:
    """JUnit XML: a suite per host, a testcase per checked item (drift = failure,
    unknown/uncatalogued/unsupported = skipped), one erroring testcase for a host without a
    result."""
    root = ET.Element("testsuites", name="hwmgr fleet compliance")
    totals: Counter[str] = Counter()
    for name, host in report["hosts"].items():
        suite = ET.SubElement(root, "testsuite", name=_x(name), timestamp=report["generated"])
        counts: Counter[str] = Counter()
        cls = f"hwmgr.{_x(name)}"
        if host["status"] in NO_CHECK:
            case = ET.SubElement(suite, "testcase", classname=cls, name="hwmgr check")
            err = ET.SubElement(case, "error", message=_x(f"{host['status']}: {host['error']}"),
                                type=host["status"])
            err.text = _x_lines(host["error"] or "")
            counts.update(tests=1, errors=1)
        if host["status"] == "reboot-pending":
            case = ET.SubElement(suite, "testcase", classname=cls, name="reboot")
            ET.SubElement(case, "skipped",
                          message="reboot pending: the armed state is not live yet")
            counts.update(tests=1, skipped=1)
        for f in host["findings"]:
            case = ET.SubElement(suite, "testcase", classname=cls, name=_x(finding_name(f)))
            counts.update(tests=1)
            if f["status"] == "drift":
                msg = f"expected {_x(f['expected'])}, actual {_x(f['actual'])}"
                fail = ET.SubElement(case, "failure", message=msg, type="drift")
                body = [msg]
                if f.get("reason"):
                    body.append(f"reason: {f['reason']}")
                body.append(f"fix: {f['fix']}" if f.get("fix") else "fix: none known")
                fail.text = _x_lines("\n".join(body))
                counts.update(failures=1)
            elif f["status"] in ("unknown", "uncatalogued", "unsupported"):
                ET.SubElement(case, "skipped",
                              message=_x(f"{f['status']}: {f.get('reason') or 'no reason given'}"))
                counts.update(skipped=1)
        if not host["findings"] and host["status"] not in NO_CHECK:
            ET.SubElement(suite, "testcase", classname=cls, name="hwmgr check")
            counts.update(tests=1)
        for key in ("tests", "failures", "errors", "skipped"):
            suite.set(key, str(counts.get(key, 0)))
        totals.update(counts)
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(totals.get(key, 0)))
    ET.indent(root)
    xml: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return xml + b"\n"
