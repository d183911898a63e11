#!/usr/bin/env python3
"""Propose kernel known issues for the catalog's drivers from Linux kernel CNA CVE records.

Reads CVE JSON 5 records (the kernel CNA's vulns repository `cve/published/<year>/CVE-*.json`;
CVEProject/cvelistV5 publishes the same records) and writes a proposal for
`catalog-src/merge.py` (format: docs/known-issues.md). Run from the checkout's top:

    .venv/bin/python catalog-src/kernel_cves.py /tmp/vulns/cve/published \
        --commit d9dda40c8f21126303839427ebc8652167302488 \
        --output catalog-src/proposed/kernel-cves.json

where /tmp/vulns is the mirror's tree at that commit, extracted with
`git -C <mirror>/repo archive master cve/published | tar -x -C /tmp/vulns`.

A record becomes one known issue per driver its `programFiles` touch (DRIVER_FILES), with
`kernels.upstream` = the first affected release and the fixed releases (each stable fix covers
its stream, the highest fix every later stream). The record's statement is the union of its
`affected` entries in release versions (git commit ranges are not read): the mainline entry
(defaultStatus affected) and the ranges a stable backport brought (defaultStatus unaffected).
The mapping is checked against that statement on every stream's first and late releases and
around every version the record names; records it cannot reproduce (a bug brought into
several older stable streams, disjoint stable-only ranges, ...) are skipped and counted.
Release candidates: an `X.Y-rcN` point (introduced or fix) is mapped to the `X.Y` release,
since every X.Y build contains it; exact for releases, the only builds the check judges. The
records at d9dda40c name no -rc version (the summary counts such records).
Severity: keyword rules (SEVERITY_RULES) on the title, then on the description. Symptom: the
title's commit subject reworded as the defect it removes (describe()).
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from hwmgr.catalog.model import SEVERITIES  # one owner: the catalog model

MIRROR = "https://github.com/thefossguy-ciq/kernel-security-vulns"
CVELIST = "https://github.com/CVEProject/cvelistV5"
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "proposed" / "kernel-cves.json"

# (driver, path prefix) of the in-tree sources; the first prefix a file starts with wins.
DRIVER_FILES: Tuple[Tuple[str, str], ...] = (
    ("ice", "drivers/net/ethernet/intel/ice/"),
    ("i40e", "drivers/net/ethernet/intel/i40e/"),
    ("ixgbe", "drivers/net/ethernet/intel/ixgbe/"),
    ("igb", "drivers/net/ethernet/intel/igb/"),
    ("e1000e", "drivers/net/ethernet/intel/e1000e/"),
    ("iavf", "drivers/net/ethernet/intel/iavf/"),
    ("ixgbevf", "drivers/net/ethernet/intel/ixgbevf/"),
    ("igbvf", "drivers/net/ethernet/intel/igbvf/"),
    ("mlx5_core", "drivers/net/ethernet/mellanox/mlx5/core/"),
    ("mlx4_en", "drivers/net/ethernet/mellanox/mlx4/en_"),
    ("mlx4_core", "drivers/net/ethernet/mellanox/mlx4/"),
    ("bnxt_en", "drivers/net/ethernet/broadcom/bnxt/"),
    ("bnx2x", "drivers/net/ethernet/broadcom/bnx2x/"),
    ("bnx2", "drivers/net/ethernet/broadcom/bnx2.c"),
    ("tg3", "drivers/net/ethernet/broadcom/tg3.c"),
    ("be2net", "drivers/net/ethernet/emulex/benet/"),
    ("ena", "drivers/net/ethernet/amazon/ena/"),
    ("gve", "drivers/net/ethernet/google/gve/"),
    ("qede", "drivers/net/ethernet/qlogic/qede/"),
    ("r8169", "drivers/net/ethernet/realtek/r8169"),
    ("virtio_net", "drivers/net/virtio_net.c"),
    ("vmxnet3", "drivers/net/vmxnet3/"),
    ("megaraid_sas", "drivers/scsi/megaraid/megaraid_sas"),
    ("mpt3sas", "drivers/scsi/mpt3sas/"),
    ("smartpqi", "drivers/scsi/smartpqi/"),
    ("hpsa", "drivers/scsi/hpsa"),
    ("aacraid", "drivers/scsi/aacraid/"),
    ("ahci", "drivers/ata/ahci.c"),
    ("ahci", "drivers/ata/libahci.c"),
    ("nvme", "drivers/nvme/host/"),
)

# Severity keyword rules, tried in order on the title, then (when no rule matched the title)
# the "any" rules on the description's body; the first match decides, no match is "security".
# Cosmetic rules judge the title only: a WARNING splat quoted in a description comes with
# defects of every kind. (severity, what it stands for, scope, regular expression;
# case-insensitive unless inside (?-i:...).)
SEVERITY_RULES: Tuple[Tuple[str, str, str, str], ...] = (
    ("link-down", "TX/RX hang or stall", "any", r"\b[tr]x[ _-]?(queue )?(hang|stall)"),
    ("crash", "use-after-free", "any", r"use[- ]after[- ]free|\buaf\b"),
    ("crash", "NULL or invalid pointer dereference", "any",
     r"\bnull[- ](pointer|ptr)\b|null-ptr-deref|\bnull (deref|dereference)\b|"
     r"pointer deref|dereferenc"),
    ("crash", "out-of-bounds access", "any",
     r"out[- ]of[- ]bounds?|\boob\b|out[- ]of[- ]range (access|read|write)|"
     r"invalid (memory )?access|off[- ]by[- ]one"),
    ("crash", "double free", "any", r"double[- ]free"),
    ("crash", "deadlock", "any", r"dead[- ]?lock"),
    ("crash", "hang", "any", r"\bhang(s|ing)?\b|\bhung\b"),
    ("crash", "soft lockup", "any", r"soft[- ]lockup"),
    ("crash", "panic", "any", r"\bpanic(?! handler)"),
    ("crash", "BUG", "any", r"(?-i:\bBUG(_ON)?\b)"),
    ("crash", "crash", "any", r"\bcrash"),
    ("crash", "kernel oops", "any", r"\boops\b"),
    ("crash", "general protection fault", "any", r"general protection fault"),
    ("crash", "overflow or underflow", "any", r"overflow|underflow"),
    ("crash", "memory corruption", "any",
     r"memory corruption|corrupt(s|ing|ed)? (the )?(kernel )?memory"),
    ("cosmetic", "wrong statistics", "title",
     r"\b(wrong|incorrect|bogus|inaccurate)\b.{0,30}\b(stat(s|istics)?|counters?)\b|"
     r"\b(stat(s|istics)?|counters?)( report)? corruption"),
    ("data-loss", "data corruption", "any", r"\bcorrupt"),
    ("link-down", "link down or flapping", "any",
     r"\blink (is |goes )?(down|flap)|link[- ]flapping"),
    ("link-down", "TX timeout", "any", r"\btx[ _-]?timeout|transmit (queue )?timeout"),
    ("link-down", "no traffic", "any", r"\bno traffic\b"),
    ("security", "information leak", "any",
     r"\b(info(rmation)?|stack|uninit\w*|kernel memory) leak|information .{0,20}leak|"
     r"leak(s|ing|ed)? (of )?(uninit\w*|kernel (memory|stack|pointers?|address)|sensitive)|"
     r"leak(s|ing|ed)? (in)?to (the )?(vm|guest|user|wire|network)"),
    ("performance", "memory, refcount or resource leak", "any", r"leak"),
    ("cosmetic", "warning only", "title", r"\bwarn(ing)?s?\b|\bWARN(_ON(_ONCE)?)?\b"),
    ("cosmetic", "log message", "title", r"\blog (message|spam|noise)|\b(error|log) messages?\b"),
    ("cosmetic", "typo", "title", r"\btypo"),
)
_RULES = tuple((sev, label, scope, re.compile(rx, re.I))
               for sev, label, scope, rx in SEVERITY_RULES)


SKIP_REJECTED = "rejected record"
SKIP_NO_RANGES = "no version ranges (git commits only)"
SKIP_NO_DATA = "affected by default, no release version given"
SKIP_SEVERAL_INTRODUCED = "several introduced points (also brought into older stable streams)"
SKIP_DISJOINT = "several disjoint affected ranges (stable-only regressions)"
SKIP_ODD_ENTRY = "unrecognised version entry"
SKIP_MISMATCH = "range model does not reproduce the record"

_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\.(\d+))?(?:-rc(\d+))?$")
_RELEASE = 10 ** 6  # the rc slot of a release: after every -rcN
Key = Tuple[int, int, int, int, int]


class Unfit(Exception):
    """A record the kernels range model cannot state; `reason` is one of the SKIP_* texts."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


