"""What a person reads first in a fleet report, computed once for the page and the metrics.

`fleet_items`: each drifting (or unknown) item across the fleet, with how many hosts have it,
the values seen and the fix; `group_rows`: hosts per group and status; `compact`: every host's
findings as small integer rows over one string table, for the page's on-demand detail (a
finding costs ~20 bytes instead of ~450 as JSON objects).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Callable, TypedDict

from hwmgr.fleet.report import (
    FINDING_STATUSES,
    HOST_ORDER,
    HOST_STATUSES,
    LAYERS,
    Finding,
    Report,
)
from hwmgr.fleet.trend import News

Shown = Callable[[object], str]  # a finding value for a person (check's own words for limits)
ITEM_ORDER = ("drift", "unknown", "uncatalogued", "unsupported", "ok")  # worst first
NO_RESULT = ("unreachable", "failed")


class FleetItem(TypedDict):
    """One (layer, item, status) across the fleet."""

    layer: str
    item: str
    status: str
    hosts: int
    expected: list[tuple[str, int]]  # shown value, hosts; most common first
    actual: list[tuple[str, int]]
    fix: str | None  # the most common fix (it names each host's interface)
    reason: str | None


def fleet_items(report: Report, shown: Shown, statuses: tuple[str, ...] = ITEM_ORDER,
                top: int = 3) -> list[FleetItem]:
    """Items by status, worst first, then by the number of hosts that have them. Each
    distinct finding is looked at once (hosts share equal findings: `results`) and counted
    as often as hosts have it."""
    hosts: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    seen: dict[int, tuple[str, str, str] | None] = {}  # id of a finding -> its key, if counted
    uses: Counter[int] = Counter()  # id of a problem finding -> findings like it
    firsts: dict[int, Finding] = {}  # id -> the finding
    for name, host in report["hosts"].items():
        for f in host["findings"]:
            i = id(f)
            if i not in seen:
                seen[i] = (f["layer"], f["item"], f["status"]) if f["status"] in statuses \
                    else None
                firsts[i] = f
            key = seen[i]
            if key is None:
                continue
            hosts[key].add(name)
            if key[2] != "ok":  # counted only: values of what complies are what the catalog says
                uses[i] += 1
    exp: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    act: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    fixes: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    reasons: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    for i, n in uses.items():  # in the order first met, so ties rank as before
        f, key = firsts[i], seen[i]
        assert key is not None
        exp[key][shown(f["expected"])] += n
        act[key][shown(f["actual"])] += n
        fix, reason = f.get("fix"), f.get("reason")
        if fix:
            fixes[key][fix] += n
        if reason:
            reasons[key][reason] += n
    out: list[FleetItem] = []
    for key, names in hosts.items():
        layer, item, status = key
        out.append({"layer": layer, "item": item, "status": status, "hosts": len(names),
                    "expected": exp[key].most_common(top), "actual": act[key].most_common(top),
                    "fix": fixes[key].most_common(1)[0][0] if fixes[key] else None,
                    "reason": reasons[key].most_common(1)[0][0] if reasons[key] else None})
    out.sort(key=lambda r: (ITEM_ORDER.index(r["status"]), -r["hosts"],
                            LAYERS.index(r["layer"]), r["item"]))
    return out


class GroupRow(TypedDict):
    """One group of the page: its hosts, their statuses, and its hosts' drifting items."""

    group: str
    hosts: int
    status: Counter[str]  # host status -> hosts
    items: Counter[str]  # drifting item -> hosts


def group_rows(report: Report, groups: dict[str, str]) -> list[GroupRow]:
    """Per group: hosts per status and its most common drifting items; worst groups first."""
    rows: dict[str, GroupRow] = {}
    for name, host in report["hosts"].items():
        g = groups.get(name, "ungrouped")
        row = rows.setdefault(g, {"group": g, "hosts": 0, "status": Counter(),
                                  "items": Counter()})
        row["hosts"] += 1
        row["status"][host["status"]] += 1
        # each drifting item once per host, in the host's order (a set's order changed from
        # run to run, and with it which of two items with as many hosts came first)
        row["items"].update(dict.fromkeys(f["item"] for f in host["findings"]
                                          if f["status"] == "drift").keys())
    return sorted(rows.values(), key=lambda r: (-r["status"]["drift"],
                                                -sum(r["status"][s] for s in NO_RESULT),
                                                -r["status"]["unknown"], r["group"]))


def host_order(report: Report) -> list[str]:
    """Hosts by severity: status (worst first), then most drifting items, then name."""
    def drift(name: str) -> int:
        return sum(1 for f in report["hosts"][name]["findings"] if f["status"] == "drift")
    return sorted(report["hosts"], key=lambda n: (HOST_ORDER[report["hosts"][n]["status"]],
                                                   -drift(n), n))


def compact(report: Report, groups: dict[str, str], news: News,
            shown: Shown) -> dict[str, object]:
    """The page's data: {s: strings, f: finding lists, h: [[name, status, group, error, new,
    findings]]}.

    A finding list is one flat list, 7 integers per finding: finding status, layer, where,
    item, expected, actual, fix-or-reason (string indexes; -1 for none), worst first as in
    the report; a host's `findings` is the index of its list in `f`, so hosts with the same
    findings (most compliant ones) share one. `new` is 1 when the host drifts on something
    it did not drift on last time; `n` lists the new drift keys per host index."""
    strings: dict[str, int] = {}
    shown_idx: dict[tuple[type, object], int] = {}  # a scalar's index: 190,000 findings, few values
    fs = {x: i for i, x in enumerate(FINDING_STATUSES)}
    ly = {x: i for i, x in enumerate(LAYERS)}

    def s(value: str | None) -> int:
        if value is None or value == "":
            return -1
        return strings.setdefault(value, len(strings))

    def v(value: object) -> int:
        if isinstance(value, (dict, list)):
            return s(shown(value))
        key = (type(value), value)  # 1 and True are equal keys; their types tell them apart
        idx = shown_idx.get(key)
        if idx is None:
            idx = shown_idx[key] = s(shown(value))
        return idx

    hosts = []
    lists: dict[tuple[int, ...], int] = {}
    new_keys: dict[str, list[int]] = {}
    rows: dict[int, list[int]] = {}  # id of a finding (hosts share equal ones) -> its integers
    for i, name in enumerate(host_order(report)):
        h = report["hosts"][name]
        flat: list[int] = []
        for f in h["findings"]:
            row = rows.get(id(f))
            if row is None:
                where = f.get("interface") or f.get("device")
                ok = f["status"] == "ok"
                note = None if ok else (f.get("fix") or f.get("reason"))
                row = rows[id(f)] = [fs[f["status"]], ly[f["layer"]], s(where), s(f["item"]),
                                     -1 if ok else v(f["expected"]), v(f["actual"]), s(note)]
            flat += row
        new = news["items"].get(name)
        if new:
            new_keys[str(i)] = [s(k) for k in new]
        shared = lists.setdefault(tuple(flat), len(lists))
        hosts.append([s(name), HOST_STATUSES.index(h["status"]), s(groups.get(name)),
                      s(h["error"]), 1 if new else 0, shared])
    return {"v": 1, "st": list(HOST_STATUSES), "fs": list(FINDING_STATUSES),
            "ly": list(LAYERS), "s": list(strings), "f": [list(f) for f in lists], "h": hosts,
            "n": new_keys,
            "since": news["since"]}
