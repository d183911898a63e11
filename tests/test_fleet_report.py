"""hwmgr.fleet.report / html and the fleet-report verb, on a realistic 31-host fleet.

The page is loaded in a real headless Chromium: the counts its script computes from the
embedded JSON must equal the report's, filters must show the right rows, and a hostile host
name must stay text. Regenerate the screenshot in docs/ with
`PYTHONPATH=. python tests/test_fleet_report.py docs/fleet-report.png`.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support import fleet_data  # noqa: E402

from hwmgr.fleet import report as fr  # noqa: E402
from hwmgr.fleet.html import embed_json, render_html  # noqa: E402
from hwmgr.fleet.junit import junit_xml  # noqa: E402
from hwmgr.fleet.results import load_host  # noqa: E402
from hwmgr.fleet.trend import news  # noqa: E402
from hwmgr.output import printable  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NOW = 1795399200  # 2026-11-23T02:00:00Z; the history is the three nights before


def hwmgr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hwmgr", *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO, check=False,
                          env={**os.environ, **(env or {})})


def history(tmp: Path) -> list[Path]:
    """Three earlier reports where the fleet drifted more (it was being fixed since)."""
    out = []
    for n in range(3):
        hosts = fleet_data.fleet()
        compliant = [name for name in sorted(hosts) if hosts[name]["status"] == "compliant"]
        for name in compliant[: 6 - 2 * n]:  # hosts fixed since
            hosts[name] = {"status": "drift", "check": fleet_data.check_data(
                fleet_data.host_findings({"ring.rx"})), "error": None}
        loaded = {k: load_host(v, k) for k, v in hosts.items()}
        rep = fr.build_report(loaded, generated=f"2026-11-{20 + n:02d}T02:00:00Z")
        path = tmp / f"night{n}" / "fleet-report.json"
        path.parent.mkdir()
        path.write_text(json.dumps(rep))
        out.append(path)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The CLI run once over the fleet with history: paths, exit code and the JSON."""
    tmp = tmp_path_factory.mktemp("fleet")
    hosts = fleet_data.write_results(tmp / "results")
    hist = history(tmp)
    res = hwmgr("fleet-report", "--results", str(tmp / "results"), "--out", str(tmp / "out"),
                "--history", *map(str, hist), "--json", env={"SOURCE_DATE_EPOCH": str(NOW)})
    return {"tmp": tmp, "res": res, "hosts": hosts, "out": tmp / "out", "history": hist,
            "report": json.loads((tmp / "out" / "fleet-report.json").read_text())}


# ------------------------------------------------------------------------ JSON
def test_report_matches_schema_and_counts(built: dict[str, Any]) -> None:
    rep = built["report"]
    jsonschema.validate(rep, fr.schema())
    want = Counter(h["status"] for h in built["hosts"].values())
    s = rep["summary"]
    assert s["hosts"] == len(built["hosts"]) == 31
    assert (s["compliant"], s["drift"], s["unknown"], s["unreachable"], s["failed"],
            s["reboot_pending"]) == (want["compliant"], want["drift"], want["unknown"],
                                     want["unreachable"], want["failed"], want["reboot-pending"])
    assert sum(v for k, v in s.items() if k != "hosts") == s["hosts"]
    assert rep["generated"] == "2026-11-23T02:00:00Z"  # SOURCE_DATE_EPOCH
    assert rep["catalog_version"] == fleet_data.CATALOG
    assert list(rep["hosts"])[0].endswith(".dc2")  # drifting hosts come first
    worst = rep["hosts"]["rtr-26.dc2"]
    assert worst["summary"]["drift"] == 6 and worst["findings"][0]["status"] == "drift"
    assert {f["item"] for f in worst["findings"] if f["status"] == "drift"} == {
        "pause.rx", "ring.rx", "channels.combined", "features.large-receive-offload",
        "txqueuelen", "sysctl.net.ipv4.tcp_rmem"}
    assert rep["hosts"]["old-01.dc1"] == {"status": "unreachable", "summary": None,
                                          "findings": [], "error": fleet_data.fleet()[
                                              "old-01.dc1"]["error"]}
    assert fleet_data.HOSTILE in rep["hosts"]


