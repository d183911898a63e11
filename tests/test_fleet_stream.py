"""hwmgr.fleet.stream, and the results file read through it a host at a time: the same hosts
as the whole document gives, each host's result dropped once reduced, and hostile files
refused in one line naming the file, in the words (and at the line and column) `json` and
`safejson` use for the whole document."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support import fleet_data, run_cli

from hwmgr import safejson
from hwmgr.errors import BadInputError
from hwmgr.fleet import results, stream
from hwmgr.fleet.report import schema
from hwmgr.fleet.results import load_host, read_results_file
from hwmgr.fleet.stream import JSONStream


def whole(path: Path) -> dict[str, Any]:
    """What the whole-document reading gives: every entry of `hosts` loaded alone."""
    doc = json.loads(path.read_text())
    base = str(path)
    if "command" in doc:
        doc, base = doc["data"], f"{path}: data"
    return {name: load_host(raw, f"{base}.hosts[{name!r}]") for name, raw in doc["hosts"].items()}


def envelope(hosts: dict[str, Any]) -> dict[str, Any]:
    """`hwmgr check --roots-from --json`'s shape around `hosts`."""
    return {"format_version": 1, "command": "check", "status": "drift",
            "data": {"batch": True, "summary": {"drift": 1}, "hosts": hosts}, "errors": []}


@pytest.mark.parametrize("chunk", [3, 64, stream.CHUNK])
@pytest.mark.parametrize("shape", ["playbook", "batch", "indented"])
def test_streamed_hosts_equal_the_whole_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 chunk: int, shape: str) -> None:
    monkeypatch.setattr(stream, "CHUNK", chunk)  # windows that end inside every kind of token
    hosts = fleet_data.fleet()
    hosts["caf\u00e9-\u6771\u4eac.dc9"] = {**hosts["rtr-21.dc2"], "error": None}  # multibyte
    doc = envelope(hosts) if shape == "batch" else {"hosts": hosts}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc, indent=1 if shape == "indented" else None,
                               ensure_ascii=False))
    assert read_results_file(path) == whole(path)


def test_equal_findings_of_many_hosts_are_one_object(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"hosts": fleet_data.big_fleet(300)}))
    hosts = read_results_file(path)
    assert hosts == whole(path)
    found = [f for h in hosts.values() for f in h["findings"]]
    distinct = {json.dumps(f, sort_keys=True) for f in found}
    assert len({id(f) for f in found}) == len(distinct) < len(found) / 10


def test_only_one_host_is_held_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window on the file never holds much more than one host's entry and a chunk."""
    monkeypatch.setattr(stream, "CHUNK", 256)
    widest = 0
    more = JSONStream._more

    def watched(self: JSONStream) -> bool:
        nonlocal widest
        got = more(self)
        widest = max(widest, len(self.buf))
        return got

    monkeypatch.setattr(JSONStream, "_more", watched)
    hosts = fleet_data.big_fleet(400)
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"hosts": hosts}))
    entry = max(len(json.dumps(h)) for h in hosts.values())
    assert len(read_results_file(path)) == 400
    assert widest < 2 * entry + 2 * 256 < path.stat().st_size / 50


def test_what_the_report_does_not_keep_is_dropped(tmp_path: Path) -> None:
    host = fleet_data.fleet()["rtr-21.dc2"]
    host["check"]["host"] = {"hostname": "x" * 1000}
    host["check"]["findings"][0]["extra"] = ["y" * 1000]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"hosts": {"a": host}}))
    kept = read_results_file(path)["a"]
    assert "x" * 1000 not in repr(kept) and "y" * 1000 not in repr(kept)
    assert {k for f in kept["findings"] for k in f} == results.FINDING_KEYS


