"""The rollout record (hwmgr/fleet/rollout.py): budget arithmetic, batches, claim and mark
order, resume after a crash, halt, a damaged record, and the report's page escaping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_cli

from hwmgr.errors import BadInputError, RefusedError, UsageError
from hwmgr.fleet import rollout as ro
from hwmgr.fleet.rollout_page import render_page

CHANGE = {"verb": "apply", "args": ["--layer", "settings"]}


@pytest.mark.parametrize(("text", "hosts", "limit"), [
    ("1", 20, 1), ("3", 20, 3), ("10%", 20, 2), ("5%", 20, 1), ("12%", 20, 3),
    ("1%", 20, 1), ("100%", 20, 20), ("50%", 3, 2), ("33.4%", 3, 2), ("10%", 10, 1)])
def test_budget_limit_is_the_count_or_the_first_count_reaching_the_share(
        text: str, hosts: int, limit: int) -> None:
    b = ro.Budget.parse(text)
    assert b.limit(hosts) == limit
    if b.percent is not None:  # the limit reaches the share, one failure fewer does not
        assert limit / hosts >= b.percent / 100 or limit == 1
        assert (limit - 1) / hosts < b.percent / 100


@pytest.mark.parametrize("text", ["0", "-1", "x", "0%", "101%", "nan%", ""])
def test_bad_budget_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="--budget"):
        ro.Budget.parse(text)


def test_batches_grow_and_the_last_size_repeats() -> None:
    hosts = [f"h{i}" for i in range(20)]
    got = ro.plan_batches(hosts, ro.parse_batches("1,2,4"))
    assert [len(b) for b in got] == [1, 2, 4, 4, 4, 4, 1]
    assert [h for b in got for h in b] == hosts
    for bad in ("", "0", "1,x", "2,-1"):
        with pytest.raises(UsageError):
            ro.parse_batches(bad)


def _rec(n: int = 6, budget: str = "1") -> dict:
    return ro.new_record(CHANGE, [f"h{i}" for i in range(n)], [1, 2], ro.Budget.parse(budget))


@pytest.mark.parametrize("change", [{"verb": "apply"}, {"verb": 1, "args": []},
                                    {"verb": "apply", "args": ["--layer", 2]}])
def test_a_record_whose_change_is_not_verb_and_args_is_refused(change: dict) -> None:
    """The record's edge checks the change the page and `start` print word by word."""
    doc = json.loads(json.dumps(ro.new_record(CHANGE, ["h0"], [1], ro.Budget.parse("1"))))
    assert ro.validate(doc, "r.json")["change"] == CHANGE
    with pytest.raises(BadInputError, match=r"^r\.json: change: expected"):
        ro.validate({**doc, "change": change}, "r.json")


def test_a_failed_gate_reaching_the_budget_stops_new_hosts_but_not_those_in_flight() -> None:
    rec = _rec(6, "1")
    assert ro.claim(rec, ["h0"])["start"] == ["h0"]
    ro.mark(rec, "h0", "done", {"passed": True})
    assert ro.claim(rec, ["h1", "h2"])["start"] == ["h1", "h2"]
    out = ro.mark(rec, "h1", "failed", {"passed": False})
    assert out["halted"]["reason"].startswith("failure budget reached: 1 failed gate")
    ro.mark(rec, "h2", "done", {"passed": True})  # in flight: it finishes
    nxt = ro.claim(rec, ["h3", "h4"])
    assert nxt["start"] == [] and set(nxt["skip"]) == {"h3", "h4"}
    ro.mark(rec, "h1", "rolled-back", {"action": "revert", "txn": 7})
    c = ro.counts(rec)
    assert (c["done"], c["rolled-back"], c["pending"], c["failed_gates"]) == (2, 1, 3, 1)


def test_a_percentage_budget_lets_failures_below_it_pass() -> None:
    rec = _rec(10, "20%")  # limit 2
    ro.claim(rec, [f"h{i}" for i in range(4)])
    ro.mark(rec, "h0", "failed", {})
    assert rec["halted"] is None and ro.claim(rec, ["h4"])["start"] == ["h4"]
    ro.mark(rec, "h1", "failed", {})
    assert rec["halted"] is not None and ro.claim(rec, ["h5"])["start"] == []


