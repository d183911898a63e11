"""fleet-report.xml: the fleet report as JUnit XML for CI (Jenkins, GitLab).

A suite per host; a failing testcase per drifting item, a skipped one per item the check
could not judge, and one passing testcase per host for all its compliant items (one case per
compliant item made 28 MB at 10,000 hosts, near GitLab's 30 MB per-file limit). The document is
valid against Jenkins' junit-10.xsd (tests/test_fleet_junit_schema.py). Class names
are `hwmgr.<group>.<host>` with the dots of both replaced: Jenkins splits a class name at its
last dot, so `hwmgr.web01.example.net` grouped every `*.example.net` host as class `net`.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Iterator
from xml.sax.saxutils import escape, quoteattr

from hwmgr.fleet.report import NO_CHECK, Finding, HostEntry, Report, finding_name
from hwmgr.output import printable

COUNTS = ("tests", "failures", "errors", "skipped")
CHUNK = 1 << 20  # bytes of XML handed to the writer at a time


def _x(value: object) -> str:
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


def _finding_case(f: Finding) -> tuple[bytes, bool]:
    """A problem finding's testcase after its class name (` name="…">…</testcase>`) as
    UTF-8, and whether it is a failure (else skipped)."""
    if f["status"] == "drift":
        msg = f"expected {_x(f['expected'])}, actual {_x(f['actual'])}"
        body = [msg]
        if f.get("reason"):
            body.append(f"reason: {f['reason']}")
        body.append(f"fix: {f['fix']}" if f.get("fix") else "fix: none known")
        text = escape(_x_lines("\n".join(body)))
        inner = f'<failure message={_a(msg)} type="drift">{text}</failure>'
    else:  # unknown, uncatalogued, unsupported: not judged, so not a pass
        why = _x(f"{f['status']}: {f.get('reason') or 'no reason given'}")
        inner = f"<skipped message={_a(why)} />"
    return (f" name={_a(_x(finding_name(f)))}>{inner}</testcase>".encode(),
            f["status"] == "drift")


def _host_cases(cls: str, host: HostEntry, counts: Counter[str],
                cases_of: dict[int, tuple[bytes, bool]] | None = None) -> list[bytes]:
    """The host's testcases as UTF-8 XML; `counts` gets their tally. `cases_of` keeps each
    finding's testcase by the finding's identity (hosts share equal findings: `results`),
    so its text is escaped once per run, not once per host."""
    if host["status"] in NO_CHECK:
        why = _x(f"{host['status']}: {host['error']}")
        err = (f"<error message={_a(why)} type={_a(host['status'])}>"
               f"{escape(_x_lines(host['error'] or ''))}</error>")
        counts.update(tests=1, errors=1)
        return [_case(cls, "hwmgr check", err).encode()]
    cases = []
    if host["status"] == "reboot-pending":
        cases.append(_case(cls, "reboot", '<skipped message="reboot pending: the armed state '
                                          'is not live yet" />').encode())
        counts.update(tests=1, skipped=1)
    cases_of = {} if cases_of is None else cases_of
    head = f"<testcase classname={_a(cls)}".encode()
    ok = tests = failures = 0
    for f in host["findings"]:
        case = cases_of.get(id(f))
        if case is None:
            if f["status"] == "ok":
                ok += 1
                continue
            case = cases_of[id(f)] = _finding_case(f)
        tests += 1
        failures += case[1]
        cases.append(head + case[0])
    counts.update(tests=tests, failures=failures, skipped=tests - failures)
    if ok or not host["findings"]:
        cases.append(_case(cls, f"compliant items ({ok})").encode())
        counts.update(tests=1)
    return cases


def _totals(report: Report) -> Counter[str]:
    """The document's counts, as the suites below add them up (the header comes first)."""
    totals: Counter[str] = Counter()
    for host in report["hosts"].values():
        if host["status"] in NO_CHECK:
            totals.update(tests=1, errors=1)
            continue
        if host["status"] == "reboot-pending":
            totals.update(tests=1, skipped=1)
        by = Counter(f["status"] for f in host["findings"])
        ok = by.pop("ok", 0)
        drift = by.get("drift", 0)
        problems = sum(by.values())
        totals.update(tests=problems + (1 if ok or not host["findings"] else 0),
                      failures=drift, skipped=problems - drift)
    return totals


def junit_chunks(report: Report, groups: dict[str, str]) -> Iterator[bytes]:
    """JUnit XML of `report` in pieces of about a megabyte, to be written as they come (the
    document is 50 MB at 10,000 real hosts); `groups` maps a host to its group (site) for
    the class name. Text with the standard library's XML escaping: an ElementTree of 10,000
    suites took twice as long to build and serialise."""
    totals = _totals(report)
    # junit-10.xsd (the schema Jenkins' xUnit plugin checks with) allows no skipped count on
    # <testsuites>: each <testsuite> carries its own
    tally = " ".join(f'{key}="{totals.get(key, 0)}"' for key in COUNTS if key != "skipped")
    yield (f"<?xml version='1.0' encoding='utf-8'?>\n"
           f'<testsuites name="hwmgr fleet compliance" {tally}>').encode()
    stamp = _a(report["generated"])
    cases_of: dict[int, tuple[bytes, bool]] = {}
    suites: list[bytes] = []
    size = 0
    for name, host in report["hosts"].items():
        counts: Counter[str] = Counter()
        cases = _host_cases(class_name(groups.get(name, "ungrouped"), name), host, counts,
                            cases_of)
        tally = " ".join(f'{key}="{counts.get(key, 0)}"' for key in COUNTS)
        suites.append(f"\n<testsuite name={_a(_x(name))} timestamp={stamp} {tally}>".encode())
        suites.extend(cases)
        suites.append(b"</testsuite>")
        size += sum(map(len, cases))
        if size > CHUNK:
            yield b"".join(suites)
            suites, size = [], 0
    suites.append(b"\n</testsuites>\n" if report["hosts"] else b"\n\n</testsuites>\n")
    yield b"".join(suites)


def junit_xml(report: Report, groups: dict[str, str]) -> bytes:
    """The whole JUnit document at once (`junit_chunks`)."""
    return b"".join(junit_chunks(report, groups))
