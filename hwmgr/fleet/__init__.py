"""Fleet reports: owns building one report from many hosts' `hwmgr check` results.

Each host contributes a small dict `{name, status, check, error}` (status compliant, drift,
unknown, reboot-pending from the check's exit code; unreachable or failed when there is no
check result): a directory of one JSON file per host, or one file of many hosts (what the
playbook writes, or `check --roots-from --json`), read and checked by `results` a host at a time
(one big file through `stream`), each host reduced to what the report keeps (with the earlier
reports of `--history`). `report` turns them into the normative fleet-report.json
(schema: hwmgr/schemas/fleet-report.schema.json); `view` computes what a person reads first
(items × hosts across the fleet, groups, hosts by severity, the compact per-host data);
`groups` says which group each host is in; `trend` keeps the small fleet-trend.json (every
run's counts, the last run's drift: "new since the last report"); `html` renders one
self-contained page, `junit` the JUnit XML, `prom` the fleet metrics; `write` puts the files
in place through a `Host` allowed to write only the output directory. The package imports
`hwmgr.errors`, `hwmgr.output`, the host seam and the standard library (the run's settings,
e.g. SOURCE_DATE_EPOCH, and how a value reads, are passed in by the verb); the POSIX
collector for hosts without Python (`collect.sh`) ships here as package data.

Rollouts (docs/rollout.md): `rollout` keeps one rollout's record on the control node (its
hosts' states and gate evidence, the batches, the failure budget, halt; every change under a
file lock, written whole, so a re-run resumes), importing also `hwmgr.safejson` and the
journal's clock (`hwmgr.transaction.journal.utcnow`); `rollout_page` renders its report
with Jinja2 (autoescape) from `rollout.html.j2`, a page apart from the fleet report's.
"""
