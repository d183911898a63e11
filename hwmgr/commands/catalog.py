"""Validate catalog files or show one driver's catalog entry (devices, versions, settings)."""

from __future__ import annotations

import argparse
import json
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, TypedDict

from hwmgr import safejson
from hwmgr.catalog.discover import DRIVERS_SUBDIR, dir_files, in_force_beneath
from hwmgr.catalog.entry import DriverEntry, Source
from hwmgr.catalog.issues import ceiling
from hwmgr.catalog.load import Catalog, load_catalog
from hwmgr.catalog.model import BAD_SEVERITIES, CONDITIONS, KnownIssue
from hwmgr.catalog.refs import evidence_text, inbox_policies
from hwmgr.catalog.stats import catalog_stats
from hwmgr.commands import catalog_trust
from hwmgr.config import Config
from hwmgr.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_REFUSED,
    BadInputError,
    HwmgrError,
    NotFoundError,
)
from hwmgr.output import Outcome, new_table, printable
from hwmgr.ui.context import Context
from hwmgr.ui.verbhelp import Example

if TYPE_CHECKING:  # rich is imported where a table is drawn (output.make_console)
    from rich.console import Console

NAME = "catalog"
NOTES = """\
layers: the base (the installed catalog, else the shipped one), then
        /etc/hwmgr/catalog.d/*.json in lexical order; --catalog F... replaces that list
validate: a layer (a file without catalog_version) is checked over the catalog in force
        (installed, else shipped, then catalog.d without it), where it will apply; with
        --alone, its own shape only; a whole catalog is checked as it stands"""
EXAMPLES = (
    Example("hwmgr catalog validate catalogs",
            "check files against the schema and the rules"),
    Example("hwmgr catalog show be2net", "devices, versions and settings of one driver"),
    Example("hwmgr catalog stats", "drivers, versions, distributions and evidence known"),
    Example("hwmgr catalog show 19a2:0710", "the entry that matches a PCI vendor:device"),
    Example("hwmgr catalog show ixgbe --json", "the entry as JSON (format 1)"),
    Example("hwmgr catalog show be2net --catalog my.json", "use another catalog file"),
    Example("hwmgr catalog show be2net --effective",
            "merged entry, each value with its layer file"),
    Example("hwmgr catalog show nosuch", "a driver the catalog does not know", EXIT_NOT_FOUND),
    Example("hwmgr catalog trust be2net 10.2.470.14 --file be2net-10.2.470.14-1.src.rpm",
            "record a vendor package's sha256 in catalog.d"),
    Example("hwmgr catalog trust be2net 10.2.470.14 --file be2net-10.2.470.14-1.src.rpm "
            "--key VENDOR.asc", "a signed one: check the signature with the vendor's key"),
    Example("hwmgr catalog update https://hwmgr.example.org/catalog.json",
            "signed update (needs catalog.json.asc)"),
    Example("hwmgr catalog rollback", "back to the previously installed catalog"),
    Example("hwmgr catalog sign catalog.json --key KEYID", "writes catalog.json.asc"),
)
EXIT_CODES = {
    EXIT_OK: "ok",
    EXIT_FAILED: "a download or gpg failed (update, sign)",
    EXIT_NOT_FOUND: "unknown driver or missing file",
    EXIT_BAD_INPUT: "invalid catalog or --key file (or not a regular file: a directory, "
                    "device or FIFO)",
    EXIT_REFUSED: "refused (signature, wrong key, downgrade, package mismatch; nothing "
                  "changed)",
}

STATUS_STYLE = {"recommended": "bold green", "known-good": "green", "known-bad": "bold red",
                "deprecated": "yellow", "baseline": "cyan"}
_PCI_ID = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{4})$")


