#!/usr/bin/env python3
"""Propose `el7`..`el10` kernel lines for the catalog's CVE known issues from RHEL changelogs.

Reads the `%changelog` of RHEL's kernel as AlmaLinux imports it (AlmaLinux rebuilds RHEL's
kernel unchanged, with the same build numbers): the git import of its source RPMs,
https://github.com/mkuron/almalinux-kernel, one commit per src.rpm (subject: its
vault.almalinux.org URL), one branch per minor release. Run from the checkout's top:

    .venv/bin/python catalog-src/rhel_kernel_changelog.py \
        $MIRRORS/mkuron+almalinux-kernel/repo \
        --branches 9.0 9.1 9.2 9.3 9.4 9.5 9.6 10.0 \
        --output catalog-src/proposed/rhel-kernels.json

(the repository is the bare git dir of that snapshot; `git` must be on PATH).

RHEL 7 and 8 the same way from CentOS's import of RHEL's kernel src.rpm (git.centos.org's
rpms/kernel, mirrored at https://github.com/MafSam/centos: branches c7 and c8, one "import
kernel-<version>" commit per src.rpm, the spec at `SPECS/kernel.spec`):

    .venv/bin/python catalog-src/rhel_kernel_changelog.py \
        $MIRRORS/MafSam+centos/repo --branches c7 c8 --spec SPECS/kernel.spec \
        --repo-url https://github.com/MafSam/centos \
        --output catalog-src/proposed/rhel-kernels-el7-el8.json

OpenELA's import (https://github.com/openela-main/kernel, branches el8, el-8.8, el-8.9) and
CIQ's (ciq-rocky-lts/kernel) have the same layout. A branch there holds every minor release,
so a z-stream's minor release is also taken from its header's `_N` suffix
(`[4.18.0-147.8.1.el8_1]`). RHEL 7's builds carry none (`3.10.0-1160.119.1.el7`, as hosts
print them too): its z-streams are proposed as written, their stream the build number.

What is read: every commit of every branch named, oldest first; in each, `almalinux/kernel.spec`
(files of 4 MiB and more are absent from the snapshot: such commits are listed in the
summary) and the `redhat/kernel.changelog-N.M` files, where Red Hat moves the changelog of the
earlier minor releases (the spec of 9.5 starts at build 428; the 9.3 and 9.4 commits have no
spec, their main-line builds 285..427 are only in those files). `--spec-only` skips them.
Only Red Hat's build headers count (`* <date> <name> <...@redhat.com> [5.14.0-570.32.1.el9_6]`):
AlmaLinux's own (`... - 5.14.0-570.32.1`, debranding) name no CVE, and some AlmaLinux
builds are not RHEL's (AlmaLinux 9.2's first 284.25.1 and 10.0's 55.18.1 and later carry
entries under an oracle.com header, "Bump internal version to 55.18.1"); the catalog CVEs
those name are listed under `not_red_hat`, not used.

A build is main line when its release is the build number alone (`5.14.0-427.el9`, 9.4 GA,
and every development build), z-stream when the number is followed by a dotted release
(`427.13.1`); a z-stream's stream is its build number, the stream's minor release the branch
whose tip is a build of that stream (427 -> 9.4), and the proposed string carries it
(`5.14.0-427.13.1.el9_4`, also for pre-GA headers written `.el9`). Dotted builds of a number
no branch releases (5.14.0-1.6.1.el9, 2021 pre-GA) and `5.14-N` headers are skipped (counted).

Per CVE id that a catalog driver (catalogs/drivers/*.json) has as a known-issue id: the first
main-line build whose entry names it and, per stream, the first z-stream build naming it;
`fixed` is that list in RPM order, `urls` the changelog file at the first commit that shows
each (same order), `evidence` one sentence per fix. An entry that starts with `Revert`
counts like any other (the kernel CNA fixes some CVEs by a revert); `reverts` lists the
catalog CVEs so named, for review. `streams` gives, per line and stream, the last
z-stream build whose Red Hat changelog was read (for 9.3 and 9.4 below the branch tips,
whose specs are absent); `branch_tips` the build of each branch's last commit.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

REPO_URL = "https://github.com/mkuron/almalinux-kernel"
SPEC = "almalinux/kernel.spec"
AUX_RE = re.compile(r"^redhat/kernel\.changelog-(\d+)\.(\d+)$")
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "proposed" / "rhel-kernels.json"
DEFAULT_BRANCHES = ("9.0", "9.1", "9.2", "9.3", "9.4", "9.5", "9.6", "10.0")

# kernel base per RHEL major: the only builds a line holds
BASES: Dict[str, str] = {"el7": "3.10.0", "el8": "4.18.0", "el9": "5.14.0", "el10": "6.12.0"}
# lines whose z-stream builds carry no `_N` minor suffix (RHEL 7: `3.10.0-1160.119.1.el7`)
NO_MINOR = frozenset({"el7"})
# the form hwmgr validates a line's `fixed` entries in
FIXED_RE: Dict[str, re.Pattern[str]] = {
    line: re.compile(rf"^{re.escape(base)}-\d+(?:\.\d+)*\.{line}(?:_\d+)?$")
    for line, base in BASES.items()}
CVE_RE = re.compile(r"CVE-\d{4}-\d{4,}")
# RHEL 7's kernel maintainer signed the 7.3 z-stream headers (3.10.0-514.1.1 .. 514.26.2)
# with this address, in Red Hat's own src.rpm
RED_HAT_OTHER_MAILS = ("fhrbata@hrbata.com",)
# RHEL 7/8 entries start with the tree area: `- [net] Bluetooth: L2CAP: Fix ...`
AREA_RE = re.compile(r"^\[[\w/.-]+\] ")
# Red Hat's header: `* Mon Jul 28 2025 Name <mail> [5.14.0-570.32.1.el9_6]`
HEADER_RE = re.compile(r"^\* .*<(?P<mail>[^>]*)>.*\[(?P<build>[^\]\s]+)\]\s*$")
BUILD_RE = re.compile(r"^(?P<base>\d+\.\d+\.\d+)-(?P<num>\d+)(?P<z>(?:\.\d+)*)"
                      r"\.el(?P<major>\d+)(?:_(?P<minor>\d+))?$")
# a commit subject naming its src.rpm: AlmaLinux's vault URL, or "import kernel-<version>"
SRPM_RE = re.compile(r"(?:/|^import )kernel-(?P<version>\d+\.\d+\.\d+-[\w.]+?)(?:\.src\.rpm)?$")

Pair = Tuple[str, str]  # (build as in the header, CVE id)


class Entry:
    """One changelog entry (`- subject (author) [ticket] {CVE-...}`) under a build header."""

    __slots__ = ("build", "text", "mail")

    def __init__(self, build: str, text: str, mail: str = "") -> None:
        self.build = build
        self.text = text
        self.mail = mail

    @property
    def red_hat(self) -> bool:
        """Written under a Red Hat header (not AlmaLinux's or another rebuilder's)."""
        mail = self.mail.lower()
        return mail.endswith("@redhat.com") or mail in RED_HAT_OTHER_MAILS

    @property
    def cves(self) -> List[str]:
        return sorted(set(CVE_RE.findall(self.text)))

    @property
    def is_revert(self) -> bool:
        return self.text.lstrip().lower().startswith("revert")

    @property
    def prefix(self) -> str:
        """The subject's component (`ice` of `ice: Fix ...`), else its first words."""
        subject = AREA_RE.sub("", self.text.split(" (", 1)[0])
        parts = subject.split(": ")
        if len(parts) > 1:
            return ": ".join(p.strip() for p in parts[:-1])
        return " ".join(subject.split()[:4])


