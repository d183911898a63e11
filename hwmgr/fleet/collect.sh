#!/bin/sh
# hwmgr-collect.sh: capture a hwmgr host snapshot (format hwmgr-snapshot, version 1) on a
# host without Python, and write it as a .tar.gz to stdout.
#
#   sh hwmgr-collect.sh > "$(hostname)-snapshot.tar.gz"
#   ssh old-host sh -s < hwmgr-collect.sh > old-host.tar.gz
#   hwmgr inventory --root old-host.tar.gz
#
# Needs a POSIX sh (dash, bash, busybox sh), coreutils (or busybox), tar and gzip. Records
# what ethtool, modinfo, ip, lspci, storcli/MegaCli print when they exist; an absent tool is
# simply not recorded (hwmgr then reports those facts as unknown). Read-only: it changes
# nothing on the host and writes only under a temporary directory it removes again.
#
# Environment:
#   HWMGR_COLLECT_ROOT  read sysfs/procfs below this directory instead of / (for tests on
#                       a copied tree; commands still run on this host)
#   HWMGR_COLLECT_TIMEOUT  seconds allowed per command (default 30; needs `timeout`)
#
# The layout (docs/formats.md): sys/bus/pci/devices/<addr>/ with the PCI attributes, a
# `driver` link, net/<if>/, virtioN/net/<if>/, hostN/, virtfnN/physfn links;
# sys/class/net/<if>/; sys/class/scsi_host/hostN/; sys/module/<m>/{version,srcversion};
# proc/sys/... (net.* sysctls); commands/index.json + outputs; snapshot.json.

set -u
# BEGIN sysctls: `hwmgr collect-script` writes the catalog's list here
SYSCTLS="
net.core.rmem_max net.core.wmem_max net.core.rmem_default net.core.wmem_default
net.core.netdev_max_backlog net.core.netdev_budget net.core.somaxconn net.core.default_qdisc
net.ipv4.tcp_rmem net.ipv4.tcp_wmem net.ipv4.tcp_mem net.ipv4.tcp_window_scaling
net.ipv4.tcp_timestamps net.ipv4.tcp_sack net.ipv4.tcp_congestion_control
net.ipv4.tcp_mtu_probing net.ipv4.tcp_no_metrics_save net.ipv4.tcp_low_latency
net.ipv4.ip_forward net.ipv6.conf.all.forwarding
"
# END sysctls
LC_ALL=C
export LC_ALL
ROOT=${HWMGR_COLLECT_ROOT:-}
ROOT=${ROOT%/}
TMO=${HWMGR_COLLECT_TIMEOUT:-30}
TOP=hwmgr-snapshot
KEEP=.hwmgr-keep

die() { printf 'hwmgr-collect: error: %s\n' "$*" >&2; exit 1; }

if [ -t 1 ]; then
    die "the snapshot is a .tar.gz written to stdout; redirect it to a file"
fi
case $TMO in ''|*[!0-9]*) die "HWMGR_COLLECT_TIMEOUT must be a number of seconds" ;; esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hwmgr-collect.XXXXXX") || die "cannot create a temporary directory"
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM HUP
S=$WORK/$TOP
mkdir -p "$S/commands" || die "cannot write to $WORK"
INDEX=$WORK/index.entries
: > "$INDEX"
NCMD=0

