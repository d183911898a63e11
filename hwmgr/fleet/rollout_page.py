"""The rollout report: the record summarised as JSON, and its page (a Jinja2 template with
autoescape, `rollout.html.j2`), apart from the fleet check report's page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hwmgr.fleet.jinja import jinja2
from hwmgr.fleet.rollout import STATES, Change, Record, budget_state, counts

TEMPLATE = "rollout.html.j2"


def _gate(ev: object) -> dict[str, object] | None:
    """A gate's evidence as the page shows it: steps with a name, a pass and a detail."""
    if not isinstance(ev, dict):
        return None
    steps = [s for s in ev.get("steps") or [] if isinstance(s, dict)]
    return {"passed": bool(ev.get("passed")),
            "steps": [{"step": str(s.get("step")), "passed": bool(s.get("passed")),
                       "detail": str(s.get("detail"))} for s in steps]}


def report(rec: Record) -> dict[str, Any]:
    """The report's JSON: the rollout, its budget, counts, and each host's state and
    evidence (the record's own, so the report and the record never disagree)."""
    return {"format": "hwmgr-rollout-report", "version": 1, "id": rec["id"],
            "change": rec["change"], "batches": rec["batches"], "created": rec["created"],
            "halted": rec["halted"], "budget": budget_state(rec), "counts": counts(rec),
            "hosts": rec["hosts"]}


def change_text(change: Change) -> str:
    """The change as people read it: 'apply --layer settings', 'upgrade igb --to 5.18.7'."""
    return " ".join([change["verb"], *change["args"]])


def render_page(rec: Record) -> str:
    """The rollout page: every value autoescaped (host names, gate details are hostile)."""
    j2 = jinja2()  # only the page needs it; `rollout claim/mark` on every host do not
    env = j2.Environment(
        loader=j2.FileSystemLoader(str(Path(__file__).resolve().parent)),
        autoescape=True, undefined=j2.StrictUndefined)
    order = {"failed": 0, "rolled-back": 1, "in-flight": 2, "pending": 3, "done": 4}
    rows: list[dict[str, object]] = []
    for name, h in sorted(rec["hosts"].items(), key=lambda kv: (order[kv[1]["state"]], kv[0])):
        rb_raw = h.get("rollback")
        rb = rb_raw if isinstance(rb_raw, dict) else None
        rows.append({"name": name, "state": h["state"], "batch": h["batch"],
                     "resumed": h["resumed"], "finished": h["finished"],
                     "gate": _gate(h.get("gate")),
                     "rollback": None if rb is None else {
                         "action": str(rb.get("action") or "rolled back"),
                         "txn": rb.get("txn"), "gate": _gate(rb.get("gate"))}})
    b = rec["budget"]
    budget_text = (f"{b['percent']:g}% of {len(rec['hosts'])} hosts" if b.get("percent")
                   is not None else f"{b['failures']} failed gate(s)")
    page: str = env.get_template(TEMPLATE).render(
        rec=rec, rows=rows, states=STATES, counts=counts(rec), budget=budget_state(rec),
        budget_text=budget_text, change_text=change_text(rec["change"]))
    return page
