#!/bin/bash
# hwmgr lab guest, first user-space step (exec'd by the PID-1 stub with the payload disk at
# /lab): install this run's hwmgr the way a package would, put the real
# hwmgr-verify.service and the lab's units in place, then exec systemd as PID 1. systemd and
# udev then boot the guest like any Debian host; hwmgr-verify.service runs where its
# [Unit] section puts it (after network-online.target), then lab-step.service runs this
# boot's step and powers off or reboots. QEMU runs with -no-reboot, so a reboot ends QEMU and
# the harness starts the next boot on the same disk.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
source /lab/lib.sh
mount -o remount,rw /
say "boot $(cat /lab/boot-id 2>/dev/null) on $(uname -r): installing hwmgr, starting systemd"

# --- hwmgr as a system install: package, /usr/bin/hwmgr, catalog, recipe, site config
SITE=/usr/lib/python3/dist-packages  # where Debian's own python3-* packages go
rm -rf "$SITE/hwmgr"
mkdir -p "$SITE" /usr/share/hwmgr/catalogs /usr/share/hwmgr/drivers /etc/hwmgr
cp -a /lab/pylib/hwmgr "$SITE/"
printf '#!/usr/bin/python3\nfrom hwmgr.cli import run\nrun()\n' \
  > /usr/bin/hwmgr
chmod +x /usr/bin/hwmgr
rm -rf /usr/share/hwmgr/catalogs/* /usr/share/hwmgr/drivers/*
cp /lab/catalog/*.json /usr/share/hwmgr/catalogs/
cp -r /lab/drivers/* /usr/share/hwmgr/drivers/
cp /lab/hwmgr.json /etc/hwmgr/hwmgr.json

# --- units: the shipped hwmgr-verify.service verbatim, the lab site's drop-in, lab units
U=/etc/systemd/system
rm -rf $U/hwmgr-verify.service $U/hwmgr-verify.service.d $U/lab-*.service
cp /lab/unit/hwmgr-verify.service $U/
mkdir -p $U/hwmgr-verify.service.d
cp /lab/unit/lab.conf $U/hwmgr-verify.service.d/lab.conf
cp /lab/units/lab-*.service $U/
# what `systemctl enable` does (as symlinks: systemctl itself costs seconds under TCG)
mkdir -p $U/multi-user.target.wants $U/network-online.target.wants
ln -sf $U/hwmgr-verify.service $U/multi-user.target.wants/hwmgr-verify.service
ln -sf $U/lab-step.service $U/multi-user.target.wants/lab-step.service
ln -sf $U/lab-net.service $U/network-online.target.wants/lab-net.service
ln -sf /lib/systemd/system/multi-user.target $U/default.target
# a server without consoles to log in on, periodic jobs, binfmt or utmp; no device-mapper,
# loop, FUSE or EFI modules to preload: each unit costs a second or more under TCG
for unit in getty.target getty-static.service systemd-user-sessions.service \
            e2scrub_reap.service apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
            e2scrub_all.timer fstrim.timer systemd-binfmt.service \
            proc-sys-fs-binfmt_misc.automount systemd-update-utmp.service \
            systemd-update-utmp-runlevel.service modprobe@dm_mod.service \
            modprobe@efi_pstore.service modprobe@fuse.service modprobe@loop.service; do
  ln -sf /dev/null $U/$unit
done
exec /lib/systemd/systemd
