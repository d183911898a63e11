"""fleet-report.xml against the JUnit schema Jenkins validates JUnit reports with.

The schema is the xUnit plugin's `junit-10.xsd` (MIT licence, Gregory Boissinot):
https://github.com/jenkinsci/xunit-plugin/blob/031e285ef3b60dee7aaf36e9096d7dcd95ffae83/src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd
Neither lxml nor xmlschema is a dependency here, so `JUNIT_10` below states that schema's
rules by hand, element by element (required and allowed attributes, allowed children, mixed
content, the SUREFIRE_TIME pattern), and `violations` walks an ElementTree against them.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support import fleet_data  # noqa: E402

from hwmgr.fleet import report as fr  # noqa: E402
from hwmgr.fleet.junit import junit_xml  # noqa: E402
from hwmgr.fleet.results import load_host  # noqa: E402


class Rule(NamedTuple):
    """One element of the schema: attributes it must and may have, children it may have,
    whether it may hold text (mixed or xs:string), and attributes typed SUREFIRE_TIME."""

    required: frozenset[str]
    allowed: frozenset[str]
    children: frozenset[str]
    text: bool
    times: frozenset[str] = frozenset()


def _rule(required: str, optional: str, children: str, text: bool, times: str = "") -> Rule:
    req = frozenset(required.split())
    return Rule(req, req | frozenset(optional.split()), frozenset(children.split()), text,
                frozenset(times.split()))


_RERUN = _rule("type", "message", "stackTrace system-out system-err", True)
JUNIT_10 = {
    "testsuites": _rule("", "name time tests failures errors", "testsuite", False, "time"),
    "testsuite": _rule("name tests failures errors",
                       "group time skipped timestamp hostname id package file log url",
                       "testsuite properties testcase system-out system-err", False, "time"),
    "testcase": _rule("name", "time classname group",
                      "skipped error failure rerunFailure rerunError flakyFailure flakyError "
                      "system-out system-err", False),
    "failure": _rule("", "type message", "", True),
    "error": _rule("", "type message", "", True),
    "skipped": _rule("", "type message", "", True),
    "properties": _rule("", "", "property", False),
    "property": _rule("name value", "", "", False),
    "system-out": _rule("", "", "", True),
    "system-err": _rule("", "", "", True),
    "stackTrace": _rule("", "", "", True),
    "rerunFailure": _RERUN, "rerunError": _RERUN, "flakyFailure": _RERUN, "flakyError": _RERUN,
}
SUREFIRE_TIME = re.compile(r"(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?")


def violations(root: ET.Element) -> list[str]:
    """Every way the document breaks junit-10.xsd, as 'path: what'."""
    out: list[str] = []

    def walk(el: ET.Element, path: str, parent: Rule | None) -> None:
        where = f"{path}/{el.tag}"
        rule = JUNIT_10.get(el.tag)
        if rule is None or (parent is not None and el.tag not in parent.children):
            out.append(f"{where}: element not allowed here")
            return
        attrs = set(el.attrib)
        out.extend(f"{where}: missing attribute {a}" for a in sorted(rule.required - attrs))
        out.extend(f"{where}: attribute {a} not allowed" for a in sorted(attrs - rule.allowed))
        out.extend(f"{where}: {a}={el.get(a)!r} is not a SUREFIRE_TIME" for a in rule.times
                   if a in attrs and not SUREFIRE_TIME.fullmatch(el.get(a) or ""))
        if not rule.text and ((el.text or "").strip() or any(
                (c.tail or "").strip() for c in el)):
            out.append(f"{where}: text in element-only content")
        for child in el:
            walk(child, where, rule)

    if root.tag != "testsuites":
        out.append(f"/{root.tag}: the root is not testsuites")
    walk(root, "", None)
    return out


def fleet_xml() -> ET.Element:
    """The 31-host fleet's JUnit XML: drift, unknown, uncatalogued, unreachable, failed,
    reboot pending and the markup-injecting host name."""
    hosts = {k: load_host(v, k) for k, v in fleet_data.fleet().items()}
    rep = fr.build_report(hosts, generated="2026-11-23T02:00:00Z")
    return ET.fromstring(junit_xml(rep, {n: n.rsplit(".", 1)[-1] for n in rep["hosts"]}))


def test_fleet_report_xml_is_valid_junit_10() -> None:
    root = fleet_xml()
    assert len(root.findall("testsuite")) == 31 and root.findall(".//failure")
    assert violations(root) == []


def test_hostile_and_empty_reports_are_valid_junit_10() -> None:
    why = 'ssh: "host" <down> & \'gone\'\n\tsecond \x1b[31mline\x00'
    host = load_host({"status": "unreachable", "check": None, "error": why}, "h")
    root = ET.fromstring(junit_xml(fr.build_report({'a&b"<c>\x07': host}), {}))
    assert violations(root) == []
    assert violations(ET.fromstring(junit_xml(fr.build_report({}), {}))) == []


@pytest.mark.parametrize(("doc", "says"), [
    ('<testsuites skipped="1"/>', "attribute skipped not allowed"),
    ('<testsuites><testsuite name="h" tests="1" failures="0"/></testsuites>',
     "missing attribute errors"),
    ('<testsuites><testsuite name="h" tests="0" failures="0" errors="0" time="1.5s"/>'
     "</testsuites>", "is not a SUREFIRE_TIME"),
    ('<testsuites><testcase name="x"/></testsuites>', "element not allowed here"),
    ('<testsuites><testsuite name="h" tests="1" failures="0" errors="0"><testcase name="x">'
     "<failure><b/></failure></testcase></testsuite></testsuites>", "element not allowed"),
    ('<testsuites><testsuite name="h" tests="1" failures="0" errors="0">text</testsuite>'
     "</testsuites>", "text in element-only content"),
    ("<testsuite/>", "the root is not testsuites"),
])
def test_the_rules_catch_what_the_schema_refuses(doc: str, says: str) -> None:
    assert any(says in v for v in violations(ET.fromstring(doc)))
