"""The fleet report as Prometheus metrics (`fleet-report --prom FILE`, a textfile).

  hwmgr_fleet_hosts{status}                   hosts per status (6 series)
  hwmgr_fleet_item_hosts{layer,item,status}   hosts with that item in that status
                                              (items × statuses: ~100 series, any fleet size)
  hwmgr_fleet_host_status{host,group,status}  1 per host (one series per host: 10,000)
  hwmgr_fleet_report_timestamp_seconds        when the report was generated
  hwmgr_fleet_run_duration_seconds            from --run-started to the report (when given)
  hwmgr_fleet_report_success                  1 built; 0 fleet-report failed (with its reason
                                              in hwmgr_fleet_report_failure_info{reason})

Item series are per item, not per device or interface: the per-host textfiles carry those.
"""

from __future__ import annotations

import calendar
import time
from typing import TYPE_CHECKING, Iterator

from hwmgr.fleet.report import HOST_STATUSES, Report
from hwmgr.fleet.view import FleetItem, fleet_items
from hwmgr.output import printable

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric


def epoch(stamp: str) -> float:
    """The report's `generated` (UTC, %Y-%m-%dT%H:%M:%SZ) as Unix time."""
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


def fleet_registry(report: Report, groups: dict[str, str], started: float | None = None,
                   items: list[FleetItem] | None = None) -> CollectorRegistry:
    """The metrics of one fleet report (see the module's docstring); `items` are its
    `view.fleet_items` when the caller has them already."""
    from prometheus_client import CollectorRegistry, Gauge  # ~50 ms: only for --prom

    reg = CollectorRegistry()
    per = Gauge("hwmgr_fleet_hosts", "Hosts per status in the last fleet report", ("status",),
                registry=reg)
    for status in HOST_STATUSES:
        per.labels(status).set(sum(1 for h in report["hosts"].values()
                                   if h["status"] == status))
    item = Gauge("hwmgr_fleet_item_hosts", "Hosts with this catalog item in this status",
                 ("layer", "item", "status"), registry=reg)
    for row in fleet_items(report, str) if items is None else items:
        item.labels(row["layer"], printable(row["item"]), row["status"]).set(row["hosts"])
    reg.register(_HostStatus(report, groups))
    generated = epoch(report["generated"])
    Gauge("hwmgr_fleet_report_timestamp_seconds", "When the fleet report was generated",
          registry=reg).set(generated)
    if started is not None:
        Gauge("hwmgr_fleet_run_duration_seconds", "From the run's start to its report",
              registry=reg).set(max(0.0, time.time() - started))
    Gauge("hwmgr_fleet_report_success", "1 when the fleet report was built",
          registry=reg).set(1)
    return reg


class _HostStatus:
    """hwmgr_fleet_host_status as one metric family built at collection: a Gauge child per
    host (10,000 label sets, each validated and locked) took twice as long."""

    def __init__(self, report: Report, groups: dict[str, str]) -> None:
        self.report, self.groups = report, groups

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        fam = GaugeMetricFamily("hwmgr_fleet_host_status",
                                "1 for each host, labelled with its status",
                                labels=("host", "group", "status"))
        for name, h in self.report["hosts"].items():
            fam.add_metric((printable(name), printable(self.groups.get(name, "")),
                            h["status"]), 1)
        yield fam


def failure_registry(reason: str, started: float | None = None) -> CollectorRegistry:
    """A fleet-report that failed: success 0, its reason, and when."""
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()
    Gauge("hwmgr_fleet_report_success", "1 when the fleet report was built",
          registry=reg).set(0)
    Gauge("hwmgr_fleet_report_failure_info", "Why the last fleet-report failed", ("reason",),
          registry=reg).labels(printable(reason)[:300]).set(1)
    Gauge("hwmgr_fleet_report_timestamp_seconds", "When the fleet report was generated",
          registry=reg).set(time.time())
    if started is not None:
        Gauge("hwmgr_fleet_run_duration_seconds", "From the run's start to its report",
              registry=reg).set(max(0.0, time.time() - started))
    return reg
