# Helpers for the lab guest scripts and a boot's step script (sourced).
export HOME=/root LANG=C.UTF-8 TERM=dumb COLUMNS=120
OUT=/lab/out
up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "LAB: $* (uptime $(up) s)"; }
# rec NAME CMD...: run CMD, save stdout/stderr/exit code as $OUT/NAME.{out,err,rc}, print a line
rec() {
  local name=$1; shift
  local t0; t0=$(up)
  "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  local rc=$?
  echo $rc > "$OUT/$name.rc"
  local t1; t1=$(up)
  echo "LAB-CMD [$name] $* -> exit $rc ($(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s)"
  case "$*" in *--json*) echo "    $(python3 /lab/summary.py "$OUT/$name.out")";; esac
  [ -s "$OUT/$name.err" ] && sed 's/^/    stderr: /' "$OUT/$name.err" | tail -5
  sync
  return $rc
}
# show CMD...: run CMD for the transcript only (human output)
show() { echo "LAB-SHOW $*"; "$@" 2>&1 | sed 's/^/    /'; }
# facts_end: the guest's view of the drivers now (after an upgrade, before its reboot)
facts_end() { python3 /lab/facts.py "$OUT/facts-end.json" > /dev/null 2>> "$OUT/facts-end.err"; }
# facts_as NAME: the same view now, as $OUT/facts-NAME.json (e.g. right after an apply)
facts_as() { python3 /lab/facts.py "$OUT/facts-$1.json" > /dev/null 2>> "$OUT/facts-$1.err"; }
# reboot_after: end this boot with a reboot (QEMU exits; the harness boots again)
reboot_after() { echo "$(date -u +%FT%TZ) step script" > /run/lab-reboot-requested; }
# mark_when_running PATTERN MARK [GLOB]: print "LAB-MARK MARK" once a process matching
# PATTERN runs. With GLOB, first wait (cheaply: no process scans, which cost a TCG guest's
# build dearly) until a file matching GLOB exists.
mark_when_running() {
  while [ -n "$3" ] && ! compgen -G "$3" > /dev/null; do sleep 2; done
  while sleep 0.2; do
    if pgrep -f "$1" > /dev/null; then sync; echo "LAB-MARK $2"; return 0; fi
  done
}
