"""NIC and kernel network settings: reading them, judging them, applying and reverting them.

This package owns the compliance view of a host's network tuning — per-interface ethtool
settings (pause, rings, channels, offload features, coalescing), link attributes (MTU,
txqueuelen, qdisc) and the `net.*` sysctls — under one set of canonical item names
(`ring.rx`, `features.generic-receive-offload`, `sysctl.net.ipv4.tcp_rmem`, …), and the
kernel log since boot judged against the catalog's known-bad signatures (`kernellog`). Parsers are
pure functions over the plain text every ethtool era prints, so live hosts and old snapshots
read the same way; everything that touches a host goes through `hwmgr.host.Host`. A layer-5
package (docs/architecture.md): it imports lower layers only — the host seam, config, the
catalog, the transaction engine and the inventory — never lifecycle/, fleet/ or anything above.
"""
