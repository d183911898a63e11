"""What the guest's own tools say about e1000e and megaraid_sas right now.

`facts.py OUT.json` writes the JSON document to OUT.json and prints its one-line summary.

Independent of hwmgr on purpose: the lab asserts on ethtool, /sys/module, modinfo and
lspci, so a bug in hwmgr's verify cannot make the lab agree with it. Stdlib only.
"""
import json
import os
import subprocess
import sys


def sh(*argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout
    except OSError as exc:
        return 127, str(exc)


def read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def ethtool_i(ifname):
    rc, out = sh("ethtool", "-i", ifname)
    if rc:
        return None
    return {k.strip(): v.strip() for k, v in
            (ln.split(":", 1) for ln in out.splitlines() if ":" in ln)}


def pci():
    devs = {}
    base = "/sys/bus/pci/devices"
    for addr in sorted(os.listdir(base)):
        d = os.path.join(base, addr)
        vid, did = read(f"{d}/vendor"), read(f"{d}/device")
        drv = os.path.basename(os.readlink(f"{d}/driver")) if os.path.exists(f"{d}/driver") \
            else None
        net = sorted(os.listdir(f"{d}/net")) if os.path.isdir(f"{d}/net") else []
        devs[addr] = {"id": f"{vid[2:]}:{did[2:]}", "driver": drv, "net": net,
                      "subsystem": f"{read(f'{d}/subsystem_vendor')[2:]}:"
                                   f"{read(f'{d}/subsystem_device')[2:]}"}
    return devs


def module(name):
    fields = {}
    rc, out = sh("modinfo", name)
    for ln in out.splitlines() if rc == 0 else []:
        k, _, v = ln.partition(":")
        if k in ("filename", "version", "srcversion", "vermagic", "signer") and k not in fields:
            fields[k] = v.strip()
    return {"loaded": os.path.isdir(f"/sys/module/{name}"),
            "sys_version": read(f"/sys/module/{name}/version"),
            "sys_srcversion": read(f"/sys/module/{name}/srcversion"),
            "taint": read(f"/sys/module/{name}/taint"),
            "modinfo": fields}


def current(argv):
    """`ethtool -g/-l` style output: {key: value} of its "Current hardware settings" part
    (or the whole output, as for -a), lower-case keys."""
    rc, out = sh(*argv)
    if rc:
        return None
    part = out.split("Current hardware settings:")[-1]
    return {k.strip().lower(): v.strip() for k, v in
            (ln.split(":", 1) for ln in part.splitlines()[1:] if ":" in ln)}


def settings(ifname):
    """The NIC settings hwmgr may change, as ethtool and sysfs report them (not hwmgr)."""
    rc, out = sh("ethtool", "-k", ifname)
    pairs = [ln.split(":", 1) for ln in out.splitlines()[1:] if ":" in ln] if rc == 0 else []
    feats = {k.strip(): v.split()[0] for k, v in pairs if v.strip()} if rc == 0 else None
    rc, prop = sh("udevadm", "info", "-q", "property", f"/sys/class/net/{ifname}")
    link = [ln.split("=", 1)[1] for ln in prop.splitlines() if ln.startswith("ID_NET_LINK_FILE=")]
    return {"ring": current(["ethtool", "-g", ifname]),
            "pause": current(["ethtool", "-a", ifname]),
            "channels": current(["ethtool", "-l", ifname]),
            "features": feats, "txqueuelen": read(f"/sys/class/net/{ifname}/tx_queue_len"),
            "link_file": link[0] if link else None}


def files(*paths):
    """{path: content} of the persistence files hwmgr may write (or restore): each file named,
    and every file of each directory named."""
    found = {}
    for p in paths:
        names = [p] if os.path.isfile(p) else \
            [f"{p}/{n}" for n in sorted(os.listdir(p))] if os.path.isdir(p) else []
        for f in names:
            try:
                with open(f, "rb") as fh:  # every byte: revert must restore them exactly
                    found[f] = fh.read().decode("utf-8", "backslashreplace")
            except OSError:
                found[f] = None
    return found


def ifupdown(ifnames):
    """ifupdown's own view (not hwmgr's): the interfaces ifup has brought up (`ifquery
    --state`, from /run/network/ifstate), each one's ifup@IF.service state (SubState "exited":
    its ifup has run) and when it started, and the post-up commands ifquery reads for it."""
    rc, out = sh("ifquery", "--state")
    doc = {"state": out.split() if rc == 0 else None, "ifaces": {}}
    for i in ifnames:
        rc, unit = sh("systemctl", "show", "-p", "ActiveState", "-p", "SubState", "-p", "Result",
                      "-p", "ExecMainStartTimestampMonotonic", f"ifup@{i}.service")
        props = dict(ln.split("=", 1) for ln in unit.splitlines() if "=" in ln) if rc == 0 \
            else {}
        rc, conf = sh("ifquery", i)
        doc["ifaces"][i] = {"unit": props, "up": [ln[4:] for ln in conf.splitlines()
                                                   if ln.startswith("up: ")] if rc == 0 else None}
    return doc


doc = {"kernel": os.uname().release, "pci": pci(),
       "modules": {m: module(m) for m in ("e1000e", "megaraid_sas")},
       "ethtool": {i: ethtool_i(i) for i in sorted(os.listdir("/sys/class/net")) if i != "lo"},
       "scsi_hosts": {h: read(f"/sys/class/scsi_host/{h}/proc_name")
                      for h in sorted(os.listdir("/sys/class/scsi_host"))}
       if os.path.isdir("/sys/class/scsi_host") else {}}
doc["settings"] = {i: settings(i) for i in doc["ethtool"]}
doc["sysctl"] = {n: read("/proc/sys/" + n.replace(".", "/")) for n in
                 ("net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_rmem")}
doc["files"] = files("/etc/systemd/network", "/etc/sysctl.d", "/etc/network/interfaces",
                     "/etc/network/interfaces.d", "/etc/udev/rules.d")
doc["ifupdown"] = ifupdown(doc["ethtool"])
rc, out = sh("dkms", "status", "e1000e")
doc["dkms_status"] = out.strip().splitlines() if rc == 0 else []
rc, out = sh("dmesg")
doc["dmesg_e1000e"] = [ln for ln in out.splitlines() if "e1000e" in ln][-12:]
e = doc["ethtool"].get("eth0") or {}
m = doc["modules"]["e1000e"]
doc["summary"] = (f"ethtool={e.get('version')} sys={m['sys_version']} "
                  f"modinfo={m['modinfo'].get('version')} file={m['modinfo'].get('filename')}")
with open(sys.argv[1], "w") as fh:
    json.dump(doc, fh, indent=1)
print(doc["summary"])
