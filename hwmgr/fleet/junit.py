"""fleet-report.xml: the fleet report as JUnit XML for CI (Jenkins, GitLab).

A suite per host; a failing testcase per drifting item, a skipped one per item the check
could not judge, and one passing testcase per host for all its compliant items (one case per
compliant item made 28 MB at 10,000 hosts, near GitLab's 30 MB per-file limit). Class names
are `hwmgr.<group>.<host>` with the dots of both replaced: Jenkins splits a class name at its
last dot, so `hwmgr.web01.example.net` grouped every `*.example.net` host as class `net`.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

from hwmgr.fleet.report import NO_CHECK, Report, finding_name
from hwmgr.output import printable

COUNTS = ("tests", "failures", "errors", "skipped")


def _x(value: Any) -> str:
    """Text safe for XML 1.0 (no control characters); ElementTree escapes the markup."""
    if isinstance(value, str):
        return printable(value)
    return printable(json.dumps(value, ensure_ascii=False))


def _x_lines(text: str) -> str:
    return "\n".join(printable(line) for line in text.split("\n"))


def class_name(group: str, host: str) -> str:
    """`hwmgr.<group>.<host>`, dots inside each part made `_` (Jenkins: package.Class)."""
    return ".".join(("hwmgr", _x(group).replace(".", "_"), _x(host).replace(".", "_")))


def _case(suite: ET.Element, cls: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=cls, name=name)


def _host_cases(suite: ET.Element, cls: str, host: Any, counts: Counter[str]) -> None:
    if host["status"] in NO_CHECK:
        err = ET.SubElement(_case(suite, cls, "hwmgr check"), "error",
                            message=_x(f"{host['status']}: {host['error']}"), type=host["status"])
        err.text = _x_lines(host["error"] or "")
        counts.update(tests=1, errors=1)
        return
    if host["status"] == "reboot-pending":
        ET.SubElement(_case(suite, cls, "reboot"), "skipped",
                      message="reboot pending: the armed state is not live yet")
        counts.update(tests=1, skipped=1)
    ok = 0
    for f in host["findings"]:
        if f["status"] == "ok":
            ok += 1
            continue
        case = _case(suite, cls, _x(finding_name(f)))
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
        else:  # unknown, uncatalogued, unsupported: not judged, so not a pass
            ET.SubElement(case, "skipped",
                          message=_x(f"{f['status']}: {f.get('reason') or 'no reason given'}"))
            counts.update(skipped=1)
    if ok or not host["findings"]:
        _case(suite, cls, f"compliant items ({ok})")
        counts.update(tests=1)


def junit_xml(report: Report, groups: dict[str, str]) -> bytes:
    """JUnit XML of `report`; `groups` maps a host to its group (site) for the class name."""
    root = ET.Element("testsuites", name="hwmgr fleet compliance")
    root.text = "\n"
    totals: Counter[str] = Counter()
    for name, host in report["hosts"].items():
        suite = ET.SubElement(root, "testsuite", name=_x(name), timestamp=report["generated"])
        suite.tail = "\n"
        counts: Counter[str] = Counter()
        _host_cases(suite, class_name(groups.get(name, "ungrouped"), name), host, counts)
        for key in COUNTS:
            suite.set(key, str(counts.get(key, 0)))
        totals.update(counts)
    for key in COUNTS:
        root.set(key, str(totals.get(key, 0)))
    xml: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return xml + b"\n"
