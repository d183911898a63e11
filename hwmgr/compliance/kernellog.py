"""The host's kernel log since boot, read through `Host`, judged against the known-bad
signatures (`hwmgr.catalog.kernellog`): one drift finding per signature and driver the
host runs, with the source, the fix it gives, and the first and last line seen."""

from __future__ import annotations

from typing import Iterable

from hwmgr.catalog import kernellog
from hwmgr.catalog.refs import Cite
from hwmgr.compliance.items import KERNEL_LOG
from hwmgr.compliance.judge import Finding
from hwmgr.host.seam import Host

# `dmesg` prints the ring buffer with [seconds since boot] stamps; the journal's kernel
# lines of this boot in the same monotonic form are the fallback (dmesg_restrict, no dmesg)
DMESG_ARGV = ("dmesg",)
JOURNAL_ARGV = ("journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-monotonic")
TIMEOUT = 10.0


def read_log(host: Host) -> str | None:
    """The kernel log of this boot as text, or None when neither source can be read."""
    for argv in (DMESG_ARGV, JOURNAL_ARGV):
        res = host.run(list(argv), timeout=TIMEOUT)
        if res.ok and res.stdout.strip():
            return res.stdout
    return None


def findings(hits: Iterable[kernellog.Hit], drivers: Iterable[str]) -> list[Finding]:
    """A drift finding per (signature, driver) among the host's `drivers`, counting lines."""
    grouped: dict[tuple[str, str], list[kernellog.Hit]] = {}
    for hit in kernellog.for_drivers(hits, drivers):
        grouped.setdefault((hit.signature.id, hit.driver), []).append(hit)
    out = []
    for (sid, driver), group in sorted(grouped.items()):
        sig, first, last = group[0].signature, group[0], group[-1]
        where = first.interface or first.device or driver
        reason = (f"{driver} ({where}) logged a known-bad line {len(group)} time"
                  f"{'s' if len(group) != 1 else ''} since boot ({sig.severity}): "
                  f"{sig.symptom}")
        out.append(Finding("driver", first.device, first.interface, f"{KERNEL_LOG}{sid}",
                           "no such line since boot",
                           {"count": len(group), "first": first.line, "last": last.line},
                           "drift", reason, sig.fix, Cite(f"kernel_log:{sid}", sig.urls[0])))
    return out


def host_findings(host: Host, drivers: Iterable[str]) -> tuple[list[Finding], str | None]:
    """(findings, a note when the log could not be read) for the drivers the host runs."""
    text = read_log(host)
    if text is None:
        return [], "the kernel log (dmesg, journalctl -k) could not be read: no kernel_log items"
    return findings(kernellog.scan(text), drivers), None
