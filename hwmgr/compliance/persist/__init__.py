"""Where an applied setting survives a reboot: the backends chosen from what the host runs
(`backends`: systemd .link, NetworkManager, sysctl.d; `distro`: network-scripts, ifupdown, the
udev rule fallback), their shared plan types (`model`) and which systemd reads which key
(`keys`, data). Imports compliance's readers and setters (`read`, `setters`) only; `apply`
and `steps` import it.
"""
