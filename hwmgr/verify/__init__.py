"""Verification after a reboot: pure checks, throughput (iperf3), and the policy on top.

`checks` never changes the host; `policy` marks verified, rolls back once and reboots;
`gate` is a rollout's health gate on one host (a baseline before the change; verify, links,
throughput, kernel log and `check` not worse after it). May import `hwmgr.lifecycle` (to
roll back), `hwmgr.compliance` (check, the kernel log) and everything below them.
"""