def test_outputs_in_pieces_and_from_shared_findings_are_the_same_documents(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fleet-report.json, the JUnit XML and the page made a piece at a time are what one
    json.dumps and one string give, and the same whether hosts share equal findings (as
    `read_results` makes them) or each holds its own copies."""
    from hwmgr.fleet import html, junit, view
    from hwmgr.fleet.results import read_results
    from hwmgr.fleet.trend import next_trend

    fleet_data.write_results(tmp_path / "r")
    for name, entry in fleet_data.big_fleet(120).items():
        (tmp_path / "r" / f"{name}.json").write_text(json.dumps(entry))
    shared = fr.build_report(read_results([tmp_path / "r"]), generated="2026-11-23T02:00:00Z")
    own = fr.build_report({p.stem: load_host(json.loads(p.read_text()), p.name)
                           for p in sorted((tmp_path / "r").glob("*.json"))},
                          generated="2026-11-23T02:00:00Z")
    ids = {id(f) for h in shared["hosts"].values() for f in h["findings"]}
    assert len(ids) < sum(len(h["findings"]) for h in shared["hosts"].values()) / 5
    whole = (json.dumps(own, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    monkeypatch.setattr(fr, "CHUNK", 100)
    monkeypatch.setattr(junit, "CHUNK", 100)
    for rep in (shared, own):
        pieces = list(fr.report_chunks(rep))
        assert len(pieces) > 10 and b"".join(pieces) == whole
    groups = {n: "g" for n in own["hosts"]}
    assert b"".join(junit.junit_chunks(shared, groups)) == junit_xml(own, groups)
    trend = next_trend(None, [], own)
    new = news(None, own)
    page = render_html(own, [], groups=groups, news=new)
    assert render_html(shared, [], groups=groups, news=new) == page
    monkeypatch.setattr(html, "CHUNK", 100)
    pieces = list(html.html_chunks(own, [], groups=groups, news=new))
    assert len(pieces) > 10 and b"".join(pieces).decode() == page
    assert view.fleet_items(shared, str) == view.fleet_items(own, str)
    assert trend["drift"] == next_trend(None, [], shared)["drift"]


def test_uncatalogued_items_leave_a_host_compliant(built: dict[str, Any]) -> None:
    """Format 2: a driver version the catalog has no verdict on is its own item status and
    count; the host stays compliant (not unknown)."""
    rep = built["report"]
    assert rep["format_version"] == 2
    host = rep["hosts"]["rtr-13.dc1"]
    assert host["status"] == "compliant"
    assert (host["summary"]["uncatalogued"], host["summary"]["unknown"]) == (1, 0)
    assert [(f["item"], f["actual"]) for f in host["findings"]
            if f["status"] == "uncatalogued"] == [("driver_version", "5.1.0-k-rh7.9")]
    assert host["findings"][0]["status"] == "uncatalogued"  # before ok and unsupported
    assert rep["hosts"]["rtr-01.dc1"]["summary"]["uncatalogued"] == 0
    # a host result written by an older hwmgr (no uncatalogued count) counts 0
    old = fleet_data.check_data(fleet_data.host_findings(set()))
    del old["summary"]["uncatalogued"]
    assert load_host({"status": "compliant", "check": old, "error": None},
                        "old.json")["summary"]["uncatalogued"] == 0


def test_uncatalogued_host_exits_0_and_format_1_history_is_read(tmp_path: Path) -> None:
    hosts = {k: v for k, v in fleet_data.fleet().items() if k in ("rtr-13.dc1", "rtr-14.dc1")}
    (tmp_path / "r").mkdir()
    for name, v in hosts.items():
        (tmp_path / "r" / f"{name}.json").write_text(json.dumps(v))
    old = tmp_path / "old.json"  # a report written before format 2
    old.write_text(json.dumps({"format_version": 1, "generated": "2026-11-01T02:00:00Z",
                               "summary": {"hosts": 2, "compliant": 1, "drift": 1}}))
    res = hwmgr("fleet-report", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o"),
                "--history", str(old))
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "o" / "fleet-report.html").read_text()
    assert 'data-points="2"' in page
    data = page_data(page)
    host = next(h for h in data["h"] if data["s"][h[0]] == "rtr-13.dc1")
    statuses = [data["fs"][code] for code in data["f"][host[5]][::7]]
    assert statuses.count("uncatalogued") == 1 and data["st"][host[1]] == "compliant"


def test_cli_outcome_and_exit_code(built: dict[str, Any]) -> None:
    res = built["res"]
    assert res.returncode == 5, res.stderr  # drift wins over the unreachable hosts
    env = json.loads(res.stdout)
    assert env["command"] == "fleet-report" and env["status"] == "drift"
    assert env["data"]["summary"] == built["report"]["summary"]
    assert sorted(Path(f).name for f in env["data"]["files"]) == [
        "fleet-report.html", "fleet-report.json", "fleet-report.xml", "fleet-trend.json"]
    assert not [p for p in built["out"].iterdir() if p.name.startswith(".")]  # no temp files


@pytest.mark.parametrize(("keep", "code"), [
    ({"compliant"}, 0), ({"compliant", "unreachable", "failed"}, 6),
    ({"compliant", "reboot-pending"}, 7), ({"compliant", "unknown"}, 11),
    ({"compliant", "unknown", "failed"}, 6),
])
def test_exit_codes(tmp_path: Path, keep: set[str], code: int) -> None:
    hosts = {k: v for k, v in fleet_data.fleet().items() if v["status"] in keep}
    loaded = {k: load_host(v, k) for k, v in hosts.items()}
    assert fr.exit_code(fr.build_report(loaded)) == code
    (tmp_path / "r").mkdir()
    for name, v in hosts.items():
        (tmp_path / "r" / f"{name}.json").write_text(json.dumps(v))
    res = hwmgr("fleet-report", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o"))
    assert res.returncode == code, res.stderr


# ------------------------------------------------------------------------ JUnit
def test_junit_has_a_case_per_problem_and_one_for_the_compliant_items(
        built: dict[str, Any]) -> None:
    root = ET.parse(built["out"] / "fleet-report.xml").getroot()
    rep = built["report"]
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == set(rep["hosts"])  # the hostile name survives as an attribute
    n_problems = sum(1 for h in rep["hosts"].values() for f in h["findings"]
                     if f["status"] != "ok")
    n_checked = sum(1 for h in rep["hosts"].values() if h["summary"] is not None)
    n_drift = sum(1 for h in rep["hosts"].values() for f in h["findings"]
                  if f["status"] == "drift")
    assert int(root.get("failures")) == n_drift == len(root.findall(".//failure"))
    assert int(root.get("errors")) == 4 == len(root.findall(".//error"))
    # a case per item with a problem, one for each checked host's compliant items, one per
    # host without a result, one for the reboot pending
    assert int(root.get("tests")) == n_problems + n_checked + 4 + 1
    ok = next(c for c in suites["rtr-22.dc2"] if c.get("name").startswith("compliant items"))
    assert ok.get("name") == "compliant items (8)" and len(ok) == 0
    ring = next(c for c in suites["rtr-22.dc2"] if c.get("name").endswith("ring.rx"))
    # Jenkins splits at the last dot: package hwmgr.dc2 (the site), class rtr-22_dc2
    assert ring.get("classname") == "hwmgr.dc2.rtr-22_dc2"
    fail = ring.find("failure")
    assert fail.get("message") == "expected 4096, actual 512"
    assert "fix: ethtool -G enp1s0f0 rx 4096" in fail.text
    skipped = [c for c in suites["edge-01.dc3"] if c.find("skipped") is not None]
    assert any(c.get("name") == "setting enp1s0f0 ring.rx" for c in skipped)
    skipped = [c.find("skipped").get("message") for c in suites["rtr-14.dc1"]
               if c.find("skipped") is not None]
    assert any(m.startswith("uncatalogued: ixgbe 5.1.0-k-rh7.9") for m in skipped)
    err = suites["old-02.dc1"].find("testcase/error")
    assert err.get("type") == "unreachable" and "No route to host" in err.get("message")
    for s in suites.values():
        assert int(s.get("tests")) == len(s.findall("testcase"))


def test_junit_strips_control_characters() -> None:
    host = load_host({"status": "failed", "check": None, "error": "bad\x1b[31m\x00"}, "h")
    xml = junit_xml(fr.build_report({"h\x07": host}), {"h\x07": "site.one"})
    root = ET.fromstring(xml)  # control characters would make this fail
    assert root.find("testsuite").get("name") == "h\\x07"
    assert "\\x1b[31m\\x00" in root.find(".//error").get("message")
    assert root.find(".//testcase").get("classname") == "hwmgr.site_one.h\\x07"


def test_junit_escapes_markup_quotes_and_newlines_in_attributes_and_text() -> None:
    why = 'ssh: "host" <down> & \'gone\'\n\tsecond line'
    host = load_host({"status": "unreachable", "check": None, "error": why}, "h")
    xml = junit_xml(fr.build_report({'a&b"<c>': host}), {'a&b"<c>': "g'1"})
    root = ET.fromstring(xml)
    err = root.find(".//error")
    # control characters are written visibly (printable), the markup escaped and read back
    assert err.get("message") == printable(f"unreachable: {why}")
    assert err.text == "\n".join(printable(line) for line in why.split("\n"))
    assert root.find("testsuite").get("name") == 'a&b"<c>'
    assert root.find(".//testcase").get("classname") == "hwmgr.g'1.a&b\"<c>"


# ------------------------------------------------------------------------ HTML, static
class Tags(HTMLParser):
    """Every start tag and its attributes; text per element id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(html_text: str) -> Tags:
    p = Tags()
    p.feed(html_text)
    return p


def assert_safe_page(page: Tags) -> None:
    """Exactly the page's own two scripts, no injected element, nothing loaded from outside
    (links only to the page's own views, #...)."""
    names = Counter(t for t, _ in page.tags)
    assert names["script"] == 2 and names["img"] == 0 and names["link"] == 0
    for tag, attrs in page.tags:
        assert "src" not in attrs and (attrs.get("href") or "#")[0] == "#", (tag, attrs)
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)


