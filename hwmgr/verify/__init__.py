"""Verification after a reboot: pure checks, throughput (iperf3), and the policy on top.

`checks` never changes the host; `policy` marks verified, rolls back once and reboots. May
import `hwmgr.lifecycle` (to roll back) and everything below it.
"""
