"""Reading what `fleet-report` is given: per-host check results and earlier reports.

Inputs are hostile (written by other machines): every field is checked and a bad one is a
`BadInputError` naming the file and the field, never a traceback or a half-written report.
A host's result is a `{status, check, error}` entry or a raw `hwmgr check --json` envelope,
one file per host in a directory or many in one file (`check --roots-from --json`, or what
the playbook writes); `report` builds the report from the hosts loaded here.

Each host is reduced to what the report keeps as it is read (status, counts, error, and each
finding's contract fields, `evidence` or, from check schema 3 on, `source`), and the rest of
its result dropped before the next is read: one file of many hosts is read a host at a time
(`stream`), and equal findings of different hosts are one object (`Interner`), so memory
follows the report's own size, not the inputs'.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Dict, Iterable, Mapping, Union, cast

from hwmgr import safejson
from hwmgr.errors import BadInputError
from hwmgr.fleet.report import (
    FINDING_ORDER,
    FINDING_STATUSES,
    HOST_STATUSES,
    LAYERS,
    NO_CHECK,
    Finding,
    LoadedHost,
    Point,
    SourceRef,
    point,
)
from hwmgr.fleet.stream import JSONStream
from hwmgr.output import printable

READS = (1, 2)  # fleet-report.json formats read back as --history (same host counts)
MAX_INPUT_BYTES = 32 << 20  # one host's result (a per-host file, or its entry in a big one)
# a file of many hosts (a batch check of 10,000 snapshots is ~100 MB of JSON; 10,000 real
# results with catalog evidence up to 300 MB); read a host at a time
MAX_BATCH_BYTES = 1 << 30


# ------------------------------------------------------------------------ reading one host
def _check_counts(raw: object, where: str) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise BadInputError(f"{where}: expected an object of counts")
    out = {}
    for key in FINDING_STATUSES:
        val = raw.get(key, 0)
        if not isinstance(val, int) or isinstance(val, bool) or val < 0:
            raise BadInputError(f"{where}.{key}: expected a count (integer >= 0)")
        out[key] = val
    return out


BASE_KEYS = ("layer", "device", "interface", "item", "expected", "actual", "status", "reason",
             "fix")
# what the report keeps of a finding: check's schema 1-2 carried the catalog's evidence text,
# schema 3 a `source` {ref, url} in its place (a finding with `source` keeps that instead)
FINDING_KEYS = frozenset((*BASE_KEYS, "evidence"))
SOURCE_KEYS = frozenset((*BASE_KEYS, "source"))
_SCALARS = frozenset((str, int, bool, type(None)))
_REF_URL = frozenset(("ref", "url"))


def _frozen(value: object) -> object:
    """A hashable stand-in for a finding's value that no value of another JSON text equals
    (the caller adds each value's type, so 1, 1.0 and true stay apart)."""
    if isinstance(value, (dict, list)):  # a flat one, e.g. a limit {"min": 10000}
        items = tuple(value.items()) if isinstance(value, dict) else tuple(value)
        kinds = tuple(type(v) for _, v in items) if isinstance(value, dict) else \
            tuple(map(type, items))
        if _SCALARS.issuperset(kinds):
            return (type(value), items, kinds)
    if isinstance(value, float):
        return repr(value)  # -0.0 == 0.0, yet they are written differently
    return json.dumps(value, ensure_ascii=False)  # equal texts: equal values, written alike


class Interner:
    """One object for equal findings of different hosts (a fleet runs few hardware and
    software combinations: 130,000 findings at 10,000 hosts, a few thousand distinct), each
    checked once and kept with its sort key; every output then does its per-finding work
    once per distinct finding."""

    def __init__(self) -> None:
        self.findings: dict[tuple[object, ...], Finding] = {}
        self.order: dict[int, tuple[int, int, str, str, str]] = {}

    def finding(self, raw: object, base: str, i: int) -> Finding:
        """`raw` checked and reduced (`_finding`), or the equal one met before."""
        if not isinstance(raw, dict):
            return _finding(raw, base, i)
        values = tuple(raw.values())
        types = tuple(map(type, values))
        key: tuple[object, ...]
        if _SCALARS.issuperset(types):
            key = (tuple(raw), values, types)
        elif types[-1] is dict and _SCALARS.issuperset(types[:-1]) and \
                _SCALARS.issuperset(map(type, values[-1].values())):
            # schema 3: scalars, then a flat `source` {ref, url}; keyed without a Python loop
            last = values[-1]
            key = (tuple(raw), values[:-1], types, tuple(last.items()),
                   tuple(map(type, last.values())))
        else:
            key = (tuple(raw), tuple(v if t in _SCALARS else _frozen(v)
                                     for v, t in zip(values, types)), types)
        found = self.findings.get(key)
        if found is None:
            # lone surrogates escaped as the whole-document reader does (read_results_file
            # leaves it to what is kept); once per distinct finding
            found = self.findings[key] = safejson._escape_surrogates(  # noqa: SLF001
                _finding(raw, base, i))
            self.order[id(found)] = sort_key(found)
        return found


def sort_key(f: Finding) -> tuple[int, int, str, str, str]:
    """Worst first, then by layer, device, interface and item: a host's findings in order."""
    return (FINDING_ORDER[f["status"]], LAYERS.index(f["layer"]), f["device"] or "",
            f["interface"] or "", f["item"])


def _source(raw: object, where: str) -> SourceRef | None:
    """check schema 3's `source`: null or {ref, url}, nothing else kept."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("ref"), str) or \
            not isinstance(raw.get("url"), (str, type(None))):
        raise BadInputError(f"{where}: expected null or {{\"ref\": string, \"url\": string "
                            "or null}")
    return cast(SourceRef, raw) if raw.keys() == _REF_URL else {"ref": raw["ref"],
                                                                 "url": raw.get("url")}


def _finding(raw: object, base: str, i: int) -> Finding:
    """One finding checked; `base` and `i` name it in an error (built only then). A finding
    with exactly the contract's keys is kept as it is (no copy), any other reduced to them:
    `source` in place of `evidence` when it has one."""
    if not isinstance(raw, dict):
        raise BadInputError(f"{base}.findings[{i}]: expected an object")
    kept: dict[str, object]
    if "source" in raw:
        src = _source(raw["source"], f"{base}.findings[{i}].source")
        kept = raw if raw.keys() == SOURCE_KEYS and src is raw["source"] else {
            **{k: raw.get(k) for k in BASE_KEYS}, "source": src}
    else:
        kept = raw if raw.keys() == FINDING_KEYS else {
            **{k: raw.get(k) for k in BASE_KEYS}, "evidence": raw.get("evidence")}
    out = cast(Finding, kept)  # its fields are checked here, before anyone reads them
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


def _unwrap(check: object, where: str) -> tuple[object, list[str]]:
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


def _status_from_check(data: Mapping[str, object]) -> str:
    """A host's status when only the check data says it (raw envelope files; a summary, when
    there is one, is an object of counts: `_check_counts` read it)."""
    if data.get("reboot_pending") is True:
        return "reboot-pending"
    if data.get("compliant") is True:
        return "compliant"
    summary = data.get("summary")
    counts = summary if isinstance(summary, dict) else {}
    if counts.get("drift"):
        return "drift"
    if counts.get("unknown"):
        return "unknown"
    return "drift" if data.get("compliant") is False else "unknown"


def load_host(raw: object, where: str, interner: Interner | None = None) -> LoadedHost:
    """One host's result (`{status, check, error}` or a raw check envelope) → report entry,
    holding nothing else of `raw`; with an `interner`, findings met before are shared."""
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
        one = _finding if interner is None else interner.finding
        findings = [one(f, data_where, i) for i, f in enumerate(raw_findings)]
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
    if interner is None:
        findings.sort(key=sort_key)
    else:
        order = interner.order
        findings.sort(key=lambda f: order[id(f)])
    return {"status": str(status), "summary": summary, "findings": findings, "error": error,
            "catalog_version": catalog_version}


def read_results(paths: list[Path]) -> dict[str, LoadedHost]:
    """Every host of every `--results` input: a directory of `<host>.json` files, or one file
    holding many hosts (`{"hosts": {name: entry}}`, or `hwmgr check --roots-from --json`'s
    envelope). A host named in two inputs is an error naming both."""
    hosts: dict[str, LoadedHost] = {}
    where: dict[str, str] = {}
    interner = Interner()
    for path in paths:
        found = (read_results_dir(path, interner) if path.is_dir()
                 else read_results_file(path, interner))
        for name, host in found.items():
            if name in hosts:
                raise BadInputError(f"{path}: host {printable(name)} is also in {where[name]}")
            hosts[name], where[name] = host, str(path)
    if not hosts:  # a file may hold no host (e.g. a run with only snapshots); the run may not
        raise BadInputError(f"{', '.join(map(str, paths))}: no host results")
    return hosts


class _Hosts(Dict[str, Union[LoadedHost, BadInputError]]):
    """A `hosts` object read a host at a time: name → its loaded entry, or the error that
    entry gave, raised only if this object turns out to be the one the file's shape uses
    (json's rules: a repeated key's last value counts)."""

    def result(self) -> dict[str, LoadedHost]:
        out: dict[str, LoadedHost] = {}
        for name, value in self.items():
            if isinstance(value, BadInputError):
                raise value
            out[name] = value
        return out


def _stream_hosts(js: JSONStream, base: str, depth: int, interner: Interner) -> _Hosts:
    out = _Hosts()
    for name in js.members():
        where = f"{base}.hosts[{name!r}]"
        # lone surrogates: escaped in what the host keeps (below and Interner.finding), not
        # searched for in all of its text
        raw = js.value(depth, f"hosts[{name!r}]", surrogates=False)
        try:
            host = load_host(raw, where, interner)
        except BadInputError as exc:
            out[name] = BadInputError(safejson._escape_surrogates(exc.message))  # noqa: SLF001
        else:
            escape = safejson._escape_surrogates  # noqa: SLF001
            if host["error"] is not None:
                host["error"] = escape(host["error"])
            if host["catalog_version"] is not None:
                host["catalog_version"] = escape(host["catalog_version"])
            out[name] = host
        del raw  # the host's whole result goes before the next is read
    return out


def read_results_file(path: Path, interner: Interner | None = None) -> dict[str, LoadedHost]:
    """One file of many hosts' results, each entry checked like a per-host file. Read a
    host at a time: the outer objects (`hosts`, an envelope's `data`) member by member,
    each host's entry reduced as soon as it is read."""
    interner = interner or Interner()
    with JSONStream(path, safejson.printable_path(path), MAX_BATCH_BYTES,
                    MAX_INPUT_BYTES) as js:
        if js.peek() != "{":  # not an object: the whole-document path says what is wrong
            return _entries(read_json(path, limit=MAX_BATCH_BYTES), path, interner)
        doc: dict[str, object] = {}
        depth = safejson.MAX_DEPTH - 1
        for key in js.members():
            if key == "hosts" and js.peek() == "{":
                doc[key] = _stream_hosts(js, str(path), depth - 1, interner)
            elif key == "data" and js.peek() == "{":
                data: dict[str, object] = {}
                for dkey in js.members():
                    if dkey == "hosts" and js.peek() == "{":
                        data[dkey] = _stream_hosts(js, f"{path}: data", depth - 2, interner)
                    else:
                        data[dkey] = js.value(depth - 1, f"data.{dkey}")
                doc[key] = data
            else:
                doc[key] = js.value(depth, key)
        js.end()
    return _entries(doc, path, interner)


def _entries(doc: object, path: Path, interner: Interner) -> dict[str, LoadedHost]:
    """The hosts of a many-hosts document: a batch check's `data.hosts`, else `hosts`."""
    base = str(path)
    if isinstance(doc, dict) and doc.get("command") == "check" and "format_version" in doc:
        data = doc.get("data")
        if not (isinstance(data, dict) and data.get("batch") is True):
            raise BadInputError(f"{path}: one host's check output; put it in a --results "
                                "directory as <host>.json")
        doc, base = data, f"{path}: data"
    entries = doc.get("hosts") if isinstance(doc, dict) else None
    if isinstance(entries, _Hosts):
        return entries.result()
    if not isinstance(entries, dict):
        raise BadInputError(f"{path}: expected {{\"hosts\": {{name: result}}}}")
    return {str(name): load_host(raw, f"{base}.hosts[{name!r}]", interner)
            for name, raw in entries.items()}


def read_results_dir(directory: Path, interner: Interner | None = None
                     ) -> dict[str, LoadedHost]:
    """Every `*.json` in `directory` as one host (name = file stem), checked and reduced
    before the next file is read."""
    if not directory.is_dir():
        raise BadInputError(f"{directory}: not a directory of per-host results")
    interner = interner or Interner()
    hosts: dict[str, LoadedHost] = {}
    for path in sorted(directory.glob("*.json")):
        # a file name that is not UTF-8 names its host with the bytes escaped (\xff)
        where = safejson.printable_path(path)
        hosts[printable(path.stem)] = load_host(read_json(path), where, interner)
    if not hosts:
        raise BadInputError(f"{directory}: no per-host result files (*.json)")
    return hosts


def read_json(path: Path, limit: int = MAX_INPUT_BYTES) -> object:
    """A JSON file, size-limited; any problem is a BadInputError naming the file (a FIFO or
    device refused before opening, nesting and integer length bounded: `safejson`)."""
    return safejson.load_file(path, max_bytes=limit)


# ------------------------------------------------------------------------ earlier reports
def _count(summary: dict[str, object], path: Path, key: str) -> int:
    """An earlier report's summary count (absent: 0); BadInputError naming it otherwise."""
    val = summary.get(key, 0)
    if not isinstance(val, int) or isinstance(val, bool) or val < 0:
        raise BadInputError(f"{path}: summary.{key}: expected a count (integer >= 0)")
    return val


def load_history(paths: Iterable[Path]) -> list[Point]:
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
        out.append(point(gen, partial(_count, summary, path)))
    out.sort(key=lambda p: p["generated"])
    return out
