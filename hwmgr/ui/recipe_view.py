"""The human views of `hwmgr recipe`: the recipes found, and what a check built or why not."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hwmgr.output import printable

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console


def render_list(console: Console, rows: list[dict[str, Any]]) -> None:
    """One line per recipe: driver, the dir it comes from, and shadowed/invalid marks."""
    if not rows:
        console.print("no recipes found", markup=False)
    for r in rows:
        mark = "" if r["used"] else "  (shadowed by an earlier dir)"
        if r["error"]:
            mark += f"  INVALID: {r['error']}"
        console.print(printable(f"{r['driver']:<16} {r['dir']}{mark}"), markup=False)


def render_check(console: Console, d: dict[str, Any]) -> None:
    """Per kernel: each module's file, version and vermagic, or the failure and the log's end."""
    p = printable
    console.print(p(f"{d['driver']} {d['version']} from {d['srpm']} (recipe {d['recipe']})"),
                  markup=False)
    for k in d["kernels"]:
        state = "built" if k["ok"] else "FAILED"
        console.print(p(f"  kernel {k['kernel']}: {state} ({k['seconds']} s)"), markup=False)
        for m in k["modules"]:
            console.print(p(f"    {m['file']}  version {m['version'] or '-'}  "
                            f"vermagic {m['vermagic'] or '-'}"), markup=False)
        fail = k.get("failure")
        if fail:
            console.print(p(f"    make line: {fail['make_line'] or '(not shown by dkms)'}"),
                          markup=False)
            console.print(p(f"    first error: {fail['first_error'] or '(none flagged)'}"),
                          markup=False)
            console.print(p(f"    last {len(fail['log_tail'])} lines of make.log "
                            f"(whole log: {fail['log'] or 'not kept'}):"), markup=False)
            for line in fail["log_tail"]:
                console.print(p(f"    | {line}"), markup=False, soft_wrap=True)
        elif k["problems"]:
            for prob in k["problems"]:
                console.print(p(f"    problem: {prob}"), markup=False)