def test_html_is_self_contained_and_escaped(built: dict[str, Any]) -> None:
    text = (built["out"] / "fleet-report.html").read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text
    page = parse(text)
    assert_safe_page(page)
    assert fleet_data.HOSTILE in page_data(text)["s"]  # drawn by the script (browser tests)
    data = by_id(page, "fleet-data")
    assert data["type"] == "application/json" and "</script><script>" not in text
    svg = next(a for t, a in page.tags if t == "svg")
    assert svg["data-points"] == "4"  # three earlier reports and this one
    assert "compliant 8 → 14" in "".join(page.text) and "drift 15 → 9" in "".join(page.text)


def test_embed_json_cannot_close_the_script() -> None:
    obj = {"a": "</script><!-- & \u2028"}
    text = embed_json(obj)
    assert not set("<>&") & set(text) and json.loads(text) == obj


def test_page_renders_without_history() -> None:
    rep = fr.build_report({"h": load_host({"status": "compliant", "check": {
        "findings": []}, "error": None}, "h")})
    page = parse(render_html(rep, [], groups={}, news=news(None, rep)))
    assert_safe_page(page)
    assert not [t for t, _ in page.tags if t == "svg"]
    assert "fleet-trend.json" in "".join(page.text)
    assert "no earlier report" in "".join(page.text)


