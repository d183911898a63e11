# Helpers for a boot's step script (sourced): run a command, keep its output for the harness.
OUT=/lab/out
# rec NAME CMD...: run CMD, save stdout/stderr/exit code as $OUT/NAME.{out,err,rc}, print a line
rec() {
  local name=$1; shift
  local t0; t0=$(cut -d' ' -f1 /proc/uptime)
  "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  local rc=$?
  echo $rc > "$OUT/$name.rc"
  local t1; t1=$(cut -d' ' -f1 /proc/uptime)
  echo "LAB-CMD [$name] $* -> exit $rc ($(python3 -c "print(round($t1-$t0,1))") s)"
  case "$*" in *--json*) echo "    $(python3 /lab/summary.py "$OUT/$name.out")";; esac
  [ -s "$OUT/$name.err" ] && sed 's/^/    stderr: /' "$OUT/$name.err" | tail -5
  sync
  return $rc
}
# show CMD...: run CMD for the transcript only (human output)
show() { echo "LAB-SHOW $*"; "$@" 2>&1 | sed 's/^/    /'; }
# reboot_after: end this boot with a reboot (QEMU exits; the harness boots again)
reboot_after() { echo "$(date -u +%FT%TZ) step script" > /run/lab-reboot-requested; }