# ------------------------------------------------------------------ versions
@functools.cache
def vkey(version: str) -> Key:
    """Order key of a kernel version `X[.Y[.Z[.W]]][-rcN]` (6.9 == 6.9.0; -rcN before X.Y)."""
    m = _VERSION.match(version)
    if not m:
        raise Unfit(SKIP_ODD_ENTRY, f"version {version!r}")
    nums = [int(g or 0) for g in m.groups()[:4]]
    rc = int(m.group(5)) if m.group(5) else _RELEASE
    return nums[0], nums[1], nums[2], nums[3], rc


def release_of(version: str) -> str:
    """The release an `X.Y-rcN` point belongs to (`6.9` of `6.9-rc1`); others unchanged."""
    return version.split("-rc", 1)[0]


def show(key: Key) -> str:
    """The release a key stands for, as `6.9`, `6.1.84` or `2.6.32.5`."""
    nums = list(key[:4])
    while len(nums) > 2 and nums[-1] == 0:
        nums.pop()
    return ".".join(str(n) for n in nums) + (f"-rc{key[4]}" if key[4] != _RELEASE else "")


def stream(key: Key) -> Tuple[int, int]:
    """The stream a fix covers: major.minor (`6.1` of 6.1.84)."""
    return key[0], key[1]


def _upto(key: Key, bound: str) -> bool:
    """Whether `key` <= `bound`, where the bound may end in a wildcard (`5.4.*`, `*`)."""
    if bound == "*":
        return True
    if bound.endswith(".*"):
        prefix = tuple(int(p) for p in bound[:-2].split("."))
        return key[:len(prefix)] <= prefix
    return key <= vkey(bound)


