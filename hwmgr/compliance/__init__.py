"""NIC and kernel network settings: reading them, judging them and (later) applying them.

This package owns the compliance view of a host's network tuning — per-interface ethtool
settings (pause, rings, channels, offload features, coalescing), link attributes (MTU,
txqueuelen, qdisc) and the `net.*` sysctls — under one set of canonical item names
(`ring.rx`, `features.generic-receive-offload`, `sysctl.net.ipv4.tcp_rmem`, …). Parsers are
pure functions over the plain text every ethtool era prints, so live hosts and old snapshots
read the same way; everything that touches a host goes through `hwmgr.host.Host`. It may
import only `hwmgr.host`, `hwmgr.runner`, `hwmgr.errors` and `hwmgr.output`.
"""
