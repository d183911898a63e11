#!/bin/bash
# ExecStopPost of the lab's hwmgr-verify.service drop-in: keep the exit status for the
# harness and put a summary on the console (it runs even when a reboot stops the unit). The
# unit's stdout is boot-verify.json itself, so the summary goes to /dev/console.
source /lab/lib.sh
echo "${EXIT_STATUS:-}" > $OUT/boot-verify.rc
echo "${SERVICE_RESULT:-}" > $OUT/boot-verify.result
say "hwmgr-verify.service: $SERVICE_RESULT, exit ${EXIT_STATUS:-?}: $(python3 /lab/summary.py $OUT/boot-verify.json)" > /dev/console
sync
