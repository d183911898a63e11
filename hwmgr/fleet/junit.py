"""fleet-report.xml: the fleet report as JUnit XML for CI (Jenkins, GitLab).

A suite per host; a failing testcase per drifting item, a skipped one per item the check
could not judge, and one passing testcase per host for all its compliant items (one case per
compliant item made 28 MB at 10,000 hosts, near GitLab's 30 MB per-file limit). Class names
are `hwmgr.<group>.<host>` with the dots of both replaced: Jenkins splits a class name at its
last dot, so `hwmgr.web01.example.net` grouped every `*.example.net` host as class `net`.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from hwmgr.fleet.report import NO_CHECK, Report, finding_name
from hwmgr.output import printable

COUNTS = ("tests", "failures", "errors", "skipped")


def _x(value: Any) -> str:
    """Text safe for XML 1.0 (no control characters); the writers below escape the markup."""
    if isinstance(value, str):
        return printable(value)
    return printable(json.dumps(value, ensure_ascii=False))


def _x_lines(text: str) -> str:
    return "\n".join(printable(line) for line in text.split("\n"))


def _a(value: str) -> str:
    """An attribute value, quoted, with newlines and tabs as character references."""
    return quoteattr(value, {"\n": "&#10;", "\r": "&#13;", "\t": "&#09;"})


def class_name(group: str, host: str) -> str:
    """`hwmgr.<group>.<host>`, dots inside each part made `_` (Jenkins: package.Class)."""
    return ".".join(("hwmgr", _x(group).replace(".", "_"), _x(host).replace(".", "_")))


def _case(cls: str, name: str, inner: str = "") -> str:
    head = f"<testcase classname={_a(cls)} name={_a(name)}"
    return f"{head}>{inner}</testcase>" if inner else f"{head} />"


def _host_cases(cls: str, host: Any, counts: Counter[str]) -> list[str]:
    """The host's testcases as XML text; `counts` gets their tally."""
    if host["status"] in NO_CHECK:
        why = _x(f"{host['status']}: {host['error']}")
        err = (f"<error message={_a(why)} type={_a(host['status'])}>"
               f"{escape(_x_lines(host['error'] or ''))}</error>")
        counts.update(tests=1, errors=1)
        return [_case(cls, "hwmgr check", err)]
    cases = []
    if host["status"] == "reboot-pending":
        cases.append(_case(cls, "reboot", '<skipped message="reboot pending: the armed state '
                                          'is not live yet" />'))
        counts.update(tests=1, skipped=1)
    ok = 0
    for f in host["findings"]:
        if f["status"] == "ok":
            ok += 1
            continue
        counts.update(tests=1)
        if f["status"] == "drift":
            msg = f"expected {_x(f['expected'])}, actual {_x(f['actual'])}"
            body = [msg]
            if f.get("reason"):
                body.append(f"reason: {f['reason']}")
            body.append(f"fix: {f['fix']}" if f.get("fix") else "fix: none known")
            text = escape(_x_lines("\n".join(body)))
            inner = f'<failure message={_a(msg)} type="drift">{text}</failure>'
            counts.update(failures=1)
        else:  # unknown, uncatalogued, unsupported: not judged, so not a pass
            why = _x(f"{f['status']}: {f.get('reason') or 'no reason given'}")
            inner = f"<skipped message={_a(why)} />"
            counts.update(skipped=1)
        cases.append(_case(cls, _x(finding_name(f)), inner))
    if ok or not host["findings"]:
        cases.append(_case(cls, f"compliant items ({ok})"))
        counts.update(tests=1)
    return cases


def junit_xml(report: Report, groups: dict[str, str]) -> bytes:
    """JUnit XML of `report`; `groups` maps a host to its group (site) for the class name.
    Written as text with the standard library's XML escaping: an ElementTree of 10,000
    suites took twice as long to build and serialise."""
    suites = []
    totals: Counter[str] = Counter()
    stamp = _a(report["generated"])
    for name, host in report["hosts"].items():
        counts: Counter[str] = Counter()
        cases = _host_cases(class_name(groups.get(name, "ungrouped"), name), host, counts)
        tally = " ".join(f'{key}="{counts.get(key, 0)}"' for key in COUNTS)
        suites.append(f"<testsuite name={_a(_x(name))} timestamp={stamp} {tally}>"
                      f"{''.join(cases)}</testsuite>")
        totals.update(counts)
    tally = " ".join(f'{key}="{totals.get(key, 0)}"' for key in COUNTS)
    return (f"<?xml version='1.0' encoding='utf-8'?>\n"
            f'<testsuites name="hwmgr fleet compliance" {tally}>\n'
            + "\n".join(suites) + "\n</testsuites>\n").encode("utf-8")
