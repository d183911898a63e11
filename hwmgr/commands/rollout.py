"""A change rolled over many hosts that stops itself: the record on the control node."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwmgr import safejson
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_REFUSED,
    RefusedError,
    UsageError,
)
from hwmgr.fleet import rollout as ro
from hwmgr.fleet.rollout_page import render_page, report
from hwmgr.fleet.write import write_outputs
from hwmgr.output import Outcome, printable
from hwmgr.ui.context import Context
from hwmgr.ui.options import common_options
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "rollout"
NOTES = """\
actions (RECORD is the rollout's JSON file on the control node; docs/rollout.md):
  start   create the record (every host pending), or resume it: the same change over the
          same hosts is the same rollout; another rollout's record is refused
  claim   which of --hosts (one batch) start now; they become in-flight. None once the
          failed gates reach the budget or after `halt`; done/failed/rolled-back hosts are
          skipped; a host left in flight by a crash is handed out again as a resume
  mark    a host's gate result (--state done|failed) or its rollback (rolled-back), with
          the evidence (--evidence JSON or @FILE)
  halt    no new host starts; hosts in flight finish
  status  the record's summary; report: rollout-report.json and rollout-report.html in --out

exit of status and report: 0 every host done, 1 a gate failed (the rollout halted or not),
6 hosts still pending or in flight and none failed"""
EXAMPLES = (
    Example("hwmgr rollout start r.json --change 'apply --layer settings' "
            "--hosts-from hosts.txt --batches 1,2,4 --budget 1"),
    Example("hwmgr rollout claim r.json --hosts web-02,web-03"),
    Example("hwmgr rollout mark r.json --host web-02 --state done --evidence @gate.json"),
    Example("hwmgr rollout halt r.json --reason 'link flaps on canary'"),
    Example("hwmgr rollout report r.json --out report/", "a gate failed", EXIT_FAILED),
)
EXIT_CODES = {
    EXIT_OK: "done (status/report: every host passed its gate)",
    EXIT_FAILED: "status/report: a host failed its gate",
    EXIT_PARTIAL: "status/report: hosts still pending or in flight, none failed",
    EXIT_NOT_FOUND: "no such record, or a host not in the rollout",
    EXIT_BAD_INPUT: "a damaged record or --evidence (named)",
    EXIT_REFUSED: "another rollout's record, or a mark out of order (a host marked twice)",
}
CHANGES = ("apply", "upgrade")
MAX_EVIDENCE_ARG = 1 << 20


def option_parents() -> list[argparse.ArgumentParser]:
    return [common_options(root=False)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("start", "claim", "mark", "halt", "status", "report"))
    p.add_argument("record", help="the rollout record (JSON) on the control node")
    p.add_argument("--change", help="start: the change, as hwmgr's words: 'apply [--layer L] "
                   "[--interface IF]' or 'upgrade DRIVER --to VERSION'")
    p.add_argument("--hosts", help="start: the hosts in order; claim: one batch (commas)")
    p.add_argument("--hosts-from", metavar="FILE", help="start: one host per line")
    p.add_argument("--batches", default="1,2,4",
                   help="start: batch sizes, canaries first, the last repeating (1,2,4)")
    p.add_argument("--budget", default="1",
                   help="start: failed gates that halt the rollout: a count or N%% (1)")
    p.add_argument("--host", help="mark: the host")
    p.add_argument("--state", choices=tuple(ro.MARKS), help="mark: what happened")
    p.add_argument("--evidence", default="{}", help="mark: the gate's JSON, or @FILE")
    p.add_argument("--batch", metavar="JSON|@FILE",
                   help="mark: a whole batch, {host: the hwmgr_rollout module's result}")
    p.add_argument("--reason", default="halted by hand", help="halt: why")
    p.add_argument("--out", metavar="DIR", help="report: where the files go")


def parse_change(text: str | None) -> dict[str, Any]:
    """--change as {verb, args}; UsageError naming what is wrong."""
    words = shlex.split(text or "")
    if not words or words[0] not in CHANGES:
        raise UsageError(f"--change {text!r}: expected 'apply [--layer L] [--interface IF]' "
                         "or 'upgrade DRIVER --to VERSION'")
    if words[0] == "upgrade" and (len(words) != 4 or words[2] != "--to"):
        raise UsageError(f"--change {text!r}: expected 'upgrade DRIVER --to VERSION'")
    if words[0] == "apply" and any(w.startswith("-") and w not in ("--layer", "--interface")
                                   for w in words[1::2]):
        raise UsageError(f"--change {text!r}: apply takes only --layer and --interface here")
    return {"verb": words[0], "args": words[1:]}


def _hosts(args: argparse.Namespace) -> list[str]:
    names: list[str] = []
    if args.hosts_from:
        raw = safejson.read_file(args.hosts_from, args.hosts_from, 8 << 20)
        names = [ln.strip() for ln in raw.decode("utf-8", "replace").splitlines()
                 if ln.strip() and not ln.lstrip().startswith("#")]
    if args.hosts:
        names += [h.strip() for h in args.hosts.split(",") if h.strip()]
    return [ro.check_host_name(h) for h in names]


def _evidence(text: str, option: str) -> object:
    """--evidence / --batch: JSON text, or @FILE holding it."""
    if text.startswith("@"):
        return safejson.load_file(text[1:], text[1:], MAX_EVIDENCE_ARG)
    if len(text) > MAX_EVIDENCE_ARG:
        raise UsageError(f"{option}: longer than 1 MiB")
    return safejson.load(text, option)


def status_code(rec: ro.Record) -> int:
    """0 every host done; 1 a gate failed; 6 hosts left and none failed."""
    c = ro.counts(rec)
    if c["failed_gates"]:
        return EXIT_FAILED
    return EXIT_OK if c["done"] == len(rec["hosts"]) else EXIT_PARTIAL


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    record = ro.RecordFile(args.record)
    if args.action == "report" and not args.out:
        raise UsageError("report needs --out DIR")
    with record.locked():
        if args.action == "start":
            return _start(args, record)
        rec = record.read()
        if args.action == "claim":
            data = ro.claim(rec, _hosts(args))
        elif args.action == "mark" and args.batch:
            data = ro.mark_results(rec, _evidence(args.batch, "--batch"))
        elif args.action == "mark":
            if not args.host or not args.state:
                raise UsageError("mark needs --host and --state, or --batch")
            data = ro.mark(rec, args.host, args.state, _evidence(args.evidence, "--evidence"))
        elif args.action == "halt":
            data = ro.halt(rec, args.reason)
        else:
            return _summary(args, rec)
        record.write(rec)
    return Outcome(NAME, data=data, render=lambda c: c.print(printable(_line(data)),
                                                            markup=False))


def _line(data: dict[str, Any]) -> str:
    """One line for a person: what a claim, mark or halt did."""
    parts = []
    for key in ("start", "resume"):
        if data.get(key):
            parts.append(f"{key}: {', '.join(data[key])}")
    if data.get("host"):
        parts.append(f"{data['host']}: {data['state']}")
    for key in ("marked", "skip", "left"):
        if data.get(key):
            parts.append(f"{key}: " + ", ".join(f"{h} ({v})" for h, v in data[key].items()))
    if data.get("halted"):
        parts.append(f"halted: {data['halted']['reason']}")
    return "; ".join(parts) or "nothing to start"


def _start(args: argparse.Namespace, record: ro.RecordFile) -> Outcome:
    change = parse_change(args.change)
    hosts = _hosts(args)
    batches = ro.parse_batches(args.batches)
    budget = ro.Budget.parse(args.budget)
    fresh = ro.new_record(change, hosts, batches, budget)
    if record.exists():
        rec = record.read()
        if rec["id"] != fresh["id"]:
            raise RefusedError(f"{record.path} holds rollout {rec['id']} "
                               f"({' '.join([rec['change']['verb'], *rec['change']['args']])}"
                               f" over {len(rec['hosts'])} hosts), not this one: name "
                               "another record file")
        resumed = True
    else:
        rec, resumed = fresh, False
        record.write(rec)
    batches_of = ro.plan_batches(list(rec["hosts"]), rec["batches"])
    budget_now = ro.budget_state(rec)
    data = {"id": rec["id"], "resumed": resumed, "batches": batches_of, "budget": budget_now,
            "counts": ro.counts(rec)}
    return Outcome(NAME, data=data, render=lambda c: c.print(printable(
        f"rollout {rec['id']} {'resumed' if resumed else 'started'}: {len(rec['hosts'])} "
        f"hosts in {len(batches_of)} batches, budget limit {budget_now['limit']}"),
        markup=False))


def _summary(args: argparse.Namespace, rec: ro.Record) -> Outcome:
    data = report(rec)
    if args.action == "report":
        written = write_outputs(Path(args.out), {
            "rollout-report.json": json.dumps(data, indent=1).encode() + b"\n",
            "rollout-report.html": render_page(rec).encode()})
        data = {**data, "written": [str(p) for p in written]}
    code = status_code(rec)

    def _render(c: Console) -> None:
        n = data["counts"]
        c.print(printable(f"rollout {rec['id']}: " + ", ".join(
            f"{n[s]} {s}" for s in ro.STATES) + (f"; halted: {rec['halted']['reason']}"
                                                  if rec["halted"] else "")), markup=False)

    return Outcome(NAME, status={0: "ok", 1: "failed", 6: "partial"}[code], data=data,
                   exit_code=code, render=_render)