def parse_changelog(text: str) -> List[Entry]:
    """Entries under Red Hat's build headers of a `%changelog` (a spec's or a
    redhat/kernel.changelog-N.M file); continuation lines join their entry."""
    if "\n%changelog" in text:
        text = text.split("\n%changelog", 1)[1]
    entries: List[Entry] = []
    build: Optional[str] = None
    mail = ""
    current: Optional[List[str]] = None

    def flush() -> None:
        if build is not None and current is not None:
            entries.append(Entry(build, " ".join(current), mail))

    for line in text.splitlines():
        if line.startswith("* "):
            flush()
            current = None
            m = HEADER_RE.match(line)
            build = m.group("build") if m else None
            mail = m.group("mail") if m else ""
        elif line.startswith("- "):
            flush()
            current = [line[2:].strip()]
        elif current is not None and line[:1] in (" ", "\t") and line.strip():
            current.append(line.strip())
        else:
            flush()
            current = None
    flush()
    return entries


class Build:
    """A build header's version, placed on its line."""

    def __init__(self, base: str, num: int, z: Tuple[int, ...], major: int,
                 minor: Optional[int]) -> None:
        self.base, self.num, self.z, self.major, self.minor = base, num, z, major, minor

    @classmethod
    def parse(cls, text: str) -> Optional[Build]:
        m = BUILD_RE.match(text)
        if not m:
            return None
        z = tuple(int(p) for p in m.group("z").split(".") if p)
        minor = int(m.group("minor")) if m.group("minor") is not None else None
        return cls(m.group("base"), int(m.group("num")), z, int(m.group("major")), minor)

    @property
    def line(self) -> str:
        return f"el{self.major}"

    @property
    def mainline(self) -> bool:
        return not self.z

    def key(self) -> Tuple[int, ...]:
        return (self.num,) + self.z

    def version(self, stream_minor: Dict[int, int]) -> str:
        """hwmgr's string: main line without `_N`, z-stream with its stream's minor."""
        rel = ".".join(str(p) for p in self.key())
        if self.mainline or self.line in NO_MINOR:
            return f"{self.base}-{rel}.el{self.major}"
        return f"{self.base}-{rel}.el{self.major}_{stream_minor[self.num]}"


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True,
                          stdout=subprocess.PIPE).stdout


