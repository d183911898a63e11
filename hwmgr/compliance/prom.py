"""`hwmgr check` results as a Prometheus textfile (node_exporter's textfile collector).

The metrics (docs/check-report.md):

  hwmgr_compliance_item{layer,device,interface,item}          1 ok, 0 drift
  hwmgr_compliance_item_status{layer,device,interface,item,status}  1 (every item)
  hwmgr_compliance_item_expected{layer,device,interface,item}  the catalog's value, if a number
  hwmgr_compliance_item_expected_min / _max{...}               a limit's bounds ({min, max})
  hwmgr_compliance_item_actual{layer,device,interface,item}    the host's value, if a number
  hwmgr_known_issue{device,id,severity,url}                     1 per known issue a device runs into
  hwmgr_compliance_items{status}                               items per status
  hwmgr_compliance_drift_items                                 items in drift
  hwmgr_check_compliant                                        1 compliant, 0 not
  hwmgr_check_reboot_pending                                   1 when a change awaits a reboot
  hwmgr_catalog_info{catalog_version}                          1
  hwmgr_check_last_run_timestamp_seconds                       when this check ran
  hwmgr_check_success                                          1 checked, 0 the check failed
  hwmgr_check_duration_seconds                                 how long the check took
  hwmgr_check_failure_info{reason}                             1, only when the check failed

A check that fails (bad catalog, unreadable snapshot, ...) still replaces the file: with
`hwmgr_check_success 0` and its reason, never leaving the last good run's items in place.

An unknown, uncatalogued or unsupported item has no `hwmgr_compliance_item` sample (it is
neither ok nor drift: a 0 would page someone for a value nobody could read or judge); its
status series says which.
The file is written by prometheus-client's `write_to_textfile` (temporary file in the same
directory, then rename), so the collector never reads half a file.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from hwmgr.compliance.items import KNOWN_ISSUE
from hwmgr.compliance.judge import ITEM_KEYS, SUMMARY_KEYS, worst_per_item
from hwmgr.errors import HwmgrError, NotFoundError, NotPermittedError, UsageError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host
from hwmgr.output import printable

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

STATUSES = SUMMARY_KEYS  # every status gets its hwmgr_compliance_items series
ITEM_LABELS = ITEM_KEYS
_SEVERITY = re.compile(r"^\S+ \(([a-z-]+)\):")  # "CVE-… (crash): …", as check words it
_URL = re.compile(r"<(https?://[^>\s]+)>")


def _known_issue(f: Mapping[str, object]) -> tuple[str, str, str] | None:
    """(id, severity, url) of a drifting known-issue finding, else None."""
    item = str(f.get("item") or "")
    if not item.startswith(KNOWN_ISSUE) or f.get("status") != "drift":
        return None
    sev = _SEVERITY.match(str(f.get("reason") or ""))
    src = f.get("source")
    url = src.get("url") if isinstance(src, dict) else None
    if url is None:  # a schema 1-2 result: the URL inside the evidence text
        old = _URL.search(str(f.get("evidence") or ""))
        url = old.group(1) if old else None
    return (item[len(KNOWN_ISSUE):], sev.group(1) if sev else "",
            url if isinstance(url, str) else "")


def _number(value: object) -> float | None:
    """A finding value as a sample: ints and floats (not booleans), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _run_gauges(reg: CollectorRegistry, success: bool, duration: float | None,
                now: float | None) -> None:
    from prometheus_client import Gauge  # ~50 ms: only when a .prom is written

    Gauge("hwmgr_check_success", "1 when hwmgr check ran to the end, 0 when it failed",
          registry=reg).set(1 if success else 0)
    Gauge("hwmgr_check_last_run_timestamp_seconds", "When hwmgr check last ran (Unix time)",
          registry=reg).set(time.time() if now is None else now)
    if duration is not None:
        Gauge("hwmgr_check_duration_seconds", "How long hwmgr check took",
              registry=reg).set(duration)


def failure_registry(reason: str, duration: float | None = None,
                     now: float | None = None) -> CollectorRegistry:
    """The textfile of a check that failed: success 0 and why; no item samples at all."""
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()
    _run_gauges(reg, False, duration, now)
    Gauge("hwmgr_check_failure_info", "Why the last hwmgr check failed", ("reason",),
          registry=reg).labels(printable(reason)[:300]).set(1)
    return reg