# markup, attribute breakers, entities, a template's own syntax, a line separator and a BOM
EVIL = ['<img src=x onerror=alert(1)>', '"><script>alert(1)</script>', "' onmouseover='x",
        "&lt;b&gt; &amp;", "{{ 7*7 }}{% raw %}", "a\u2028b\ufeff"]


@pytest.mark.parametrize("evil", EVIL)
def test_hostile_strings_stay_text_everywhere_on_the_page(evil: str) -> None:
    """A hostile string as host name, group, item, value, fix, reason and catalog version is
    text in every element and attribute the template fills: no element, attribute or script
    appears, the template's syntax is not run, and a reader gets the string back exactly."""
    bad = [fleet_data.finding("setting", f"ring.{evil}", evil, f"{evil}!", "drift",
                              fix=f"ethtool {evil}", reason=evil),
           fleet_data.finding("setting", f"mtu.{evil}", 9000, None, "unknown", reason=evil)]
    data = fleet_data.check_data(bad)
    data["catalog_version"] = evil
    name = f"h-{evil}"
    rep = fr.build_report({name: load_host({"status": "drift", "check": data, "error": None},
                                           "h.json")})
    text = render_html(rep, [], groups={name: f"g-{evil}"}, news=news(None, rep))
    page = parse(text)
    assert_safe_page(page)
    if "{{ 7*7 }}" in evil:  # the template's syntax is text, never run (the page's own
        shown = html.unescape(text)  # numbers and times may hold a 49 of their own)
        assert f"ring.{evil}" in shown and "ring.49" not in shown
    rows = {a.get("data-item"): a for t, a in page.tags if t == "tr" and "data-item" in a}
    assert set(rows) == {f"ring.{evil}", f"mtu.{evil}"}  # attributes read back exactly
    assert by_id(page, "group-table") and any(
        a.get("data-group") == f"g-{evil}" for _, a in page.tags)
    words = "".join(page.text)
    for shown in (f"ethtool {evil}", f"{evil}!", f"catalog {evil}", f"g-{evil}"):
        assert shown in words, shown
    assert name in page_data(text)["s"]


