"""Fleet reports: owns building one report from many hosts' `hwmgr check` results.

Each host contributes a small dict `{name, status, check, error}` (status compliant, drift,
unknown, reboot-pending from the check's exit code; unreachable or failed when there is no
check result), usually one JSON file per host written by an Ansible play. `report` turns them
into the normative fleet-report.json (schema: hwmgr/schemas/fleet-report.schema.json) and a
JUnit XML for CI; `html` renders a single self-contained page with the trend over earlier
reports; `write` puts the three files in place through a `Host` allowed to write only the
output directory. The package imports `hwmgr.errors`, `hwmgr.output`, the host seam and the
standard library (the run's settings, e.g. SOURCE_DATE_EPOCH, are passed in by the verb); the
POSIX collector for hosts without Python (`collect.sh`) ships here as package data.
"""