def schema3(entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` as check schema 3 prints it: each finding's evidence replaced by source."""
    data = entry["check"]
    findings = [{**{k: v for k, v in f.items() if k != "evidence"},
                 "source": {"ref": f"rule:{f['item']}", "url": "https://example.org/x"}
                 if f["status"] != "ok" else None} for f in data["findings"]]
    return {**entry, "check": {**data, "schema_version": 3, "findings": findings}}


def test_schema_3_findings_keep_their_source(tmp_path: Path) -> None:
    import jsonschema

    old = fleet_data.fleet()
    hosts = {**old, "rtr-21.dc2": schema3(old["rtr-21.dc2"])}  # one host upgraded already
    results_dir = tmp_path / "r"
    results_dir.mkdir()
    (results_dir / "all.json").write_text(json.dumps({"hosts": hosts}))
    res = run_cli("fleet-report", "--results", str(results_dir / "all.json"), "--out",
                  str(tmp_path / "o"))
    assert res.returncode == 5, res.stderr
    rep = json.loads((tmp_path / "o" / "fleet-report.json").read_text())
    jsonschema.validate(rep, schema())
    new = rep["hosts"]["rtr-21.dc2"]["findings"]
    assert all("evidence" not in f and "source" in f for f in new)
    assert {f["source"]["ref"] for f in new if f["source"]} >= {"rule:pause.rx"}
    assert all("evidence" in f and "source" not in f
               for f in rep["hosts"]["rtr-22.dc2"]["findings"])


@pytest.mark.parametrize("source", [5, {"url": None}, {"ref": 1, "url": None},
                                    {"ref": "rule:x", "url": 3}])
def test_a_bad_source_is_one_line_naming_the_field(tmp_path: Path, source: Any) -> None:
    entry = schema3(fleet_data.fleet()["rtr-21.dc2"])
    entry["check"]["findings"][0]["source"] = source
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"hosts": {"a": entry}}))
    with pytest.raises(BadInputError, match=r"hosts\['a'\].check.findings\[0\].source: "):
        read_results_file(path)


def corrupt(tmp_path: Path, how: str) -> Path:
    text = json.dumps({"hosts": fleet_data.fleet()}, indent=1)
    mid = len(text) // 2
    path = tmp_path / "results.json"
    if how == "truncated":
        path.write_text(text[:mid])
    elif how == "stray-character":
        cut = text.index(",\n", mid) + 1  # between two members: never inside a string
        path.write_text(text[:cut] + "@" + text[cut:])
    elif how == "missing-comma":
        cut = text.index('},\n  "rtr-03.dc1"')
        path.write_text(text[:cut + 1] + text[cut + 2:])
    elif how == "extra-data":
        path.write_text(text + " []")
    elif how == "not-utf8":
        path.write_bytes(text[:mid].encode() + b"\xff" + text[mid:].encode())
    elif how == "huge-int":
        path.write_text(text.replace('"expected": 4096', '"expected": ' + "9" * 5000, 1))
    elif how == "deep":
        path.write_text('{"hosts": {"a": {"status": "drift", "check": ' + "[" * 100 + "]" * 100
                        + "}}}")
    elif how == "deep-past-the-decoder":
        path.write_text('{"hosts": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    elif how == "not-an-object":
        path.write_text("[1, 2]")
    elif how == "hosts-a-list":
        path.write_text('{"hosts": []}')
    return path


HOSTILE = ["truncated", "stray-character", "missing-comma", "extra-data", "not-utf8", "huge-int",
           "deep", "deep-past-the-decoder", "not-an-object", "hosts-a-list"]


@pytest.mark.parametrize("chunk", [5, stream.CHUNK])
@pytest.mark.parametrize("how", HOSTILE)
def test_hostile_file_is_refused_as_the_whole_document_would_be(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, chunk: int) -> None:
    monkeypatch.setattr(stream, "CHUNK", chunk)
    path = corrupt(tmp_path, how)
    with pytest.raises(BadInputError) as streamed:
        read_results_file(path)
    try:  # the same file through the whole-document door
        doc = safejson.load_file(path, max_bytes=results.MAX_BATCH_BYTES)
        results._entries(doc, path, results.Interner())
    except BadInputError as exc:
        expected = exc.message
    assert streamed.value.message == expected
    assert "\n" not in expected and str(path) in expected


def test_hostile_results_file_through_the_verb_is_one_line(tmp_path: Path) -> None:
    path = corrupt(tmp_path, "stray-character")
    res = run_cli("fleet-report", "--results", str(path), "--out", str(tmp_path / "o"))
    assert res.returncode == 8 and "Traceback" not in res.stderr
    line, = res.stderr.strip().splitlines()
    assert str(path) in line and "not valid JSON" in line and "line " in line
    assert not (tmp_path / "o").exists()


def test_sizes_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"hosts": {"a": fleet_data.fleet()["rtr-21.dc2"],
                                          "big": {"status": "unreachable", "check": None,
                                                  "error": "x" * 20_000}}}))
    monkeypatch.setattr(stream, "CHUNK", 512)
    monkeypatch.setattr(results, "MAX_INPUT_BYTES", 8000)
    with pytest.raises(BadInputError, match=r"hosts\['big'\]: larger than 8000 bytes"):
        read_results_file(path)
    monkeypatch.setattr(results, "MAX_BATCH_BYTES", 1000)
    with pytest.raises(BadInputError, match="larger than 1000 bytes; refusing to read it"):
        read_results_file(path)


def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    with pytest.raises(BadInputError, match="is a FIFO, not a file"):
        read_results_file(fifo)


def test_a_bad_host_is_named_even_among_good_ones(tmp_path: Path) -> None:
    hosts = fleet_data.fleet()
    hosts["rtr-05.dc1"]["status"] = "fine"
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"hosts": hosts}))
    with pytest.raises(BadInputError) as exc:
        read_results_file(path)
    assert exc.value.message == f"{path}.hosts['rtr-05.dc1'].status: 'fine' is not one of " \
        "compliant, drift, unknown, unreachable, failed, reboot-pending"


def test_json_rules_on_repeated_keys_and_the_envelope(tmp_path: Path) -> None:
    """A repeated key's last value counts, as for json.loads; a batch envelope's own hosts
    count, not a `hosts` beside it; errors of what is not used are not raised."""
    good = fleet_data.fleet()["rtr-21.dc2"]
    path = tmp_path / "results.json"
    path.write_text('{"hosts": {"a": {"status": "fine"}, "a": ' + json.dumps(good) + "}}")
    assert read_results_file(path) == {"a": load_host(good, "x")}
    doc = envelope({"b": good})
    path.write_text('{"hosts": {"z": 1}, ' + json.dumps(doc)[1:])
    assert set(read_results_file(path)) == {"b"}


def test_lone_surrogates_are_escaped_in_what_is_kept(tmp_path: Path) -> None:
    """As the whole-document reader escapes them (safejson), in the findings, errors and
    names the report keeps; the text of what it drops is not searched."""
    hosts = fleet_data.fleet()
    drifting = hosts["rtr-22.dc2"]["check"]
    drifting["findings"][2]["reason"] = "bad \ud800 read"
    drifting["findings"][3]["expected"] = {"min": "\udfff"}
    drifting["host"] = {"hostname": "\udc80"}
    hosts["old-01.dc1"]["error"] = "ssh: \udc80"
    hosts["na\ud801me"] = hosts.pop("old-02.dc1")
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"hosts": hosts}))  # the file has \ud800 escapes, as Ansible's
    doc = safejson.load_file(path)
    assert read_results_file(path) == {n: load_host(raw, n) for n, raw in doc["hosts"].items()}
    kept = read_results_file(path)
    assert "na\\ud801me" in kept and kept["old-01.dc1"]["error"] == "ssh: \\udc80"
    assert any(f["reason"] == "bad \\ud800 read" for f in kept["rtr-22.dc2"]["findings"])