def page_data(text: str) -> dict[str, Any]:
    """The page's embedded compact data."""
    start = text.index('<script id="fleet-data" type="application/json">')
    body = text[text.index(">", start) + 1:text.index("</script>", start)]
    data: dict[str, Any] = json.loads(body)
    return data


def test_fleet_table_counts_hosts_per_item_and_says_limits_in_words(tmp_path: Path) -> None:
    hosts = fleet_data.fleet()
    limit = fleet_data.host_findings(set())
    limit.append(fleet_data.finding("setting", "ring.tx", {"min": 10000}, 1000, "drift",
                                    fix="ethtool -G enp1s0f0 tx 10000"))
    hosts["rtr-40.dc2"] = {"status": "drift", "check": fleet_data.check_data(limit),
                           "error": None}
    (tmp_path / "batch.json").write_text(json.dumps({"hosts": hosts}))
    res = hwmgr("fleet-report", "--results", str(tmp_path / "batch.json"),
                "--out", str(tmp_path / "o"))
    assert res.returncode == 5, res.stderr
    text = (tmp_path / "o" / "fleet-report.html").read_text()
    rows = [a for t, a in parse(text).tags if t == "tr" and "data-item" in a]
    first = rows[0]  # the item most hosts drift on comes first
    assert (first["data-item"], first["data-status"], first["data-hosts"]) == (
        "ring.rx", "drift", "4")
    assert [r["data-status"] for r in rows] == sorted(
        (r["data-status"] for r in rows), key=["drift", "unknown"].index)
    assert "≥ 10000" in text and '{"min": 10000}' not in text  # as check prints a limit
    data = page_data(text)
    assert "≥ 10000" in data["s"] and len(data["h"]) == 32


def test_results_files_groups_and_duplicates(tmp_path: Path) -> None:
    hosts = fleet_data.fleet()
    names = sorted(hosts)
    (tmp_path / "a.json").write_text(json.dumps({"hosts": {n: hosts[n] for n in names[:10]}}))
    (tmp_path / "dir").mkdir()
    for n in names[10:]:
        (tmp_path / "dir" / f"{n}.json").write_text(json.dumps(hosts[n]))
    (tmp_path / "groups.json").write_text(json.dumps({"all": names, "routers": [
        n for n in names if n.startswith("rtr")], "edge": [n for n in names if "edge" in n]}))
    res = hwmgr("fleet-report", "--results", str(tmp_path / "a.json"), "--results",
                str(tmp_path / "dir"), "--out", str(tmp_path / "o"),
                "--groups", str(tmp_path / "groups.json"))
    assert res.returncode == 5, res.stderr
    groups = {a["data-group"] for t, a in parse(
        (tmp_path / "o" / "fleet-report.html").read_text()).tags if "data-group" in a}
    assert groups == {"routers", "edge", "dc1"}  # old-*/db-07 are in no group: their domain
    res = hwmgr("fleet-report", "--results", str(tmp_path / "a.json"), "--results",
                str(tmp_path / "a.json"), "--out", str(tmp_path / "o2"))
    assert res.returncode == 8 and "is also in" in res.stderr and not (tmp_path / "o2").exists()
    res = hwmgr("fleet-report", "--results", str(tmp_path / "dir"), "--out",
                str(tmp_path / "o2"), "--group-by", "([a-z")
    assert res.returncode == 2 and "--group-by" in res.stderr and "Traceback" not in res.stderr