def branch_commits(repo: Path, branch: str) -> List[Tuple[str, str]]:
    """(commit, subject) oldest first."""
    out = git(repo, "log", "--reverse", "--format=%H %s", branch).decode()
    return [(ln.split(" ", 1)[0], ln.split(" ", 1)[1] if " " in ln else "")
            for ln in out.splitlines() if ln.strip()]


def changelog_files(repo: Path, commit: str, spec_only: bool,
                    spec: str = SPEC) -> List[Tuple[str, str, bool]]:
    """(path, blob, present) of the changelog files at commit; spec first."""
    out = git(repo, "ls-tree", commit, spec.rsplit("/", 1)[0] + "/", "redhat/").decode()
    found: List[Tuple[str, str, bool]] = []
    aux: List[Tuple[str, str, bool]] = []
    for ln in out.splitlines():
        meta, path = ln.split("\t", 1)
        blob = meta.split()[2]
        if path == spec:
            found.append((path, blob, git_has(repo, blob)))
        elif AUX_RE.match(path) and not spec_only:
            aux.append((path, blob, git_has(repo, blob)))
    if not any(p == spec for p, _, _ in found):
        found.append((spec, "", False))
    return found + sorted(aux)


def git_has(repo: Path, blob: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "cat-file", "-e", blob],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def catalog_cves(drivers_dir: Path) -> Dict[str, List[str]]:
    """CVE id -> the drivers that carry it as a known-issue id."""
    out: Dict[str, List[str]] = {}
    for path in sorted(drivers_dir.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for driver, entry in sorted(data.get("drivers", {}).items()):
            for issue in entry.get("known_issues", []):
                if re.fullmatch(r"CVE-\d{4}-\d+", str(issue.get("id", ""))):
                    out.setdefault(issue["id"], []).append(driver)
    return out


class Collected:
    """What the changelogs say: per (header build, CVE), the first place it shows."""

    def __init__(self) -> None:
        self.first: Dict[Pair, Tuple[str, str, str]] = {}  # -> (commit, path, prefix)
        self.headers: Set[str] = set()  # every Red Hat build header read
        self.other: Dict[Pair, Tuple[str, str]] = {}  # entries under a rebuilder's header
        self.reverts: Dict[Pair, Tuple[str, str]] = {}
        self.read: List[Dict[str, object]] = []
        self.missing: List[Dict[str, str]] = []
        self.tips: Dict[str, str] = {}  # branch -> build of its tip (from the subject)
        self.seen_blobs: Set[str] = set()

    def add(self, entries: Iterable[Entry], commit: str, path: str) -> None:
        for e in entries:
            if not e.red_hat:
                for cve in e.cves:
                    self.other.setdefault((e.build, cve), (commit, path))
                continue
            self.headers.add(e.build)
            for cve in e.cves:
                pair = (e.build, cve)
                if e.is_revert:
                    self.reverts.setdefault(pair, (commit, path))
                self.first.setdefault(pair, (commit, path, e.prefix))


def collect(repo: Path, branches: Sequence[str], spec_only: bool = False,
            spec: str = SPEC) -> Collected:
    col = Collected()
    done: Set[str] = set()
    for branch in branches:
        commits = branch_commits(repo, branch)
        if commits:
            m = SRPM_RE.search(commits[-1][1])
            col.tips[branch] = m.group("version") if m else commits[-1][0]
        for commit, subject in commits:
            if commit in done:
                continue
            done.add(commit)
            files: List[str] = []
            for path, blob, present in changelog_files(repo, commit, spec_only, spec):
                if not present:
                    if path == spec:
                        col.missing.append({"branch": branch, "commit": commit,
                                            "srpm": subject})
                    continue
                files.append(path)
                if blob in col.seen_blobs:
                    continue
                col.seen_blobs.add(blob)
                text = git(repo, "cat-file", "blob", blob).decode("utf-8", "replace")
                col.add(parse_changelog(text), commit, path)
            col.read.append({"branch": branch, "commit": commit, "srpm": subject,
                             "files": files})
    return col


def streams_of(tips: Dict[str, str], headers: Iterable[str] = ()) -> Dict[str, Dict[int, int]]:
    """line -> build number of each branch's stream -> its minor release; `headers` adds
    the streams whose z-stream headers state it (`_N`), for a branch of many minors."""
    out: Dict[str, Dict[int, int]] = {}
    for tip in [*sorted(headers), *tips.values()]:
        b = Build.parse(tip)
        if b is None or b.minor is None or b.mainline:
            continue
        out.setdefault(b.line, {})[b.num] = b.minor
    return out


def placeable(b: Build, minors: Dict[str, Dict[int, int]]) -> bool:
    """A z-stream build whose string hwmgr can compare: its minor release known, or a line
    whose builds carry none (el7: `3.10.0-1160.119.1.el7`)."""
    return b.line in NO_MINOR or b.num in minors.get(b.line, {})


def coverage(headers: Iterable[str],
             minors: Dict[str, Dict[int, int]]) -> Dict[str, Dict[str, str]]:
    """line -> stream -> the highest z-stream build whose changelog was read."""
    best: Dict[str, Dict[int, Build]] = {}
    for h in headers:
        b = Build.parse(h)
        if b is None or b.mainline or not placeable(b, minors):
            continue
        cur = best.setdefault(b.line, {}).get(b.num)
        if cur is None or b.key() > cur.key():
            best[b.line][b.num] = b
    return {line: {str(num): best[line][num].version(minors.get(line, {}))
                   for num in sorted(best[line])}
            for line in sorted(best, key=lambda s: int(s[2:]))}


def propose(col: Collected, cves: Dict[str, List[str]], repo_url: str = REPO_URL,
            minor_from_header: bool = False) -> Tuple[Dict[str, object], Counter]:
    """The proposal's `lines`/`streams` and counters."""
    counts: Counter = Counter()
    minors = streams_of(col.tips, col.headers if minor_from_header else ())
    # per line, CVE -> list of (Build, header string, where)
    named: Dict[str, Dict[str, List[Tuple[Build, str, Tuple[str, str, str]]]]] = {}
    for (header, cve), where in sorted(col.first.items()):
        if cve not in cves:
            continue
        b = Build.parse(header)
        if b is None or BASES.get(b.line) != b.base:
            counts["skipped: header not a GA-base build (5.14-N, 6.11.0-N)"] += 1
            continue
        if not b.mainline and not placeable(b, minors):
            counts["skipped: dotted pre-GA build (5.14.0-1.6.1)"] += 1
            continue
        if not b.mainline and b.minor is not None and b.minor != minors[b.line][b.num]:
            counts["z-stream header minor differs from branch"] += 1
        named.setdefault(b.line, {}).setdefault(cve, []).append((b, header, where))
    lines: Dict[str, Dict[str, object]] = {}
    for line in BASES:
        out: Dict[str, object] = {}
        for cve in sorted(named.get(line, {})):
            picks: Dict[Optional[int], Tuple[Build, str, Tuple[str, str, str]]] = {}
            for item in named[line][cve]:
                slot = None if item[0].mainline else item[0].num
                if slot not in picks or item[0].key() < picks[slot][0].key():
                    picks[slot] = item
            chosen = sorted(picks.values(), key=lambda it: it[0].key())
            fixed, urls, evidence = [], [], []
            for b, _header, (commit, path, prefix) in chosen:
                v = b.version(minors.get(line, {}))
                if not FIXED_RE[line].match(v):
                    raise ValueError(f"{cve}: {v} is not an {line} build hwmgr accepts")
                fixed.append(v)
                urls.append(f"{repo_url}/blob/{commit}/{path}")
                evidence.append(f"the kernel-{v} changelog names {cve} ({prefix})")
                counts[f"{line} main-line fixes" if b.mainline else f"{line} z-stream fixes"] += 1
            main = [b for b, _, _ in chosen if b.mainline]
            if main and any(not b.mainline and b.num > main[0].num for b, _, _ in chosen):
                counts[f"{line} CVEs named again in a stream after the main-line fix"] += 1
            out[cve] = {"fixed": fixed, "urls": urls, "evidence": evidence}
        lines[line] = out
    reverted = sorted({cve for (_h, cve) in col.reverts if cve in cves})
    result: Dict[str, object] = {
        "lines": lines,
        "streams": coverage(col.headers, minors),
        "branch_tips": dict(col.tips),
        "reverts": {cve: sorted(h for (h, c) in col.reverts if c == cve) for cve in reverted},
        "not_red_hat": {cve: sorted(h for (h, c) in col.other if c == cve)
                        for cve in sorted({c for (_h, c) in col.other if c in cves})},
    }
    return result, counts


def source_text(repo: Path, branches: Sequence[str], col: Collected, spec_only: bool,
                spec: str = SPEC, repo_url: str = REPO_URL) -> str:
    what = spec if spec_only else f"{spec} and redhat/kernel.changelog-N.M"
    head = (f"{repo_url}, branches {', '.join(branches)}: "
            f"{what} of every commit, Red Hat's build headers only")
    commits = "; ".join(f"{r['branch']} {r['commit']} ({', '.join(map(str, r['files'])) or '-'})"
                        for r in col.read)
    return f"{head}; commits read (branch, commit, files present): {commits}"


def summary(cves: Dict[str, List[str]], result: Dict[str, object], counts: Counter,
            col: Collected, spec: str = SPEC) -> str:
    lines: Dict[str, Dict[str, object]] = result["lines"]  # type: ignore[assignment]
    out: List[str] = []
    per: Dict[str, Counter] = {}
    totals: Counter = Counter()
    for cve, drivers in cves.items():
        for d in drivers:
            totals[d] += 1
            for line, data in lines.items():
                if cve in data:
                    per.setdefault(line, Counter())[d] += 1
    for line in sorted(lines, key=lambda s: int(s[2:])):
        out.append(f"{line}: {len(lines[line])} of {len(cves)} catalog CVE ids named")
        out.append("  " + ", ".join(f"{d} {per.get(line, Counter())[d]}/{totals[d]}"
                                    for d in sorted(totals, key=lambda d: (-totals[d], d))))
    for k in sorted(counts):
        out.append(f"{k}: {counts[k]}")
    out.append(f"catalog CVEs named in a Revert entry: {len(result['reverts'])}")  # type: ignore[arg-type]
    out.append("catalog CVEs named only under a rebuilder's header (not counted): "
               f"{result['not_red_hat']}")
    out.append(f"commits read: {len(col.read)}; without {spec}: {len(col.missing)}")
    for m in col.missing:
        out.append(f"  {m['branch']} {m['commit']} {m['srpm'].rsplit('/', 1)[-1]}")
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("repo", type=Path, help="bare git dir of the src.rpm import")
    ap.add_argument("--branches", nargs="+", default=list(DEFAULT_BRANCHES))
    ap.add_argument("--catalog", type=Path, default=ROOT / "catalogs" / "drivers")
    ap.add_argument("--spec-only", action="store_true",
                    help="read almalinux/kernel.spec only, not redhat/kernel.changelog-N.M")
    ap.add_argument("--spec", default=SPEC, help="the spec's path in the import")
    ap.add_argument("--repo-url", default=REPO_URL, help="the import's GitHub address")
    ap.add_argument("--minor-from-header", action="store_true",
                    help="a branch holds several minor releases: a z-stream header's _N says which")
    ap.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = ap.parse_args(argv)
    cves = catalog_cves(args.catalog)
    col = collect(args.repo, args.branches, spec_only=args.spec_only, spec=args.spec)
    result, counts = propose(col, cves, args.repo_url, minor_from_header=args.minor_from_header)
    doc = {"source": source_text(args.repo, args.branches, col, args.spec_only, args.spec,
                                 args.repo_url), **result}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(summary(cves, result, counts, col, args.spec), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