def test_no_host_is_handed_out_twice_and_a_crashed_one_comes_back_as_a_resume() -> None:
    rec = _rec(4)
    ro.claim(rec, ["h0"])
    ro.mark(rec, "h0", "done", {})
    again = ro.claim(rec, ["h0"])  # the same batch after a re-run: skipped, not changed
    assert again["start"] == [] and again["skip"] == {"h0": "done"}
    ro.claim(rec, ["h1", "h2"])  # ... then the control node dies before marking them
    resumed = ro.claim(rec, ["h1", "h2"])
    assert resumed["start"] == resumed["resume"] == ["h1", "h2"]
    assert rec["hosts"]["h1"]["resumed"] == 1 and rec["hosts"]["h1"]["batch"] == 2
    with pytest.raises(RefusedError, match="h0 is done: it cannot be marked done"):
        ro.mark(rec, "h0", "done", {})
    with pytest.raises(RefusedError, match="cannot be marked rolled-back"):
        ro.mark(rec, "h1", "rolled-back", {})
    assert ro.claim(rec, ["nosuch"])["skip"] == {"nosuch": "not in this rollout"}


def test_halt_keeps_the_first_reason_and_stops_claims() -> None:
    rec = _rec(3)
    ro.halt(rec, "link flaps on the canary")
    ro.halt(rec, "second")
    assert rec["halted"]["reason"] == "link flaps on the canary"
    assert ro.claim(rec, ["h0"])["start"] == []


@pytest.mark.slow  # four CLI runs (~0.5 s)
def test_the_cli_resumes_the_same_rollout_and_refuses_another(tmp_path: Path) -> None:
    rec = tmp_path / "r.json"
    start = ["rollout", "start", str(rec), "--change", "apply --layer settings", "--hosts",
             "a,b,c", "--json"]
    first = json.loads(run_cli(*start).stdout)["data"]
    assert first["resumed"] is False and first["batches"] == [["a"], ["b", "c"]]
    run_cli("rollout", "claim", str(rec), "--hosts", "a")
    second = json.loads(run_cli(*start).stdout)["data"]
    assert second["resumed"] is True and second["id"] == first["id"]
    assert json.loads(rec.read_text())["hosts"]["a"]["state"] == "in-flight"  # kept
    other = run_cli("rollout", "start", str(rec), "--change", "apply", "--hosts", "a")
    assert other.returncode == 9 and "holds rollout" in other.stderr
    assert other.stderr.count("\n") == 1


@pytest.mark.parametrize(("damage", "field"), [
    ("{", "not valid JSON"), ('{"format": "x"}', "format"),
    ('{"format": "hwmgr-rollout", "version": 1, "hosts": {"a": {"state": "weird"}}}',
     "hosts.a.state")])
def test_a_damaged_record_is_one_line_exit_8_and_unchanged(tmp_path: Path, damage: str,
                                                           field: str) -> None:
    rec = tmp_path / "r.json"
    rec.write_text(damage)
    res = run_cli("rollout", "claim", str(rec), "--hosts", "a")
    assert res.returncode == 8 and field in res.stderr and res.stderr.count("\n") == 1
    assert rec.read_text() == damage


def test_bad_change_and_host_names_are_usage_errors(tmp_path: Path) -> None:
    rec = tmp_path / "r.json"
    for change in ("reboot", "upgrade igb", "apply --force"):
        res = run_cli("rollout", "start", str(rec), "--change", change, "--hosts", "a")
        assert res.returncode == 2 and "--change" in res.stderr
    res = run_cli("rollout", "start", str(rec), "--change", "apply", "--hosts", "a b\x1b")
    assert res.returncode == 2 and not rec.exists()


@pytest.mark.slow  # imports jinja2 (~0.4 s here)
def test_the_page_escapes_what_hosts_sent() -> None:
    rec = ro.new_record(CHANGE, ["<img src=x>"], [1], ro.Budget.parse("1"))
    ro.claim(rec, ["<img src=x>"])
    ro.mark(rec, "<img src=x>", "failed", {"passed": False, "steps": [
        {"step": "throughput", "passed": False, "detail": "<script>alert(1)</script>"}]})
    page = render_page(rec)
    assert "<script>" not in page and "<img src=x>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "Halted" in page


@pytest.mark.slow  # five CLI runs (~0.6 s)
def test_status_says_done_failed_or_partial(tmp_path: Path) -> None:
    rec = tmp_path / "r.json"
    run_cli("rollout", "start", str(rec), "--change", "apply", "--hosts", "a,b")
    assert run_cli("rollout", "status", str(rec)).returncode == 6  # EXIT_PARTIAL: pending
    run_cli("rollout", "claim", str(rec), "--hosts", "a,b")
    run_cli("rollout", "mark", str(rec), "--host", "a", "--state", "done")
    run_cli("rollout", "mark", str(rec), "--host", "b", "--state", "failed")
    res = run_cli("rollout", "status", str(rec))
    assert res.returncode == 1 and "halted: failure budget reached" in res.stdout