# ------------------------------------------------------------------ record statement
def entry_affected(entry: Dict[str, Any], key: Key) -> bool:
    """What one CVE 5 `affected` entry says of a release: the statuses of its ranges and
    points covering it (an unaffected one wins), else the entry's defaultStatus."""
    statuses = set()
    for v in entry.get("versions", []):
        low = vkey(v["version"])
        if "lessThan" in v:
            inside = low <= key < vkey(v["lessThan"])
        elif "lessThanOrEqual" in v:
            inside = low <= key and _upto(key, v["lessThanOrEqual"])
        else:
            inside = key == low
        if inside:
            statuses.add(v["status"])
    if statuses:
        return "unaffected" not in statuses
    return entry.get("defaultStatus") == "affected"


def record_affected(entries: Sequence[Dict[str, Any]], key: Key) -> bool:
    """What a record says of a release: affected when one of its entries says so (the CNA's
    cpeApplicability is the union of the entries' ranges too)."""
    return any(entry_affected(e, key) for e in entries)


def model_affected(introduced: Optional[str], fixed: Sequence[str], key: Key) -> bool:
    """The catalog's semantics (docs/known-issues.md): affected from `introduced` on, except
    where a fix covers the version: its own stream from the fix on, the highest every later
    stream too."""
    if introduced is not None and key < vkey(introduced):
        return False
    keys = [vkey(f) for f in fixed]
    if any(stream(f) == stream(key) and key >= f for f in keys):
        return False
    return not (keys and key >= max(keys))


def probe_points(versions: Iterable[str]) -> List[Key]:
    """Releases to judge a mapping on: X.Y.0 and a late X.Y.9999 of every stream from 2.6 to
    one past the highest named, 2.6.N releases, and each named point with its neighbours."""
    named = [vkey(v) for v in versions if v not in ("*", "0") and not v.endswith(".*")]
    top = max((k[0] for k in named), default=6) + 1
    points = set()
    for major in range(2, top + 1):
        for minor in range(0, 41):
            points.add((major, minor, 0, 0, _RELEASE))
            points.add((major, minor, 9999, 0, _RELEASE))
    for sub in range(0, 40):
        points.add((2, 6, sub, 0, _RELEASE))
        points.add((2, 6, sub, 9999, _RELEASE))
    for k in named:
        depth = 3 if k[3] else 2
        for delta in (-1, 0, 1):
            p = list(k[:4]) + [_RELEASE]
            p[depth] = max(0, p[depth] + delta)
            points.add((p[0], p[1], p[2], p[3], p[4]))
    return sorted(points)


def _entry_versions(entry: Dict[str, Any]) -> Iterator[str]:
    for v in entry.get("versions", []):
        yield v["version"]
        for bound in ("lessThan", "lessThanOrEqual"):
            if bound in v:
                yield v[bound]