def _sub_options() -> argparse.ArgumentParser:
    """Common options again for the sub-commands, with SUPPRESS defaults so that values given
    before the action ('hwmgr catalog --json show x') are not reset by the sub-parser."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print one JSON object (format 1)")
    p.add_argument("--catalog", action="append", metavar="FILE", default=argparse.SUPPRESS,
                   help="catalog file(s) to use instead of the bundled/installed ones")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show tracebacks on internal errors")
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Sub-commands: validate FILE..., show DRIVER."""
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    v = sub.add_parser("validate", parents=[_sub_options()],
                       help="validate catalog files: every error with its JSON path",
                       description="Validate catalog files against the schema and the rules.")
    v.add_argument("files", nargs="+", metavar="FILE",
                   help="catalog JSON file, or a catalog directory (its *.json, then "
                        "drivers/*.json); a layer is checked over the catalog in force")
    v.add_argument("--alone", action="store_true",
                   help="check a layer's own shape (as a layer, with no catalog beneath it)")
    st = sub.add_parser("stats", parents=[_sub_options()],
                        help="what the catalog in force knows: drivers, versions, "
                             "distributions, evidence",
                        description="Count the drivers, device rules and versions of the "
                                    "catalog in force (all layers), the distributions its "
                                    "verdicts cover and the sources its evidence cites.")
    st.set_defaults(driver=None)
    s = sub.add_parser("show", parents=[_sub_options()], help="show one driver's entry",
                       description="Show a driver's devices, versions, settings and notes.")
    s.add_argument("driver", metavar="DRIVER", help="driver name (be2net) or PCI ID (19a2:0710)")
    s.add_argument("--effective", action="store_true",
                   help="the merged entry, each value with the catalog layer it came from")
    catalog_trust.add_actions(sub, _sub_options)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    """Dispatch to validate or show."""
    if args.action == "validate":
        return _validate(args.files, args.alone, ctx.config)
    if args.action == "stats":
        return _stats(getattr(args, "catalog", None), ctx.config)
    if args.action == "show":
        return _show(args.driver, getattr(args, "catalog", None), ctx.config,
                     args.effective)
    return catalog_trust.run(args, ctx)


def _is_layer(path: str) -> bool:
    """A file without the catalog header (catalog_version): a layer over another catalog. One
    that cannot be read or parsed is checked as it stands, which names what is wrong."""
    try:
        doc = safejson.load(safejson.read_file(path, f"catalog file {path}"), path)
    except HwmgrError:
        return False
    return isinstance(doc, dict) and "catalog_version" not in doc


def _validate(files: list[str], alone: bool, config: Config) -> Outcome:
    expanded: list[str] = []
    for f in files:
        if Path(f).is_dir():
            found = dir_files(Path(f))
            if not found:
                raise NotFoundError(f"catalog directory {f} holds no catalog files "
                                    f"(*.json, {DRIVERS_SUBDIR}/*.json)")
            expanded += map(str, found)
        else:
            expanded.append(f)
    files = expanded
    for f in files:
        _regular_file(f)
    beneath: list[str] = []
    layered = all(_is_layer(f) for f in files)
    if layered and not alone:
        beneath = [str(p) for p in in_force_beneath(files, config)]
    check = Catalog.check_layers if layered and alone else Catalog.check_files
    errors, docs = check(beneath + files)
    docs = docs[len(beneath):]
    errors += [f"{f}: $.drivers: {e}" for f, doc in zip(files, docs) for e in _fragment_errors(
        Path(f), doc)]
    results = []
    for f, doc in zip(files, docs):
        mine = [e for e in errors if e.startswith(f"{Path(f)}: ")]
        results.append({"file": f, "ok": not mine, "errors": mine,
                        **(_summary(doc) if not mine and doc is not None else {})})
    data = {"files": results, "over": beneath}

    def render(console: Console) -> None:
        for r in results:
            if r["ok"]:
                console.print(f"{printable(r['file'])}: OK (catalog "
                              f"{printable(r.get('catalog_version'))}, "
                              f"{r.get('drivers')} drivers, {r.get('devices')} device rules, "
                              f"{r.get('versions')} versions)"
                              + (f" over the catalog in force ({len(beneath)} files)"
                                 if beneath else ""), markup=False, soft_wrap=True)

    if errors:
        return Outcome(NAME, status="error", data=data, errors=errors,
                       exit_code=EXIT_BAD_INPUT, render=render)
    return Outcome(NAME, data=data, render=render)


