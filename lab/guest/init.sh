#!/bin/bash
# hwmgr lab guest boot (PID 1, from the payload disk at /lab): what udev/systemd would do,
# then hwmgr's boot-time verification (the hwmgr-verify.service command), then this boot's
# step script, then power off. QEMU runs with -no-reboot, so a reboot ends QEMU too and the
# harness starts the next boot on the same disk.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb COLUMNS=120 PYTHONDONTWRITEBYTECODE=1
OUT=/lab/out
up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "LAB: $* (uptime $(up) s)"; }

# --- what udev would provide: /dev/fd (dkms uses <(...)), ptys, tmpfs
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp
mount -o remount,rw /
hostname lab; ip link set lo up
mkdir -p $OUT
say "boot $(cat /lab/boot-id 2>/dev/null) on $(uname -r)"

# --- udev-less coldplug: load the drivers of every PCI function by modalias
cat /sys/bus/pci/devices/*/modalias | sort -u | xargs -r modprobe -a -q 2>/dev/null
for _ in $(seq 30); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
say "coldplug done: $(ls /sys/class/net | tr '\n' ' ')"

# --- network: QEMU user net, the host is 10.0.2.2 (HTTP catalog/SRPMs, iperf3). No default
#     route: nothing but the lab host is reachable, and hwmgr's default-route guard stays off.
if [ -e /sys/class/net/eth0 ]; then
  ip addr add 10.0.2.15/24 dev eth0; ip link set eth0 up
fi
[ -x /lab/shape.sh ] && { say "shaping eth0: $(cat /lab/shape.sh | tail -1)"; /lab/shape.sh; }

# --- install this run's hwmgr (package dir from the payload) as a system install would
SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')
rm -rf "$SITE/hwmgr"; mkdir -p "$SITE" /usr/share/hwmgr/catalogs /usr/share/hwmgr/drivers /etc/hwmgr
cp -r /lab/pylib/hwmgr "$SITE/"
printf '#!/usr/bin/python3\nimport sys\nfrom hwmgr.cli import main\nsys.exit(main())\n' \
  > /usr/bin/hwmgr
chmod +x /usr/bin/hwmgr
rm -rf /usr/share/hwmgr/catalogs/* /usr/share/hwmgr/drivers/*
cp /lab/catalog/*.json /usr/share/hwmgr/catalogs/
cp -r /lab/drivers/* /usr/share/hwmgr/drivers/
cp /lab/hwmgr.json /etc/hwmgr/hwmgr.json
[ -f /lab/unit/hwmgr-verify.service ] && cp /lab/unit/hwmgr-verify.service /etc/systemd/system/

python3 /lab/facts.py > $OUT/facts-boot.json 2>$OUT/facts-boot.err
say "facts: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["summary"])' $OUT/facts-boot.json)"

# --- boot-time verification: the ExecStart of hwmgr-verify.service (+ --json for the harness)
if [ -f /lab/verify-command ]; then
  say "boot verify: $(cat /lab/verify-command)"
  t0=$(up)
  bash -c "$(cat /lab/verify-command)" > $OUT/boot-verify.json 2> $OUT/boot-verify.err
  echo $? > $OUT/boot-verify.rc
  say "boot verify exit $(cat $OUT/boot-verify.rc) in $(python3 -c "print(round($(up)-$t0,1))") s: $(python3 /lab/summary.py $OUT/boot-verify.json)"
  sync
fi

ACTION=poweroff
if [ -f /run/lab-reboot-requested ]; then
  say "reboot requested by: $(cat /run/lab-reboot-requested); skipping this boot's step"
  cp /run/lab-reboot-requested $OUT/reboot-requested
  ACTION=reboot
elif [ -f /lab/step.sh ]; then
  say "step start"
  (cd /lab && bash /lab/step.sh) 2>&1 | tee $OUT/step.log
  echo "${PIPESTATUS[0]}" > $OUT/step.rc
  say "step done, exit $(cat $OUT/step.rc)"
  python3 /lab/facts.py > $OUT/facts-end.json 2>>$OUT/facts-boot.err
  [ -f /run/lab-reboot-requested ] && ACTION=reboot
fi
say "END $ACTION"
sync
mount -o remount,ro /lab || say "remount ro /lab failed"
mount -o remount,ro / || say "remount ro / failed"
sync
if [ $ACTION = reboot ]; then echo b > /proc/sysrq-trigger; else echo o > /proc/sysrq-trigger; fi
sleep 30