def mismatch(entries: Sequence[Dict[str, Any]], introduced: Optional[str],
             fixed: Sequence[str]) -> Optional[str]:
    """The first probe release where the model and the record disagree (None: they agree)."""
    named = [x for e in entries for x in _entry_versions(e)] + list(fixed)
    named += [introduced] if introduced else []
    for key in probe_points(named):
        if record_affected(entries, key) != model_affected(introduced, fixed, key):
            return show(key)
    return None


# ------------------------------------------------------------------ record -> range
def release_entries(record: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The record's `affected` entries reduced to their release-version items (git commit
    ranges dropped); an entry left with no item counts only when affected by default."""
    out = []
    for entry in record["containers"]["cna"].get("affected", []):
        items = [v for v in entry.get("versions", []) if v.get("versionType") != "git"]
        if items or entry.get("defaultStatus") == "affected":
            out.append({"defaultStatus": entry.get("defaultStatus"), "versions": items})
    return out


def _is_fix(item: Dict[str, Any]) -> bool:
    bound = str(item.get("lessThanOrEqual", ""))
    return item["status"] == "unaffected" and (bound == "*" or bound.endswith(".*"))


def candidate(entries: Sequence[Dict[str, Any]]) -> Tuple[List[str], List[str]]:
    """(introduced points, fixes) the entries name: the affected points and range starts;
    the stream and mainline fixes, and the end of a range that closes inside its stream."""
    introduced: List[str] = []
    fixed: List[str] = []
    for entry in entries:
        default_affected = entry["defaultStatus"] == "affected"
        for v in entry["versions"]:
            bounded = {"lessThan", "lessThanOrEqual"} & set(v)
            if v["status"] == "affected" and not bounded and default_affected:
                introduced.append(v["version"])
            elif v["status"] == "affected" and "lessThan" in v and not default_affected:
                introduced.append(v["version"])
                if stream(vkey(v["lessThan"])) == stream(vkey(v["version"])):
                    fixed.append(v["lessThan"])
            elif _is_fix(v) and default_affected:
                fixed.append(v["version"])
            elif not (v["status"] == "unaffected" and v["version"] == "0" and
                      "lessThan" in v and default_affected):
                raise Unfit(SKIP_ODD_ENTRY, json.dumps(v, sort_keys=True))
    return introduced, fixed


def kernel_range(record: Dict[str, Any]) -> Tuple[Optional[str], List[str]]:
    """(introduced, sorted fixes) of a record, checked against every statement the record
    makes in release versions; Unfit when the model cannot state it."""
    if record.get("cveMetadata", {}).get("state") != "PUBLISHED":
        raise Unfit(SKIP_REJECTED)
    entries = release_entries(record)
    if not entries:
        raise Unfit(SKIP_NO_RANGES)
    if any(e["defaultStatus"] == "affected" and not e["versions"] for e in entries):
        raise Unfit(SKIP_NO_DATA)
    points, fixed = candidate(entries)
    # An -rc point stands for its release: the check below judges releases only.
    starts = sorted({release_of(p) for p in points if p != "0"}, key=vkey)
    first = starts[0] if starts else None
    fixes = sorted({release_of(f) for f in fixed}, key=vkey)
    where = mismatch(entries, first, fixes)
    if where is None:
        return first, fixes
    if len(starts) > 1:
        mainline = any(e["defaultStatus"] == "affected" for e in entries)
        raise Unfit(SKIP_SEVERAL_INTRODUCED if mainline else SKIP_DISJOINT,
                    f"{', '.join(starts)}; disagrees at {where}")
    raise Unfit(SKIP_MISMATCH, f"disagrees at {where}")


# ------------------------------------------------------------------ words
def classify(title: str, description: str = "") -> Tuple[str, str]:
    """(severity, the rule's label) from the title, else the description's body."""
    for text, scopes in ((title, ("title", "any")), (description, ("any",))):
        for severity, label, scope, rx in _RULES:
            if scope in scopes and rx.search(text):
                return severity, label
    return "security", "no keyword rule matched"


def _description(record: Dict[str, Any]) -> str:
    """The English description without the CNA's boilerplate first line and the title."""
    cna = record["containers"]["cna"]
    texts = [d.get("value", "") for d in cna.get("descriptions", []) if d.get("lang") == "en"]
    text = texts[0] if texts else ""
    text = re.sub(r"^In the Linux kernel, the following vulnerability has been resolved:\s*",
                  "", text)
    title = cna.get("title", "")
    if title and text.startswith(title):
        text = text[len(title):]
    return text


_PREFIX = re.compile(r"^[A-Za-z0-9_./{},+\-]+(?: [A-Za-z0-9_./+\-]+)?\s?:\s+")
_SUBAREA = re.compile(r"^(?:[A-Za-z0-9_\-]+, )+")
_DEFECT_WORDS = re.compile(
    r"leak|crash|dereference|deref|overflow|underflow|use-after-free|\buaf\b|race|deadlock|"
    r"lockup|hang|out-of-bounds|\boob\b|double free|corrupt|warning|error|bug|panic|oops|"
    r"failure|timeout|mismatch|wrong|incorrect|invalid|missing|uninit|stall|splat|issue|double|"
    r"hung|assert|unbalanced|imbalance|potential|possible", re.I)
# imperative verb of a commit subject -> template of the defect it removes
_VERB_FORMS: Dict[str, str] = {
    "fix": "{fixobj}", "fixes": "{fixobj}", "correct": "{fixobj}",
    "avoid": "possible {obj}", "prevent": "possible {obj}", "prohibit": "allowed {obj}",
    "block": "allowed {obj}", "forbid": "allowed {obj}", "disallow": "allowed {obj}",
    "add": "missing {bare}", "implement": "missing {bare}",
    "check": "unchecked {obj}", "validate": "unvalidated {obj}", "verify": "unverified {obj}",
    "handle": "unhandled {obj}", "ensure": "does not ensure {obj}",
    "free": "missing free of {obj}", "release": "missing release of {obj}",
    "clean": "missing cleanup of {up}", "cleanup": "missing cleanup of {obj}",
    "destroy": "missing destroy of {obj}", "unregister": "missing unregister of {obj}",
    "remove": "missing removal of {obj}", "delete": "missing deletion of {obj}",
    "revert": "carries the faulty change {obj}",
}


def _third_person(verb: str) -> str:
    if re.search(r"(s|sh|ch|x|z)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def describe(title: str) -> str:
    """The defect a commit subject removes, reworded: `ice: Fix memory leak in X` gives
    `memory leak in X`, `Don't call X` `wrongly calls X`, `Add X check` `missing X check`."""
    rest = title.strip().rstrip(".")
    for _ in range(4):
        rest = _PREFIX.sub("", rest, count=1)
    rest = _SUBAREA.sub("", rest)
    words = rest.split(" ", 1)
    verb, obj = words[0].lower(), (words[1] if len(words) > 1 else "")
    if not obj:
        return f"defect in {rest}" if rest else "defect"
    if verb in ("don't", "never") or (verb == "do" and obj.lower().startswith("not ")):
        inner = re.sub(r"^not ", "", obj, flags=re.I).split(" ", 1)
        return " ".join(["wrongly", _third_person(inner[0].lower())] + inner[1:])
    if verb not in _VERB_FORMS:
        return f"did not {verb} {obj}"
    hedged = re.sub(r"^(a |an |the |some )", "", obj, flags=re.I)
    hedged = re.sub(r"^(potential|possible) ", "possible ", hedged, flags=re.I)
    plain = re.sub(r"^possible ", "", hedged)
    if verb == "check":
        plain = re.sub(r"^(for|of|that|whether|if) ", "", plain)
    return _VERB_FORMS[verb].format(
        obj=plain, bare=re.sub(r"^missing ", "", plain, flags=re.I),
        up=re.sub(r"^up ", "", plain),
        fixobj=hedged if _DEFECT_WORDS.search(hedged) else f"faulty {hedged}")


def symptom(driver: str, title: str) -> str:
    """One line of at most 160 characters: `<driver>: <defect>` (the severity is a field of
    its own, and every verdict and finding prints it beside the symptom)."""
    text = " ".join(f"{driver}: {describe(title)}".split())
    return text if len(text) <= 160 else text[:157].rstrip() + "..."


# ------------------------------------------------------------------ record -> issues
def drivers_of(record: Dict[str, Any]) -> List[str]:
    """The catalog drivers whose sources the record's `programFiles` name."""
    found = set()
    for entry in record.get("containers", {}).get("cna", {}).get("affected", []):
        for path in entry.get("programFiles", []):
            for driver, prefix in DRIVER_FILES:
                if path.startswith(prefix):
                    found.add(driver)
                    break
    return sorted(found)


def observed(introduced: Optional[str], fixed: Sequence[str]) -> str:
    """What the record states, generated: `affected from 5.4; fixed in 5.4.274, 6.9`."""
    since = f"affected from {introduced}" if introduced else "affected in every release"
    return f"{since}; " + (f"fixed in {', '.join(fixed)}" if fixed else "no fix listed")


def convert(record: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The known issue a record gives each catalog driver it touches ({} for none); Unfit
    when its ranges do not fit the catalog's kernels model."""
    drivers = drivers_of(record)
    if not drivers:
        return {}
    introduced, fixed = kernel_range(record)
    cna = record["containers"]["cna"]
    cve = record["cveMetadata"]["cveId"]
    title = cna.get("title", "")
    severity, _label = classify(title, _description(record))
    line: Dict[str, Any] = {"fixed": list(fixed)}
    if introduced:
        line = {"introduced": introduced, **line}
    out = {}
    for driver in drivers:
        out[driver] = {
            "id": cve,
            "severity": severity,
            "symptom": symptom(driver, title),
            "affected": {"kernels": {"upstream": dict(line)}},
            "sources": [{
                "title": f"{cve} (Linux kernel CNA record)",
                "url": f"https://www.cve.org/CVERecord?id={cve}",
                "kind": "cve",
                "observed": observed(introduced, fixed),
            }],
        }
    return out


def _id_key(cve: str) -> Tuple[int, int, str]:
    m = re.match(r"^CVE-(\d+)-(\d+)$", cve)
    return (int(m.group(1)), int(m.group(2)), cve) if m else (0, 0, cve)


def record_files(root: Path) -> List[Path]:
    """Every `CVE-*.json` under `root`, in a stable order."""
    return sorted(root.rglob("CVE-*.json"), key=lambda p: _id_key(p.stem))


def build(root: Path, commit: Optional[str] = None, mirror: str = MIRROR,
          branch: str = "master") -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(proposal, tallies) for every record under `root`."""
    issues: Dict[str, List[Dict[str, Any]]] = collections.defaultdict(list)
    skipped: collections.Counter[str] = collections.Counter()
    severities: collections.Counter[str] = collections.Counter()
    matched = rc = 0
    for path in record_files(root):
        record = json.loads(path.read_text(encoding="utf-8"))
        if not drivers_of(record):
            continue
        matched += 1
        try:
            found = convert(record)
        except Unfit as why:
            skipped[why.reason] += 1
            continue
        rc += any("-rc" in v for e in release_entries(record) for v in _entry_versions(e))
        severities[next(iter(found.values()))["severity"]] += 1
        for driver, issue in found.items():
            issues[driver].append(issue)
    at = f"branch {branch} at commit {commit}" if commit else \
        f"branch {branch} (commit not recorded)"
    source = (f"Linux kernel CNA CVE records (CVE JSON 5), {mirror} {at}, "
              f"cve/published/; the same records are published in {CVELIST} "
              f"(cves/<year>/<NNxxx>/). Generated by catalog-src/kernel_cves.py.")
    drivers = {d: {"known_issues": sorted(issues[d], key=lambda i: _id_key(i["id"])),
                   "firmware_requirements": []}
               for d in sorted(issues)}
    tallies = {"records matched": matched, "converted": matched - sum(skipped.values()),
               "records naming -rc points": rc, "skipped": dict(skipped),
               "per severity": {s: severities[s] for s in SEVERITIES},
               "per driver": {d: len(v["known_issues"]) for d, v in drivers.items()}}
    return {"source": source, "drivers": drivers}, tallies


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Command line: records directory in, proposal out, tallies on stdout."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("records", type=Path, help="directory of CVE-*.json (searched recursively)")
    ap.add_argument("--commit", help="commit of the vulns repository read (provenance)")
    ap.add_argument("--mirror", default=MIRROR, help="repository the records come from")
    ap.add_argument("--branch", default="master", help="its branch read (provenance)")
    ap.add_argument("--output", "-o", type=Path, default=DEFAULT_OUTPUT)
    args = ap.parse_args(argv)
    if not args.records.is_dir():
        ap.error(f"{args.records}: not a directory")
    proposal, tallies = build(args.records, args.commit, args.mirror, args.branch)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(proposal, indent=1, ensure_ascii=False) + "\n",
                           encoding="utf-8")
    for name, value in tallies.items():
        if isinstance(value, dict):
            print(f"{name}:")
            for k, n in value.items():
                print(f"  {k}: {n}")
        else:
            print(f"{name}: {value}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