def test_new_since_the_last_report_from_the_trend_file(tmp_path: Path) -> None:
    hosts = fleet_data.fleet()
    (tmp_path / "r").mkdir()

    def night(epoch: int) -> subprocess.CompletedProcess:
        for name, v in hosts.items():
            (tmp_path / "r" / f"{name}.json").write_text(json.dumps(v))
        return hwmgr("fleet-report", "--results", str(tmp_path / "r"), "--out",
                     str(tmp_path / "o"), "--json", env={"SOURCE_DATE_EPOCH": str(epoch)})

    assert night(NOW - 86400).returncode == 5
    # overnight: a compliant host drifts on ring.rx, a drifting one also on pause.rx, one fixed
    hosts["rtr-01.dc1"] = {"status": "drift", "check": fleet_data.check_data(
        fleet_data.host_findings({"ring.rx"})), "error": None}
    hosts["rtr-21.dc2"] = {"status": "drift", "check": fleet_data.check_data(
        fleet_data.host_findings({"pause.rx", "txqueuelen"})), "error": None}
    hosts["rtr-27.dc2"] = {"status": "compliant", "check": fleet_data.check_data(
        fleet_data.host_findings(set())), "error": None}
    res = night(NOW)
    assert res.returncode == 5, res.stderr
    since = json.loads(res.stdout)["data"]["new_since"]
    assert since == {"since": "2026-11-22T02:00:00Z", "hosts": 1, "items": 2, "fixed": 1}
    trend = json.loads((tmp_path / "o" / "fleet-trend.json").read_text())
    assert len(trend["points"]) == 2 and trend["drift"]["rtr-01.dc1"] == [
        "setting enp1s0f0 ring.rx"]
    text = (tmp_path / "o" / "fleet-report.html").read_text()
    news_p = next(a for t, a in parse(text).tags if a.get("id") == "news")
    assert (news_p["data-new-hosts"], news_p["data-new-items"], news_p["data-fixed"]) == (
        "1", "2", "1")
    data = page_data(text)
    new_hosts = {data["s"][h[0]] for h in data["h"] if h[4] == 1}
    assert new_hosts == {"rtr-01.dc1", "rtr-21.dc2"}
    (tmp_path / "bad.json").write_text('{"format_version": 1, "points": 3}')
    before = (tmp_path / "o" / "fleet-report.json").read_bytes()
    res = hwmgr("fleet-report", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o"),
                "--previous", str(tmp_path / "bad.json"))
    assert res.returncode == 8 and "bad.json" in res.stderr
    assert (tmp_path / "o" / "fleet-report.json").read_bytes() == before  # nothing written


def test_fleet_prom(tmp_path: Path, built: dict[str, Any]) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    prom = tmp_path / "fleet.prom"
    res = hwmgr("fleet-report", "--results", str(built["tmp"] / "results"), "--out",
                str(tmp_path / "o"), "--prom", str(prom), "--run-started", "1000")
    assert res.returncode == 5, res.stderr
    m: dict[str, list] = {}
    for fam in text_string_to_metric_families(prom.read_text()):
        for smp in fam.samples:
            m.setdefault(smp.name, []).append((dict(smp.labels), smp.value))
    s = built["report"]["summary"]
    per = {lab["status"]: v for lab, v in m["hwmgr_fleet_hosts"]}
    assert per["drift"] == s["drift"] and per["reboot-pending"] == s["reboot_pending"]
    ring = {lab["status"]: v for lab, v in m["hwmgr_fleet_item_hosts"]
            if lab["item"] == "ring.rx"}
    assert ring["drift"] == 4 and ring["unknown"] == 3
    assert len(m["hwmgr_fleet_host_status"]) == s["hosts"]
    assert ({"host": "rtr-26.dc2", "group": "dc2", "status": "drift"}, 1.0) in m[
        "hwmgr_fleet_host_status"]
    assert m["hwmgr_fleet_report_success"] == [({}, 1.0)]
    assert m["hwmgr_fleet_run_duration_seconds"][0][1] > 1000
    res = hwmgr("fleet-report", "--results", str(tmp_path / "nosuch"), "--out",
                str(tmp_path / "o"), "--prom", str(prom))
    assert res.returncode == 8
    text = prom.read_text()
    assert "hwmgr_fleet_report_success 0.0" in text and "hwmgr_fleet_host_status" not in text


# ------------------------------------------------------------------------ HTML, real browser
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="chromium is needed (make apt-test installs it)")


