"""hwmgr.fleet.report / html and the fleet-report verb, on a realistic 31-host fleet.

The page is loaded in a real headless Chromium: the counts its script computes from the
embedded JSON must equal the report's, filters must show the right rows, and a hostile host
name must stay text. Regenerate the screenshot in docs/ with
`PYTHONPATH=. python tests/test_fleet_report.py docs/fleet-report.png`.
"""

from __future__ import annotations

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

import fleet_data  # noqa: E402

from hwmgr.fleet import report as fr  # noqa: E402
from hwmgr.fleet.html import embed_json, render_html  # noqa: E402

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
        loaded = {k: fr.load_host(v, k) for k, v in hosts.items()}
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
    assert fr.load_host({"status": "compliant", "check": old, "error": None},
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
    assert 'data-points="2"' in page and 'data-s-uncatalogued="1"' in page


def test_cli_outcome_and_exit_code(built: dict[str, Any]) -> None:
    res = built["res"]
    assert res.returncode == 5, res.stderr  # drift wins over the unreachable hosts
    env = json.loads(res.stdout)
    assert env["command"] == "fleet-report" and env["status"] == "drift"
    assert env["data"]["summary"] == built["report"]["summary"]
    assert sorted(Path(f).name for f in env["data"]["files"]) == [
        "fleet-report.html", "fleet-report.json", "fleet-report.xml"]
    assert not [p for p in built["out"].iterdir() if p.name.startswith(".")]  # no temp files


@pytest.mark.parametrize(("keep", "code"), [
    ({"compliant"}, 0), ({"compliant", "unreachable", "failed"}, 6),
    ({"compliant", "reboot-pending"}, 7), ({"compliant", "unknown"}, 11),
    ({"compliant", "unknown", "failed"}, 6),
])
def test_exit_codes(tmp_path: Path, keep: set[str], code: int) -> None:
    hosts = {k: v for k, v in fleet_data.fleet().items() if v["status"] in keep}
    loaded = {k: fr.load_host(v, k) for k, v in hosts.items()}
    assert fr.exit_code(fr.build_report(loaded)) == code
    (tmp_path / "r").mkdir()
    for name, v in hosts.items():
        (tmp_path / "r" / f"{name}.json").write_text(json.dumps(v))
    res = hwmgr("fleet-report", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o"))
    assert res.returncode == code, res.stderr


def test_raw_check_envelopes_are_accepted(tmp_path: Path) -> None:
    findings = fleet_data.host_findings({"ring.rx"})
    ok = {"format_version": 1, "command": "check", "status": "ok",
          "data": fleet_data.check_data(fleet_data.host_findings(set())), "errors": []}
    drift = {**ok, "status": "drift", "data": fleet_data.check_data(findings)}
    err = {"format_version": 1, "command": "check", "status": "error", "data": None,
           "errors": ["/etc/hwmgr/catalog.json: not valid JSON"]}
    hosts = {n: fr.load_host(v, n) for n, v in (("a", ok), ("b", drift), ("c", err))}
    assert [hosts[n]["status"] for n in "abc"] == ["compliant", "drift", "failed"]
    assert hosts["c"]["error"] == "/etc/hwmgr/catalog.json: not valid JSON"
    rep = fr.build_report(hosts)
    jsonschema.validate(rep, fr.schema())
    assert fr.exit_code(rep) == 5


BAD_INPUTS = [
    ("not json", "{", "not valid JSON"),
    ("a list", "[]", "expected a JSON object"),
    ("bad status", '{"status": "fine", "check": null, "error": null}', ".status: 'fine'"),
    ("drift without check", '{"status": "drift", "check": null, "error": null}',
     "needs its check result"),
    ("bad layer", json.dumps({"status": "drift", "check": {"findings": [
        {"layer": "bios", "item": "x", "status": "drift"}]}}), ".check.findings[0].layer"),
    ("bad count", json.dumps({"status": "drift", "check": {"summary": {"drift": -1},
                                                           "findings": []}}),
     ".check.summary.drift"),
    ("other command", json.dumps({"format_version": 1, "command": "inventory", "status": "ok",
                                  "data": {}, "errors": []}), ".command: 'inventory'"),
    ("not utf-8", b"\xff\xfe{}", "not valid JSON"),
]


@pytest.mark.parametrize(("label", "content", "message"), BAD_INPUTS,
                         ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_file_is_named_and_nothing_written(tmp_path: Path, label: str,
                                                     content: str | bytes, message: str) -> None:
    results = tmp_path / "results"
    fleet_data.write_results(results)
    bad = results / "zz-bad.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    res = hwmgr("fleet-report", "--results", str(results), "--out", str(tmp_path / "out"))
    assert res.returncode == 8, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and message in lines[0], res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()


def test_bad_history_file_and_empty_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    fleet_data.write_results(results)
    hist = tmp_path / "old.json"
    hist.write_text(json.dumps({"format_version": 3, "generated": "x", "summary": {}}))
    res = hwmgr("fleet-report", "--results", str(results), "--out", str(tmp_path / "out"),
                "--history", str(hist))
    assert res.returncode == 8 and str(hist) in res.stderr and "format_version 3" in res.stderr
    assert not (tmp_path / "out").exists()
    (tmp_path / "empty").mkdir()
    res = hwmgr("fleet-report", "--results", str(tmp_path / "empty"), "--out", str(tmp_path))
    assert res.returncode == 8 and "no per-host result files" in res.stderr
    res = hwmgr("fleet-report", "--results", str(results), "--out", str(results))
    assert res.returncode == 2 and "--out must differ" in res.stderr
    assert not (results / "fleet-report.json").exists()


# ------------------------------------------------------------------------ JUnit
def test_junit_has_a_testcase_per_host_and_item(built: dict[str, Any]) -> None:
    root = ET.parse(built["out"] / "fleet-report.xml").getroot()
    rep = built["report"]
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == set(rep["hosts"])  # the hostile name survives as an attribute
    n_items = sum(len(h["findings"]) for h in rep["hosts"].values())
    n_drift = sum(1 for h in rep["hosts"].values() for f in h["findings"]
                  if f["status"] == "drift")
    assert int(root.get("failures")) == n_drift == len(root.findall(".//failure"))
    assert int(root.get("errors")) == 4 == len(root.findall(".//error"))
    assert int(root.get("tests")) == n_items + 4 + 1  # + no-result hosts + reboot pending
    ring = next(c for c in suites["rtr-22.dc2"] if c.get("name").endswith("ring.rx"))
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
    host = fr.load_host({"status": "failed", "check": None, "error": "bad\x1b[31m\x00"}, "h")
    xml = fr.junit_xml(fr.build_report({"h\x07": host}))
    root = ET.fromstring(xml)  # control characters would make this fail
    assert root.find("testsuite").get("name") == "h\\x07"
    assert "\\x1b[31m\\x00" in root.find(".//error").get("message")


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
    """Exactly the page's own two scripts, no injected element, nothing loaded from outside."""
    names = Counter(t for t, _ in page.tags)
    assert names["script"] == 2 and names["img"] == 0 and names["link"] == 0
    for tag, attrs in page.tags:
        assert "src" not in attrs and "href" not in attrs, (tag, attrs)
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)


def test_html_is_self_contained_and_escaped(built: dict[str, Any]) -> None:
    text = (built["out"] / "fleet-report.html").read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text
    page = parse(text)
    assert_safe_page(page)
    assert fleet_data.HOSTILE in "".join(page.text)
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
    rep = fr.build_report({"h": fr.load_host({"status": "compliant", "check": {
        "findings": []}, "error": None}, "h")})
    page = parse(render_html(rep, []))
    assert_safe_page(page)
    assert not [t for t, _ in page.tags if t == "svg"]
    assert "--history" in "".join(page.text)


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
    """Tags plus the text of the visible-hosts / visible-findings counters and hidden rows."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, str] = {}
        self._open: str | None = None
        self.rows: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        super().handle_starttag(tag, attrs)
        a = dict(attrs)
        self._open = a.get("id") if a.get("id") in ("visible-hosts", "visible-findings") else None
        if tag == "tr" and "data-host" in a:
            self.rows.append(a)

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


def _visible(rows: list[dict[str, str | None]], table_key: str) -> list[dict]:
    return [r for r in rows if table_key in r and "hidden" not in (r.get("class") or "")]


@needs_chromium
@pytest.mark.parametrize(("fragment", "hosts", "items"), [
    ("", lambda r: list(r["hosts"]),
     lambda r: [f for h in r["hosts"].values() for f in h["findings"] if f["status"] != "ok"]),
    ("#status=drift", lambda r: [n for n, h in r["hosts"].items() if h["status"] == "drift"],
     lambda r: [f for h in r["hosts"].values() if h["status"] == "drift"
                for f in h["findings"] if f["status"] != "ok"]),
    ("#q=rtr-26&ok=1", lambda r: ["rtr-26.dc2"], lambda r: r["hosts"]["rtr-26.dc2"]["findings"]),
], ids=["all", "drift-hosts", "one-host-with-ok"])
@pytest.mark.slow  # Chromium
def test_browser_filters(built: dict[str, Any], fragment: str, hosts: Any, items: Any) -> None:
    rep = built["report"]
    page = dom_counts(built["out"] / "fleet-report.html", fragment)
    want_hosts, want_items = hosts(rep), items(rep)
    assert int(page.counts["visible-hosts"]) == len(want_hosts)
    assert int(page.counts["visible-findings"]) == len(want_items)
    grid = [r["data-host"] for r in _visible(page.rows, "data-s-name")]
    assert sorted(grid) == sorted(want_hosts)


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


if __name__ == "__main__":  # regenerate docs/fleet-report.png
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        fleet_data.write_results(tmp / "results")
        hist = history(tmp)
        hwmgr("fleet-report", "--results", str(tmp / "results"), "--out", str(tmp / "out"),
              "--history", *map(str, hist), env={"SOURCE_DATE_EPOCH": str(NOW)})
        screenshot(tmp / "out" / "fleet-report.html", Path(sys.argv[1]).resolve())
