"""fleet-trend.json: the counts of every earlier run and the previous run's drift, small.

The trend and "new since the last report" need a few numbers per run and one set of drifting
items per host, not the whole earlier report (83 MB at 10,000 hosts): `fleet-report` writes
this file beside the report and reads the previous one back (`--previous FILE`, or the one
already in `--out`). At 10,000 hosts with 4,400 drifting it is about 0.5 MB.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TypedDict

from hwmgr.errors import BadInputError
from hwmgr.fleet.report import Finding, Point, Report, point
from hwmgr.fleet.results import read_json

TREND_FILE = "fleet-trend.json"
TREND_FORMAT = 1
MAX_POINTS = 400  # more than a year of nightly runs


class Trend(TypedDict):
    """fleet-trend.json (format 1)."""

    format_version: int
    points: list[Point]  # oldest first
    generated: str | None  # the run `drift` belongs to
    drift: dict[str, list[str]]  # host -> drift_keys of that run


class News(TypedDict):
    """What changed since the previous run (`since` is None when there was none)."""

    since: str | None
    hosts: list[str]  # hosts drifting now that did not before
    items: dict[str, list[str]]  # host -> drift keys that are new on it
    fixed: int  # drift keys of the previous run no longer drifting


def drift_key(f: Finding) -> str:
    """One drifting item of a host, the same from run to run: 'layer where item'."""
    return " ".join(p for p in (f["layer"], f.get("interface") or f.get("device") or "",
                                f["item"]) if p)


def drift_of(report: Report) -> dict[str, list[str]]:
    """{host: drift keys} of the hosts with any drifting item; each distinct finding's key
    made once (hosts share equal findings: `results`)."""
    out = {}
    made: dict[int, str] = {}
    for name, host in report["hosts"].items():
        keys = []
        for f in host["findings"]:
            if f["status"] == "drift":
                key = made.get(id(f))
                if key is None:
                    key = made[id(f)] = drift_key(f)
                keys.append(key)
        if keys:
            out[name] = keys
    return out


def point_of(report: Report) -> Point:
    return point(report["generated"], report["summary"].__getitem__)


def _count(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadInputError(f"{where}: expected a count (integer >= 0)")
    return value


def _point_count(p: dict[str, object], where: str, key: str) -> int:
    return _count(p.get(key, 0), f"{where}.{key}")


def load_trend(path: Path) -> Trend:
    """A fleet-trend.json, every field checked."""
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("format_version") != TREND_FORMAT:
        raise BadInputError(f"{path}: not a fleet-trend.json (format_version {TREND_FORMAT})")
    points = doc.get("points")
    drift = doc.get("drift")
    gen = doc.get("generated")
    if not isinstance(points, list) or not isinstance(drift, dict) or \
            not (gen is None or isinstance(gen, str)):
        raise BadInputError(f"{path}: 'points' (list), 'drift' (object) and 'generated' needed")
    out_points = []
    for i, p in enumerate(points):
        if not isinstance(p, dict) or not isinstance(p.get("generated"), str):
            raise BadInputError(f"{path}: points[{i}].generated: expected a string")
        out_points.append(point(p["generated"], partial(_point_count, p, f"{path}: points[{i}]")))
    for host, keys in drift.items():
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise BadInputError(f"{path}: drift[{host!r}]: expected a list of strings")
    return {"format_version": TREND_FORMAT, "points": out_points, "generated": gen,
            "drift": drift}


def next_trend(previous: Trend | None, history: list[Point], report: Report) -> Trend:
    """This run's trend file: earlier points (previous file, then --history) plus this run."""
    points = {p["generated"]: p for p in (previous["points"] if previous else [])}
    points.update({p["generated"]: p for p in history})
    points[report["generated"]] = point_of(report)
    ordered = [points[k] for k in sorted(points)][-MAX_POINTS:]
    return {"format_version": TREND_FORMAT, "points": ordered,
            "generated": report["generated"], "drift": drift_of(report)}


def news(previous: Trend | None, report: Report) -> News:
    """Drift that is new since the previous run, per host, and how much was fixed."""
    if previous is None or previous["generated"] is None:
        return {"since": None, "hosts": [], "items": {}, "fixed": 0}
    before = previous["drift"]
    now = drift_of(report)
    items = {}
    for host, keys in now.items():
        old = set(before.get(host, ()))
        new = [k for k in keys if k not in old]
        if new:
            items[host] = new
    fixed = sum(len(set(keys) - set(now.get(host, ()))) for host, keys in before.items())
    return {"since": previous["generated"], "hosts": [h for h in now if h not in before],
            "items": items, "fixed": fixed}