def registry_for(data: Mapping[str, object], now: float | None = None,
                 duration: float | None = None) -> CollectorRegistry:
    """A prometheus-client CollectorRegistry holding the metrics of one check's data."""
    # imported here, not at the top: prometheus_client costs ~50 ms to import and only
    # `check --prom` needs it
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()
    item = Gauge("hwmgr_compliance_item", "Catalog item compliance: 1 ok, 0 drift "
                 "(unknown/uncatalogued/unsupported items: see hwmgr_compliance_item_status)",
                 ITEM_LABELS, registry=reg)
    status = Gauge("hwmgr_compliance_item_status", "1 for the status each catalog item has",
                   (*ITEM_LABELS, "status"), registry=reg)
    per = Gauge("hwmgr_compliance_items", "Catalog items by status", ("status",), registry=reg)
    drift = Gauge("hwmgr_compliance_drift_items", "Catalog items in drift", registry=reg)
    compliant = Gauge("hwmgr_check_compliant", "1 when the host complies with the catalog",
                      registry=reg)
    pending = Gauge("hwmgr_check_reboot_pending",
                    "1 when an upgrade, rollback or apply is installed but not yet live",
                    registry=reg)
    catalog = Gauge("hwmgr_catalog_info", "The catalog version the check used",
                    ("catalog_version",), registry=reg)
    expected = Gauge("hwmgr_compliance_item_expected", "The catalog's value, when a number",
                     ITEM_LABELS, registry=reg)
    bounds = {k: Gauge(f"hwmgr_compliance_item_expected_{k}", f"The catalog limit's {k}imum",
                       ITEM_LABELS, registry=reg) for k in ("min", "max")}
    actual = Gauge("hwmgr_compliance_item_actual", "The host's value, when a number",
                   ITEM_LABELS, registry=reg)
    known = Gauge("hwmgr_known_issue", "1 per known issue (catalog id, severity, source) a "
                  "device runs into", ("device", "id", "severity", "url"), registry=reg)
    counts = dict.fromkeys(STATUSES, 0)
    for key, f in worst_per_item(data.get("findings")).items():
        ki = _known_issue(f)
        if ki is not None:
            known.labels(printable(str(f.get("device") or "")), *(printable(v) for v in ki)).set(1)
        st = str(f["status"])
        counts[st] += 1
        status.labels(*key, st).set(1)
        if st in ("ok", "drift"):
            item.labels(*key).set(1 if st == "ok" else 0)
        exp, want, act = f.get("expected"), _number(f.get("expected")), _number(f.get("actual"))
        if want is not None:
            expected.labels(*key).set(want)
        elif isinstance(exp, dict):
            for k, gauge in bounds.items():
                limit = _number(exp.get(k))
                if limit is not None:
                    gauge.labels(*key).set(limit)
        if act is not None:
            actual.labels(*key).set(act)
    summary = data.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    for st in STATUSES:  # the check's own summary when it has one (it counts every finding)
        n = summary.get(st)
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            counts[st] = n
        per.labels(st).set(counts[st])
    drift.set(counts["drift"])
    compliant.set(1 if data.get("compliant") is True else 0)
    waiting = data.get("reboot_pending")
    pending.set(1 if isinstance(waiting, list) and any(
        isinstance(e, dict) and e.get("status", "pending") == "pending" for e in waiting) else 0)
    version = data.get("catalog_version")
    catalog.labels("" if version is None else str(version)).set(1)
    _run_gauges(reg, True, duration, now)
    return reg


def write_prom(dest: str | os.PathLike[str], data: Mapping[str, object], *,
               host: Host | None = None, now: float | None = None,
               duration: float | None = None) -> Path:
    """Write check `data` as metrics to the `.prom` file the user named; its real path."""
    return write_registry(dest, lambda: registry_for(data, now, duration), host=host)


def write_registry(dest: str | os.PathLike[str], build: Callable[[], CollectorRegistry], *,
                   host: Host | None = None) -> Path:
    """Write the registry `build` makes to the `.prom` file the user named; its real path.

    `dest` is a path on the analysing machine (`host`, default `/`), like any output file the
    user names; its directory must exist (it is never created), and it is checked before
    anything is built. Atomic: a reader sees the old file or the new one."""
    from prometheus_client import write_to_textfile  # ~50 ms: only when a .prom is written

    if host is None:
        host = Host("/", SubprocessRunner())
    shown = printable(os.fspath(dest))
    logical = os.path.abspath(os.fspath(dest))
    if not logical.endswith(".prom"):
        raise UsageError(f"{shown}: a textfile must end in .prom (node_exporter's textfile "
                         "collector reads only *.prom)")
    real = host.path(logical)
    if not host.is_dir(os.path.dirname(logical)):
        raise NotFoundError(f"{shown}: directory {printable(os.path.dirname(logical))} does "
                            "not exist (create it first)")
    if real.is_dir():
        raise UsageError(f"{shown}: is a directory")
    reg = build()
    try:
        write_to_textfile(str(real), reg)
    except PermissionError:
        raise NotPermittedError(f"{shown}: cannot write (permission denied)") from None
    except OSError as exc:
        raise HwmgrError(f"{shown}: cannot write ({exc.strerror or exc})") from None
    return real