def chromium(url: str, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with scripts run to completion (virtual time, no real waiting)."""
    return subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox",
                           "--no-first-run", "--hide-scrollbars",
                           "--virtual-time-budget=10000", *args, url],
                          capture_output=True, text=True, timeout=180, check=False)


def dom(path: Path, fragment: str = "") -> Tags:
    res = chromium(path.as_uri() + fragment, "--dump-dom")
    assert res.returncode == 0 and "data-ready" in res.stdout, res.stderr[-2000:]
    return parse(res.stdout)


def by_id(page: Tags, ident: str) -> dict[str, str | None]:
    return next(a for _, a in page.tags if a.get("id") == ident)


@pytest.mark.slow  # Chromium
@needs_chromium
def test_browser_counts_match_the_json(built: dict[str, Any]) -> None:
    html_path = built["out"] / "fleet-report.html"
    page = dom(html_path)
    assert_safe_page(page)  # also after the script ran: nothing injected into the live DOM
    s = built["report"]["summary"]
    for key in ("hosts", "compliant", "drift", "unknown", "unreachable", "failed",
                "reboot-pending"):
        card = by_id(page, f"count-{key}")
        assert card["data-js-count"] == card["data-json-count"] == str(
            s[key.replace("-", "_")]), key
        assert "mismatch" not in card["class"]
    body = next(a for t, a in page.tags if t == "body")
    items = Counter(f["status"] for h in built["report"]["hosts"].values()
                    for f in h["findings"])
    for status in ("ok", "drift", "unknown", "uncatalogued", "unsupported"):
        assert body[f"data-js-items-{status}"] == str(items[status])
    assert fleet_data.HOSTILE in "".join(page.text)


class Counts(Tags):
    """Tags plus the text of the host counters, the host rows and a host's detail rows."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, str] = {}
        self._open: str | None = None
        self.rows: list[str] = []
        self.detail: list[str] = []
        self._in_detail = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        super().handle_starttag(tag, attrs)
        a = dict(attrs)
        self._open = a.get("id") if a.get("id") in ("visible-hosts", "matching-hosts",
                                                    "filter-says") else None
        if tag == "tr" and a.get("class") in ("host-row", "host-row open"):
            self.rows.append(a["data-host"] or "")
            self._in_detail = False
        elif tag == "tr" and "data-detail" in a:
            self._in_detail = True
        elif tag == "tr" and self._in_detail and "data-status" in a:
            self.detail.append(a["data-status"] or "")

    def handle_data(self, data: str) -> None:
        super().handle_data(data)
        if self._open:
            self.counts[self._open] = data
            self._open = None


def dom_counts(path: Path, fragment: str = "") -> Counts:
    res = chromium(path.as_uri() + fragment, "--dump-dom")
    assert res.returncode == 0 and "data-ready" in res.stdout, res.stderr[-2000:]
    page = Counts()
    page.feed(res.stdout)
    return page


def _drifts_on(h: dict[str, Any], item: str) -> bool:
    return any(f["status"] == "drift" and item in f["item"] for f in h["findings"])


@needs_chromium
@pytest.mark.parametrize(("fragment", "hosts"), [
    ("", lambda r: [n for n, h in r["hosts"].items() if h["status"] != "compliant"]),
    ("#ok=1", lambda r: list(r["hosts"])),
    ("#status=drift", lambda r: [n for n, h in r["hosts"].items() if h["status"] == "drift"]),
    # the case: "ring.rx" with the drift filter lists only hosts drifting on ring.rx
    ("#status=drift&q=ring.rx", lambda r: [n for n, h in r["hosts"].items()
                                          if _drifts_on(h, "ring.rx")]),
    ("#q=ring.rx&item=drift", lambda r: [n for n, h in r["hosts"].items()
                                        if _drifts_on(h, "ring.rx")]),
    ("#q=ring.rx&item=unknown", lambda r: [n for n, h in r["hosts"].items() if any(
        f["status"] == "unknown" and f["item"] == "ring.rx" for f in h["findings"])]),
    ("#layer=sysctl", lambda r: [n for n, h in r["hosts"].items() if any(
        f["status"] != "ok" and f["layer"] == "sysctl" for f in h["findings"])]),
    ("#group=dc3", lambda r: [n for n in r["hosts"] if n.endswith(".dc3")]),
], ids=["default", "all", "drift-hosts", "drift-ring.rx", "item-drift", "item-unknown",
        "layer", "group"])
@pytest.mark.slow  # Chromium
def test_browser_filters(built: dict[str, Any], fragment: str, hosts: Any) -> None:
    rep = built["report"]
    page = dom_counts(built["out"] / "fleet-report.html", fragment)
    want = hosts(rep)
    assert want and int(page.counts["matching-hosts"]) == len(want)
    assert int(page.counts["visible-hosts"]) == len(want)  # under a page (100 rows)
    assert sorted(page.rows) == sorted(want)
    order = [rep["hosts"][n]["status"] for n in page.rows]  # worst first
    assert order == sorted(order, key=fr.HOST_ORDER.__getitem__)
    assert page.counts["filter-says"].startswith("Showing ")


@pytest.mark.slow  # Chromium
@needs_chromium
def test_browser_host_detail_on_demand(built: dict[str, Any]) -> None:
    rep = built["report"]
    page = dom_counts(built["out"] / "fleet-report.html", "#host=rtr-26.dc2")
    want = [f["status"] for f in rep["hosts"]["rtr-26.dc2"]["findings"] if f["status"] != "ok"]
    assert page.detail == want  # compliant items hidden unless asked
    page = dom_counts(built["out"] / "fleet-report.html", "#host=rtr-26.dc2&ok=1")
    assert page.detail == [f["status"] for f in rep["hosts"]["rtr-26.dc2"]["findings"]]


@pytest.mark.slow  # Chromium
@needs_chromium
def test_browser_pages_a_large_fleet(tmp_path: Path) -> None:
    hosts = fleet_data.big_fleet(1500)
    (tmp_path / "big.json").write_text(json.dumps({"hosts": hosts}))
    res = hwmgr("fleet-report", "--results", str(tmp_path / "big.json"), "--out",
                str(tmp_path / "o"))
    assert res.returncode == 5, res.stderr
    page = dom_counts(tmp_path / "o" / "fleet-report.html", "#q=ring.rx&item=drift")
    want = [n for n, h in hosts.items() if h["check"] and any(
        f["status"] == "drift" and "ring.rx" in f["item"] for f in h["check"]["findings"])]
    assert int(page.counts["matching-hosts"]) == len(want) > 100
    assert len(page.rows) == int(page.counts["visible-hosts"]) == 100  # one page drawn
    assert set(page.rows) <= set(want)


@pytest.mark.slow  # Chromium
@needs_chromium
def test_screenshot_is_a_real_image(built: dict[str, Any], tmp_path: Path) -> None:
    png = tmp_path / "shot.png"
    screenshot(built["out"] / "fleet-report.html", png)
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (1280, 900)
    assert png.stat().st_size > 20_000  # a rendered page, not a blank canvas


def screenshot(page: Path, png: Path) -> None:
    res = chromium(page.as_uri(), f"--screenshot={png}", "--window-size=1280,900")
    assert res.returncode == 0 and png.is_file(), res.stderr[-2000:]


def big_nights(tmp: Path, n: int) -> Path:
    """Two nights of `n` generated hosts into tmp/out (the second has a trend and news)."""
    for night, seed in ((1, 25), (0, 26)):
        results = tmp / f"results-{seed}.json"
        results.write_text(json.dumps({"hosts": fleet_data.big_fleet(n, seed=seed)}))
        hwmgr("fleet-report", "--results", str(results), "--out", str(tmp / "out"),
              env={"SOURCE_DATE_EPOCH": str(NOW - 86400 * night)})
    return tmp / "out" / "fleet-report.html"


if __name__ == "__main__":
    # regenerate docs/fleet-report.png (the 31-host fleet) or, given a host count,
    # docs/fleet-report-10000.png (two nights of generated hosts)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if len(sys.argv) > 2:
            page = big_nights(tmp, int(sys.argv[2]))
        else:
            fleet_data.write_results(tmp / "results")
            hist = history(tmp)
            hwmgr("fleet-report", "--results", str(tmp / "results"), "--out",
                  str(tmp / "out"), "--history", *map(str, hist),
                  env={"SOURCE_DATE_EPOCH": str(NOW)})
            page = tmp / "out" / "fleet-report.html"
        screenshot(page, Path(sys.argv[1]).resolve())


def test_the_cycle_collector_is_back_on_after_a_report_and_after_a_refusal(
        tmp_path: Path) -> None:
    """fleet-report pauses Python's cycle collector while it builds; a caller of cli.main
    (the Ansible module calls it in-process) gets it back as it was, on success and on error."""
    import gc

    from hwmgr.cli import main

    results = tmp_path / "results.json"
    results.write_text(json.dumps({"hosts": fleet_data.big_fleet(20)}))
    assert gc.isenabled()
    assert main(["fleet-report", "--results", str(results), "--out", str(tmp_path / "out"),
                 "--json"]) in (0, 5, 6, 7, 11)
    assert gc.isenabled() and (tmp_path / "out" / "fleet-report.json").is_file()
    results.write_text('{"hosts": {"h": {"status": "sideways"}}}')
    assert main(["fleet-report", "--results", str(results), "--out", str(tmp_path / "o2"),
                 "--json"]) == 8
    assert gc.isenabled() and not (tmp_path / "o2").exists()
    gc.disable()
    try:  # a caller that had it off keeps it off
        main(["fleet-report", "--results", str(results), "--out", str(tmp_path / "o2"),
              "--json"])
        assert not gc.isenabled()
    finally:
        gc.enable()
