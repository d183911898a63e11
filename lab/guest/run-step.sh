#!/bin/bash
# lab-step.service: after hwmgr-verify.service, run this boot's step script, then power off
# (or reboot when the step asked for one). A reboot that hwmgr-verify.service requested
# cancels this unit before it starts.
source /lab/lib.sh
systemctl show hwmgr-verify.service -p Result -p ConditionResult -p ExecMainStatus \
  > $OUT/verify-unit.txt
say "hwmgr-verify.service: $(tr '\n' ' ' < $OUT/verify-unit.txt)"
say "step start"
(cd /lab && bash /lab/step.sh) 2>&1 | tee $OUT/step.log
echo "${PIPESTATUS[0]}" > $OUT/step.rc
say "step done, exit $(cat $OUT/step.rc)"
# the storage scenario boots the initramfs /boot holds now: hand it to the harness
[ -f /lab/storage ] && cp /boot/initrd.img-"$(uname -r)" $OUT/initrd.img
sync
if [ -f /run/lab-reboot-requested ]; then
  say "END reboot"; systemctl reboot
else
  say "END poweroff"; systemctl poweroff
fi
