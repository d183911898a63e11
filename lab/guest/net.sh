#!/bin/bash
# lab-net.service: once udev has coldplugged the PCI devices, eth0 on QEMU user networking
# (the host is 10.0.2.2; no default route, so hwmgr's default-route guard stays off), the
# scenario's traffic shaping, and the guest's own view of the drivers before hwmgr runs.
source /lab/lib.sh
udevadm settle --timeout=60
for _ in $(seq 30); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
say "udev coldplug done: $(ls /sys/class/net | tr '\n' ' ')"
if [ -e /sys/class/net/eth0 ]; then
  ip addr add 10.0.2.15/24 dev eth0; ip link set eth0 up
fi
# netdevsim (built for the lab: Debian's kernel has none): a NIC without a PCI device whose
# rings, pause and channels can be set; 4 queues. udev applies any matching .link file to it.
# Only next to the 82574L's eth0: with no eth0 (scenario 4's broken driver) it would take
# the name eth0 itself.
if [ -e /sys/class/net/eth0 ]; then
  modprobe netdevsim && echo "1 1 4" > /sys/bus/netdevsim/new_device && udevadm settle --timeout=30
  say "netdevsim: $(ls /sys/bus/netdevsim/devices/netdevsim1/net 2>/dev/null | tr '\n' ' ')"
  # eth1 is `allow-hotplug` in /etc/network/interfaces.d/eth1: ifupdown's udev rule queued
  # ifup@eth1.service (--no-block) on the add event; wait until its ifup has exited (the unit
  # is "active" from its start: Type=simple, RemainAfterExit), so the facts below show what
  # its post-up lines set (it is ordered before network-online.target anyway)
  if [ -n "$(ifquery --allow hotplug -l eth1 2>/dev/null)" ]; then
    for _ in $(seq 120); do
      case "$(systemctl show -P SubState ifup@eth1.service)" in exited|failed) break;; esac
      sleep 0.5
    done
    say "ifupdown: ifup@eth1.service $(systemctl show -P SubState ifup@eth1.service)," \
        "ifquery --state: $(ifquery --state eth1)"
  fi
fi
[ -x /lab/shape.sh ] && { say "shaping eth0: $(tail -1 /lab/shape.sh)"; /lab/shape.sh; }
say "facts: $(python3 /lab/facts.py $OUT/facts-boot.json 2>$OUT/facts-boot.err)"
exit 0