# ---------------------------------------------------------------------------- helpers
# JSON string: control characters dropped, then backslash and double quote escaped.
json_str() {
    _s=$(printf '%s' "$1" | tr -d '\000-\037\177')
    _o=
    while :; do
        case $_s in
            *[\\\"]*) ;;
            *) break ;;
        esac
        _pre=${_s%%[\\\"]*}
        _rest=${_s#"$_pre"}
        _c=${_rest%"${_rest#?}"}
        _o=$_o$_pre\\$_c
        _s=${_rest#?}
    done
    printf '"%s"' "$_o$_s"
}

# copy_attr SRC DEST: a readable file's content (at most 1 MiB); nothing when unreadable
copy_attr() {
    [ -f "$1" ] || return 0
    mkdir -p "${2%/*}"
    if head -c 1048576 "$1" > "$2.tmp" 2>/dev/null; then
        mv "$2.tmp" "$2"
    else
        rm -f "$2.tmp"  # e.g. `speed` of a link that is down: EINVAL
    fi
}

keep_dir() { mkdir -p "$1" && : > "$1/$KEEP"; }

# a name used in paths and argv: plain ASCII, no slash, no space, no leading dot
safe_name() {
    case $1 in
        ''|.*|*[!A-Za-z0-9._@:+-]*) return 1 ;;
    esac
    return 0
}

# find_tool NAME: its path in $PATH. Not `command -v`: busybox sh may prefer its own
# applets (ip, modinfo, lspci) to the host's tools, and the host's are the ones to record.
find_tool() {
    _ifs=$IFS
    IFS=:
    for _d in $PATH; do
        if [ -n "$_d" ] && [ -f "$_d/$1" ] && [ -x "$_d/$1" ]; then
            IFS=$_ifs
            printf '%s' "$_d/$1"
            return 0
        fi
    done
    IFS=$_ifs
    return 1
}

# run NAME ARGS...: record argv, exit code, stdout and stderr for commands/index.json
run() {
    _bin=$(find_tool "$1") || return 0
    NCMD=$((NCMD + 1))
    _stem=$(printf '%s' "$*" | tr -c 'A-Za-z0-9._-' '-' | tr -s '-' | cut -c1-72)
    _stem=$(printf '%03d-%s' "$NCMD" "${_stem#-}")
    _out=commands/$_stem.txt
    _err=commands/$_stem.stderr.txt
    _name=$1
    shift
    if [ "$TMO" -gt 0 ] && command -v timeout >/dev/null 2>&1; then
        timeout "$TMO" "$_bin" "$@" > "$S/$_out" 2> "$S/$_err" < /dev/null
    else
        "$_bin" "$@" > "$S/$_out" 2> "$S/$_err" < /dev/null
    fi
    _rc=$?
    set -- "$_name" "$@"
    _argv=
    for _a in "$@"; do
        _argv=$_argv${_argv:+, }$(json_str "$_a")
    done
    _entry="{\"argv\": [$_argv], \"rc\": $_rc"
    if [ -s "$S/$_out" ]; then _entry="$_entry, \"stdout\": \"$_out\""; else rm -f "$S/$_out"; fi
    if [ -s "$S/$_err" ]; then _entry="$_entry, \"stderr\": \"$_err\""; else rm -f "$S/$_err"; fi
    printf '%s}\n' "$_entry" >> "$INDEX"
    return 0
}

link_base() {  # last path component of a symlink's target, or nothing
    _t=$(readlink "$1" 2>/dev/null) || return 1
    _t=${_t%/}
    printf '%s' "${_t##*/}"
}

# ---------------------------------------------------------------------------- identity
read_first() { [ -r "$1" ] && head -n 1 "$1" 2>/dev/null; }
HOSTNAME_=$(read_first "$ROOT/proc/sys/kernel/hostname")
KERNEL=$(read_first "$ROOT/proc/sys/kernel/osrelease")
if [ -z "$ROOT" ]; then
    [ -n "$HOSTNAME_" ] || HOSTNAME_=$(uname -n)
    [ -n "$KERNEL" ] || KERNEL=$(uname -r)
fi
for f in hostname osrelease random/boot_id; do
    copy_attr "$ROOT/proc/sys/kernel/$f" "$S/proc/sys/kernel/$f"
done
for f in version version_signature; do  # which kernel build (Debian's package, Ubuntu's base)
    copy_attr "$ROOT/proc/$f" "$S/proc/$f"
done
for f in route ipv6_route; do  # which interface carries the default route
    copy_attr "$ROOT/proc/net/$f" "$S/proc/net/$f"
done

# ---------------------------------------------------------------------------- PCI
DRIVERS=
add_driver() {
    safe_name "$1" || return 0
    case " $DRIVERS " in *" $1 "*) ;; *) DRIVERS="$DRIVERS $1" ;; esac
}
PCI=$ROOT/sys/bus/pci/devices
SCSI_HOSTS=
for d in "$PCI"/*; do
    [ -d "$d" ] || continue
    addr=${d##*/}
    case $addr in *[!0-9a-fA-F:.]*|'') continue ;; esac
    o=$S/sys/bus/pci/devices/$addr
    mkdir -p "$o"
    for a in vendor device subsystem_vendor subsystem_device class revision modalias \
             numa_node current_link_speed current_link_width max_link_speed max_link_width \
             sriov_totalvfs sriov_numvfs; do
        copy_attr "$d/$a" "$o/$a"
    done
    if drv=$(link_base "$d/driver") && safe_name "$drv"; then
        ln -s "../../drivers/$drv" "$o/driver"
        add_driver "$drv"
    fi
    if pf=$(link_base "$d/physfn"); then
        case $pf in *[!0-9a-fA-F:.]*|'') ;; *) ln -s "../$pf" "$o/physfn" ;; esac
    fi
    for e in "$d"/virtfn* "$d"/host* "$d"/net/* "$d"/virtio*/net/*; do
        [ -e "$e" ] || [ -L "$e" ] || continue
        rel=${e#"$d"/}
        name=${e##*/}
        case $rel in
            virtfn*)
                case ${name#virtfn} in ''|*[!0-9]*) continue ;; esac
                vf=$(link_base "$e") || continue
                case $vf in *[!0-9a-fA-F:.]*|'') continue ;; esac
                ln -s "../$vf" "$o/$name" ;;
            host*)
                case ${name#host} in ''|*[!0-9]*) continue ;; esac
                keep_dir "$o/$name"
                SCSI_HOSTS="$SCSI_HOSTS $name" ;;
            *)
                safe_name "$name" && keep_dir "$o/$rel" ;;
        esac
    done
done

for h in $SCSI_HOSTS; do
    for a in proc_name version_fw fw_version fwrev; do
        copy_attr "$ROOT/sys/class/scsi_host/$h/$a" "$S/sys/class/scsi_host/$h/$a"
    done