def _fragment_errors(path: Path, doc: object) -> list[str]:
    """A catalog directory's drivers/NAME.json holds the entry of driver NAME and no other,
    so two files can never define one driver."""
    if path.parent.name != DRIVERS_SUBDIR or not isinstance(doc, dict):
        return []
    names = sorted(doc.get("drivers") or {})
    if names != [path.stem]:
        return [f"a file of {DRIVERS_SUBDIR}/ holds exactly the driver it is named after "
                f"({path.stem!r}), not {', '.join(map(repr, names)) or 'none'}"]
    return []


def _regular_file(path: str) -> None:
    """Missing → exit 3; a directory, device or FIFO → exit 8 saying what it is (never read)."""
    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        raise NotFoundError(f"catalog file {printable(path)} does not exist") from None
    except OSError as exc:
        raise BadInputError(f"catalog file {printable(path)}: cannot read ({exc.strerror})"
                            ) from None
    if stat.S_ISREG(mode):
        return
    kind = ("a directory" if stat.S_ISDIR(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    raise BadInputError(f"catalog file {printable(path)} is {kind}, not a JSON file")


def _summary(doc: object) -> dict[str, object]:
    """Counts for the OK line, from the document validation parsed (a layer may be partial)."""
    if not isinstance(doc, dict):  # (a document without errors is an object)
        return {}
    # a layer's `"be2net": null` deletes that entry: it is not one of the file's drivers
    drivers = [d for d in (doc.get("drivers") or {}).values() if isinstance(d, dict)]
    return {"catalog_version": doc.get("catalog_version", "site layer"),
            "drivers": len(drivers),
            "devices": sum(len(d.get("devices") or []) for d in drivers),
            "versions": sum(len(d.get("versions") or {}) for d in drivers)}


def _stats(paths: list[str] | None, config: Config) -> Outcome:
    cat = load_catalog(paths, config=config)
    if not cat.files:
        raise NotFoundError("no catalog files found (use --catalog FILE or HWMGR_CATALOG_DIR)")
    stats = catalog_stats(cat.entries)
    data = {"catalog_version": cat.version, "layers": [str(f.path) for f in cat.files],
            **stats}

    def render(console: Console) -> None:
        from rich.table import Table  # rich: only drawing needs it

        console.print(f"catalog {printable(cat.version)}: {stats['drivers']} "
                      f"drivers, {stats['devices']} device rules, {stats['versions']} versions "
                      f"({', '.join(f'{n} {k}' for k, n in stats['versions_by_status'].items())})",
                      markup=False)
        console.print(f"evidence: {stats['distinct_urls']} distinct URLs; " + ", ".join(
            f"{n} {k}" for k, n in stats["evidence_by_kind"].items()), markup=False)
        console.print(
            f"known issues: {stats['known_issues']} ("
            + ", ".join(f"{n} {k}" for k, n in stats["known_issues_by_severity"].items())
            + "); sources: " + ", ".join(
                f"{n} {k}" for k, n in stats["known_issues_by_source_kind"].items())
            + f"; only under a condition: {sum(stats['known_issues_by_condition'].values())}"
            + "; the most each can say: " + ", ".join(
                f"{n} {k}" for k, n in stats["known_issues_by_ceiling"].items())
            + f"; firmware requirements: {stats['firmware_requirements']}; versions known "
            f"beyond baseline: {stats['versions_beyond_baseline']} "
            f"({stats['versions_beyond_baseline_share']:.1%})", markup=False)
        t = Table("driver", "devices", "versions", "in-tree", "issues", "firmware",
                  "distributions", box=None)
        for name, d in stats["per_driver"].items():
            t.add_row(printable(name), str(d["devices"]), str(d["versions"]),
                      str(d["in_tree_policies"]),
                      str(stats["known_issues_by_driver"].get(name, 0)),
                      str(stats["firmware_requirements_by_driver"].get(name, 0)),
                      printable(" ".join(d["distributions"])))
        console.print(t)

    return Outcome(NAME, data=data, render=render)


class _ShowRequired(TypedDict):
    driver: str
    catalog_file: str
    catalog_version: Optional[str]
    entry: DriverEntry
    layers: List[str]


class ShowData(_ShowRequired, total=False):
    """`catalog show`'s data: the entry, where it came from, and with --effective each
    merged value with its layer (Catalog.effective)."""

    effective: List[Dict[str, object]]


def _show(what: str, paths: list[str] | None, config: Config,
          effective: bool = False) -> Outcome:
    cat = load_catalog(paths, config=config)
    if not cat.files:
        raise NotFoundError("no catalog files found (use --catalog FILE or HWMGR_CATALOG_DIR)")
    name = what
    m = _PCI_ID.match(what)
    if m:
        hit = cat.match({"vendor_id": m.group(1).lower(), "device_id": m.group(2).lower()})
        if hit is None:
            raise NotFoundError(f"no catalog entry matches PCI device {what.lower()}")
        name = hit.driver
    entry = cat.entry(name)
    origin = cat.origin[name]
    version = cat.version  # the catalog's, not the layer file's (a driver file has none)
    data: ShowData = {"driver": name, "catalog_file": str(origin),
                      "catalog_version": version,
                      "entry": entry, "layers": [str(f.path) for f in cat.files]}
    if effective:
        data["effective"] = cat.effective(name)
        return Outcome(NAME, data=data, render=lambda c: _render_effective(c, data))
    return Outcome(NAME, data=data, render=lambda c: _render(c, data, entry))


def _render_effective(console: Console, data: ShowData) -> None:
    """One line per merged value: JSON path, value, the layer file it came from."""
    console.print("layers (later wins): " + printable(", ".join(data["layers"])),
                  markup=False, soft_wrap=True)
    for row in data["effective"]:
        console.print(f"{printable(row['path'])} = {printable(json.dumps(row['value']))}  "
                      f"<- {printable(row['file'])}", markup=False, soft_wrap=True)


def _render(console: Console, data: ShowData, e: DriverEntry) -> None:
    """Rich view of one entry: header, devices, versions, in-tree policy, settings, notes."""
    from rich.markup import escape as _escape  # rich: only drawing needs it

    def escape(value: object) -> str:  # catalog text is untrusted: no markup, no control chars
        return _escape(printable(value))

    console.print(f"[bold]{escape(data['driver'])}[/]  {escape(e['description'])}")
    console.print(f"[dim]scheme {escape(e['version_scheme'])} · catalog "
                  f"{escape(data['catalog_version'])} · "
                  f"{escape(data['catalog_file'])}[/]")
    if e.get("pci_drivers"):
        console.print(f"PCI function bound to: {escape(', '.join(e['pci_drivers']))}")
    t = new_table(console, title="devices", title_justify="left", show_edge=False,
                  pad_edge=False)
    for col in ("id", "subsystem", "class", "name"):
        t.add_column(col, overflow="fold")
    for d in e["devices"]:
        ident = f"{d.get('vendor', '*')}:{d.get('device', '*')}"
        sub = f"{d['subvendor']}:{d['subdevice']}" if "subvendor" in d else "-"
        t.add_row(escape(ident), escape(sub), escape(d.get("class", "-")), escape(d["name"]))
    console.print(t)
    if e["versions"]:
        console.print("[bold]versions[/]")
        for ver, ve in e["versions"].items():
            style = STATUS_STYLE.get(ve["status"], "default")
            scope = [", ".join(ve.get("applies_to", [])) or "all devices"]
            if ve.get("kernels"):
                scope.append("kernels " + ", ".join(ve["kernels"]))
            if ve.get("firmware"):
                scope.append(f"firmware >= {ve['firmware']['min']}")
            console.print(f"  [bold]{escape(ver)}[/]  [{style}]{escape(ve['status'])}[/]  "
                          f"({escape('; '.join(scope))})")
            console.print(f"      {escape(ve['reason'])}")
            if ve.get("source"):
                console.print(f"      source: {escape(_source(ve['source']))}")
            console.print(f"      [dim]evidence: {escape(evidence_text(ve['evidence']) or '')}[/]")
    else:
        console.print("[dim]versions: none listed[/]")
    for ib in inbox_policies(e):
        kern = f" on {', '.join(ib['kernels'])}" if ib.get("kernels") else ""
        style = STATUS_STYLE.get(ib["status"], "default")
        console.print(f"in-tree build{escape(kern)}: [{style}]{escape(ib['status'])}[/] — "
                      f"{escape(ib['reason'])}")
    _render_knowledge(console, e, escape)
    if e.get("settings"):
        console.print("[bold]settings[/]")
        for key, val in e["settings"].items():
            if key in ("evidence", "notes"):
                continue
            console.print(f"  {escape(key)}: {escape(_fmt(val))}")
        if e["settings"].get("evidence"):
            console.print(f"  [dim]evidence: "
                          f"{escape(evidence_text(e['settings']['evidence']) or '')}[/]")
    for adv in e.get("advice", []):
        console.print(f"advice: {escape(adv['setting'])} {escape(_fmt(adv['value']))} when "
                      f"{escape(adv['when'])}")
        console.print(f"  [dim]evidence: {escape(evidence_text(adv['evidence']) or '')}[/]")
    if e.get("throughput"):
        console.print(f"throughput: at least {e['throughput']['min_fraction_of_link']:.0%} "
                      "of the link speed")
    notes = list(e.get("notes", [])) + list(e.get("settings", {}).get("notes", []))
    for n in notes:
        console.print(f"[dim]note: {escape(n)}[/]")


def _render_knowledge(console: Console, e: DriverEntry,
                      escape: Callable[[object], str]) -> None:
    """Known issues (affected ranges, fixes, every source with what it states) and firmware
    requirements: the evidence a compact finding points to by id."""
    if e.get("known_issues"):
        console.print(f"[bold]known issues[/] ({len(e['known_issues'])})")
    for ki in e.get("known_issues", []):
        aff = ki["affected"]
        spans = [f"driver {r.get('introduced', '…')} up to {r.get('fixed', '(no fix)')}"
                 for r in aff.get("driver_versions", [])]
        spans += [f"{line} kernels from {r.get('introduced', 'the start')}; fixed in "
                  f"{', '.join(r['fixed']) or 'no release yet'}"
                  for line, r in aff.get("kernels", {}).items()]
        style = "red" if ki["severity"] in BAD_SEVERITIES else "yellow"
        console.print(f"  [bold]{escape(ki['id'])}[/]  [{style}]{escape(ki['severity'])}[/]  "
                      f"{escape(ki['symptom'])}")
        if ki.get("only_when"):
            console.print(f"      only when {escape(CONDITIONS.get(ki['only_when'], ''))}")
        if ki.get("kernel_releases"):
            console.print(f"      only on kernels {escape(', '.join(ki['kernel_releases']))}")
        console.print(f"      the most it says of a device: "
                      f"{escape(ceiling(KnownIssue.from_json('', ki)))}")
        console.print(f"      {escape('; '.join(spans))}"
                      + (f" ({escape(', '.join(ki['applies_to']))})"
                         if ki.get("applies_to") else ""))
        console.print(f"      [dim]evidence: {escape(evidence_text(ki['sources']) or '')}[/]")
    for fr in e.get("firmware_requirements", []):
        reach = ", ".join(f"{r.get('introduced', '…')} up to {r.get('fixed', 'now')}"
                          for r in fr.get("driver_versions", [])) or "every version"
        console.print(f"firmware >= {escape(fr['min'])} for driver {escape(reach)}"
                      + (f" ({escape(', '.join(fr['applies_to']))})"
                         if fr.get("applies_to") else "") + f"  [dim]{escape(fr['id'])}[/]")
        console.print(f"  [dim]evidence: {escape(evidence_text(fr['sources']) or '')}[/]")


def _source(src: Source | None) -> str:
    if not src:
        return "-"
    flags = []
    if src.get("verified") is False:
        flags.append("UNVERIFIED: upgrade refuses")
    if str(src.get("url", "")).startswith("http://"):
        flags.append("plain http")
    return f"{src['type']} {src['url']}" + (f" ({'; '.join(flags)})" if flags else "")


def _fmt(val: object) -> str:
    if isinstance(val, dict):
        return ", ".join(f"{k} {v}" for k, v in val.items())
    return str(val)