done

# ---------------------------------------------------------------------------- NICs
IFACES=
for n in "$ROOT"/sys/class/net/*; do
    [ -e "$n" ] || continue
    ifname=${n##*/}
    safe_name "$ifname" || continue
    for a in address mtu speed duplex operstate carrier tx_queue_len; do
        copy_attr "$n/$a" "$S/sys/class/net/$ifname/$a"
    done
    [ -d "$S/sys/class/net/$ifname" ] || keep_dir "$S/sys/class/net/$ifname"
    [ "$ifname" = lo ] || IFACES="$IFACES $ifname"
done

[ -z "$IFACES" ] || run ethtool --version  # an old one knows no -l (hwmgr says so)
for i in $IFACES; do
    run ethtool -i "$i"
    run ethtool "$i"
    for opt in -a -g -k -l -c; do
        run ethtool "$opt" "$i"
    done
done
# the NIC driver ethtool names (virtio_net on a virtio-pci function) has a module too
for f in "$S"/commands/*-ethtool-i-*.txt; do
    [ -f "$f" ] || continue
    while IFS= read -r line; do
        case $line in driver:*) add_driver "$(printf '%s' "${line#driver:}" | tr -d ' \t')" ;; esac
    done < "$f"
done

for drv in $DRIVERS; do
    mod=$(printf '%s' "$drv" | tr '-' '_')
    for a in version srcversion; do
        copy_attr "$ROOT/sys/module/$mod/$a" "$S/sys/module/$mod/$a"
    done
    if [ -n "$KERNEL" ]; then
        run modinfo -k "$KERNEL" "$drv"
    else
        run modinfo "$drv"
    fi
done

run ip -d link show  # the argv `hwmgr check` replays (qdisc, kind, master of every link)
run ip -o addr show
run ip route
run lspci -D -nn -k
if [ -n "$SCSI_HOSTS" ]; then  # RAID firmware when sysfs lacks it (as hwmgr inventory does)
    for t in storcli64 storcli; do run "$t" /call show J; done
    for t in MegaCli64 MegaCli megacli; do run "$t" -AdpAllInfo -aALL -NoLog; done
fi

# ---------------------------------------------------------------------------- sysctls
# the names `hwmgr snapshot` copies, then every one the catalog in force names (a dot inside
# an interface name is written `/`, as sysctl(8) does); listed in snapshot.json "sysctls"
for k in $SYSCTLS; do
    p=$(printf '%s' "$k" | tr './' '/.')
    copy_attr "$ROOT/proc/sys/$p" "$S/proc/sys/$p"
done

# ---------------------------------------------------------------------------- metadata
{
    printf '[\n'
    _sep=
    while IFS= read -r line; do
        printf '%s %s' "$_sep" "$line"
        _sep=",
"
    done < "$INDEX"
    printf '\n]\n'
} > "$S/commands/index.json"

# a network namespace that is not the host's (PID 1's; else one `ip netns` names): its
# check judges only the NICs whose interfaces it holds
NETNS=
if [ -z "$ROOT" ]; then
    _mine=$(readlink /proc/self/ns/net 2>/dev/null) || _mine=
    _init=$(readlink /proc/1/ns/net 2>/dev/null) || _init=
    if [ -n "$_mine" ] && [ -n "$_init" ]; then
        [ "$_mine" = "$_init" ] || NETNS=$_mine
    elif _ip=$(find_tool ip); then
        _name=$("$_ip" netns identify 2>/dev/null) || _name=
        [ -z "$_name" ] || NETNS="$_name (${_mine:-net:[?]})"
    fi
fi

HN=$(printf '%s' "$HOSTNAME_" | tr -d '\200-\377')
{
    printf '{"format": "hwmgr-snapshot", "version": 1,\n'
    printf ' "hostname": %s,\n' "$(if [ -n "$HN" ]; then json_str "$HN"; else printf null; fi)"
    printf ' "kernel": %s,\n' "$(if [ -n "$KERNEL" ]; then json_str "$KERNEL"; else printf null; fi)"
    printf ' "captured": "%s",\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    # what it recorded in full (hwmgr.host.capture.COLLECTOR_RECORDS), as a snapshot says
    printf ' "records": ["boot-id", "ethtool", "ip-link", "modinfo", "routes", "sysctl"],\n'
    _l=
    for k in $SYSCTLS; do _l="$_l${_l:+, }\"$k\""; done
    printf ' "sysctls": [%s],\n' "$_l"
    [ -z "$NETNS" ] || printf ' "netns": %s,\n' "$(json_str "$NETNS")"
    printf ' "collector": "hwmgr-collect.sh"}\n'
} > "$S/snapshot.json"

# not `tar | gzip`: a POSIX sh pipeline reports only gzip's status
tar -C "$WORK" -cf "$WORK/snapshot.tar" "$TOP" || die "tar failed"
gzip -c < "$WORK/snapshot.tar" || die "gzip failed"
