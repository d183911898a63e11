"""Where an applied setting survives a reboot, the way each system expects it.

Three small backends, chosen per interface by `choose_backend`:
- `NetworkManagerBackend`: the active connection's `ethtool.*` / `link.*` properties when
  NetworkManager manages the device (`nmcli -t -f DEVICE,STATE,CONNECTION device`);
- `LinkFileBackend`: `/etc/systemd/network/10-hwmgr-IF.link` otherwise. udev applies only the
  FIRST matching .link file (lexical order across /etc, /run, /usr/lib), so a foreign file that
  sorts at or before ours and matches the device is a refusal (we would never apply, or we
  would shadow it); the file that applies today and sorts after ours (e.g. 99-default.link) has
  its [Link] keys copied into ours, so naming and MAC policy do not change silently;
- `SysctlBackend`: `/etc/sysctl.d/90-hwmgr.conf` for `sysctl.*` items.
Every path is under the persist root (`--persist-root`, default `/`). Items a backend cannot
express are returned as `unpersisted` with the reason, never dropped in silence. Other owners
(sysctl.d files, tuned profiles, .link files, NM properties) that set an item differently are
returned as conflicts naming the file.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Mapping

from hwmgr.compliance.persist import distro
from hwmgr.compliance.persist.distro import Systemd
from hwmgr.compliance.persist.keys import LINK_KEY_SINCE
from hwmgr.compliance.persist.model import HEADER, Backend, Conflict, PersistPlan, under
from hwmgr.compliance.read import canonical_item
from hwmgr.compliance.setters import normalise, same, shown
from hwmgr.host.seam import Host

LINK_DIRS = ("/etc/systemd/network", "/run/systemd/network", "/usr/local/lib/systemd/network",
             "/usr/lib/systemd/network", "/lib/systemd/network")
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d",
               "/lib/sysctl.d")
SYSCTL_FILE = "/etc/sysctl.d/90-hwmgr.conf"

# canonical item -> (systemd .link [Link] key, NetworkManager property)
ITEM_KEYS: dict[str, tuple[str | None, str | None]] = {
    "ring.rx": ("RxBufferSize", "ethtool.ring-rx"),
    "ring.tx": ("TxBufferSize", "ethtool.ring-tx"),
    "ring.rx-mini": ("RxMiniBufferSize", "ethtool.ring-rx-mini"),
    "ring.rx-jumbo": ("RxJumboBufferSize", "ethtool.ring-rx-jumbo"),
    "pause.rx": ("RxFlowControl", "ethtool.pause-rx"),
    "pause.tx": ("TxFlowControl", "ethtool.pause-tx"),
    "pause.autoneg": ("AutoNegotiationFlowControl", "ethtool.pause-autoneg"),
    "channels.combined": ("CombinedChannels", "ethtool.channels-combined"),
    "channels.rx": ("RxChannels", "ethtool.channels-rx"),
    "channels.tx": ("TxChannels", "ethtool.channels-tx"),
    "channels.other": ("OtherChannels", "ethtool.channels-other"),
    "features.generic-receive-offload": ("GenericReceiveOffload", "ethtool.feature-gro"),
    "features.large-receive-offload": ("LargeReceiveOffload", "ethtool.feature-lro"),
    "features.tcp-segmentation-offload": ("TCPSegmentationOffload", "ethtool.feature-tso"),
    "features.generic-segmentation-offload": ("GenericSegmentationOffload",
                                              "ethtool.feature-gso"),
    "features.rx-checksumming": ("ReceiveChecksumOffload", "ethtool.feature-rx"),
    "features.tx-checksumming": ("TransmitChecksumOffload", "ethtool.feature-tx"),
    "features.rx-vlan-offload": ("ReceiveVLANCTAGHardwareAcceleration",
                                 "ethtool.feature-rxvlan"),
    "features.tx-vlan-offload": ("TransmitVLANCTAGHardwareAcceleration",
                                 "ethtool.feature-txvlan"),
    "features.tx-tcp6-segmentation": ("TCP6SegmentationOffload",
                                      "ethtool.feature-tx-tcp6-segmentation"),
    "features.ntuple-filters": (None, "ethtool.feature-ntuple"),
    "features.receive-hashing": (None, "ethtool.feature-rxhash"),
    "features.scatter-gather": (None, "ethtool.feature-sg"),
    "txqueuelen": ("TransmitQueueLength", "link.tx-queue-length"),
    "mtu": ("MTUBytes", "802-3-ethernet.mtu"),
}
# .link keys written with the same value as an item's own key: ethtool's `tso` switches
# tx-tcp-segmentation AND tx-tcp6-segmentation, udev's TCPSegmentationOffload= only the first
# (found in the QEMU lab: after a reboot tcp-segmentation-offload read "on" again).
LINK_COMPANIONS: dict[str, tuple[str, ...]] = {
    "features.tcp-segmentation-offload": ("TCP6SegmentationOffload",),
}


# ---------------------------------------------------------------- small ini reader
def parse_ini(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) triples of a systemd/tuned style file, in order."""
    out: list[tuple[str, str, str]] = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif "=" in line:
            k, _, v = line.partition("=")
            out.append((section, k.strip(), v.strip()))
    return out


def _bool_word(value: str) -> bool | None:
    v = value.strip().lower()
    if v in ("1", "yes", "true", "on"):
        return True
    if v in ("0", "no", "false", "off"):
        return False
    return None


def _link_value(item: str, value: object) -> str:
    v = normalise(item, value)
    return ("yes" if v else "no") if isinstance(v, bool) else str(v)


# ---------------------------------------------------------------- systemd .link
def link_files(host: Host, root: str) -> list[tuple[str, str]]:
    """(name, logical path) of every .link file udev would read, in udev's order."""
    seen: dict[str, str] = {}
    for d in LINK_DIRS:
        for name in host.listdir(under(root, d)):
            if name.endswith(".link") and name not in seen:
                path = f"{under(root, d)}/{name}"
                if host.read_bytes(path) is not None:  # /dev/null masks are skipped
                    seen[name] = path
                else:
                    seen[name] = ""
    return sorted((n, p) for n, p in seen.items() if p)


def _device_facts(host: Host, ifname: str) -> dict[str, str]:
    base = f"/sys/class/net/{ifname}"
    drv = host.readlink(f"{base}/device/driver") or ""
    facts = {"name": ifname, "mac": (host.read_attr(f"{base}/address") or "").lower(),
             "driver": drv.rsplit("/", 1)[-1], "type": "ether"}
    return facts


def link_matches(entries: list[tuple[str, str, str]], facts: dict[str, str]) -> bool | None:
    """True/False when the [Match] section can be judged for the device; None when it uses
    keys we cannot evaluate here (Path=, Property=, Host= …)."""
    match = [(k, v) for s, k, v in entries if s == "Match"]
    verdict: bool | None = True
    for key, value in match:
        words = value.split()
        negate = bool(words) and words[0].startswith("!")
        if negate:
            words = [words[0][1:], *words[1:]]
        if key == "OriginalName":
            hit = any(fnmatch.fnmatchcase(facts["name"], w) for w in words)
        elif key in ("MACAddress", "PermanentMACAddress"):
            hit = facts["mac"] in (w.lower() for w in words)
        elif key == "Driver":
            hit = any(fnmatch.fnmatchcase(facts["driver"], w) for w in words)
        elif key == "Type":
            hit = any(fnmatch.fnmatchcase(facts["type"], w) for w in words)
        else:
            verdict = None
            continue
        if hit == negate:
            return False
    return verdict


class LinkFileBackend:
    """A systemd .link file of our own for one interface, merged with the one it shadows."""

    name = "systemd-link"

    def __init__(self, host: Host, root: str, systemd: Systemd | None = None) -> None:
        self.host, self.root = host, root
        self.systemd = systemd or Systemd(None, False, "systemd version unknown")

    def path(self, ifname: str) -> str:
        return under(self.root, f"/etc/systemd/network/10-hwmgr-{ifname}.link")

    def too_new(self, key: str) -> str | None:
        """Why the host's udev ignores `key` (None: it reads it, or its version is unknown)."""
        since, have = LINK_KEY_SINCE.get(key, 0), self.systemd.version
        if self.systemd.known and have is not None and have < since:
            return f"systemd {have} has no {key}= (added in systemd {since})"
        return None

    def _udev_choice(self, ifname: str) -> str | None:
        if self.root.rstrip("/"):
            return None  # an image tree: the running udev says nothing about it
        res = self.host.run(["udevadm", "info", "-q", "property", f"/sys/class/net/{ifname}"])
        m = re.search(r"^ID_NET_LINK_FILE=(\S+)$", res.stdout, re.M) if res.ok else None
        return m.group(1) if m else None

    def plan(self, ifname: str, wanted: Mapping[str, object], override: bool) -> PersistPlan:
        ours = self.path(ifname)
        plan = PersistPlan(self.name, ours)
        facts = _device_facts(self.host, ifname)
        own_name = ours.rsplit("/", 1)[-1]
        udev = self._udev_choice(ifname)
        effective: tuple[str, str] | None = None
        for name, path in link_files(self.host, self.root):
            if path == ours:
                continue
            text = self.host.read_text(path) or ""
            hit = link_matches(parse_ini(text), facts)
            if udev is not None:
                hit = path == under(self.root, udev) or (hit is True and name < own_name)
            if hit is False or (hit is None and name > own_name):
                continue
            if name <= own_name:
                plan.refusals.append(
                    f"{path} {'may match' if hit is None else 'matches'} {ifname} and sorts at "
                    f"or before {own_name}: udev applies only the first matching .link file; "
                    "add the settings there or rename it")
                return plan
            effective = (name, path)
            break
        keys: list[tuple[str, str]] = []
        if effective is not None:
            copied = [(k, v) for s, k, v in parse_ini(self.host.read_text(effective[1]) or "")
                      if s == "Link"]
            keys = copied
            plan.notes.append(f"{ifname}: {effective[1]} applies today; its [Link] keys are "
                              f"copied into {own_name} (first match wins)")
        old = parse_ini(self.host.read_text(ours) or "")
        keys += [(k, v) for s, k, v in old if s == "Link" and k not in dict(keys)]
        merged = dict(keys)
        for item, value in wanted.items():
            key = ITEM_KEYS.get(item, (None, None))[0]
            if key is None:
                plan.unpersisted[item] = "systemd .link has no key for it"
                continue
            if self.too_new(key):
                plan.unpersisted[item] = self.too_new(key) or ""
                continue
            theirs = merged.get(key)
            if theirs is not None and effective and dict(copied).get(key) == theirs and \
                    _link_value(item, value) != theirs:
                plan.conflicts.append({"item": item, "interface": ifname, "file": effective[1],
                                       "key": key, "value": theirs})
                if not override:
                    continue
            merged[key] = _link_value(item, value)
            for companion in LINK_COMPANIONS.get(item, ()):
                if not self.too_new(companion):
                    merged[companion] = merged[key]
            plan.keys[item] = key
        match = (f"MACAddress={facts['mac']}" if facts["mac"] and
                 (self.host.read_attr(f"/sys/class/net/{ifname}/addr_assign_type") or "0") == "0"
                 else f"OriginalName={ifname}")
        body = HEADER + f"[Match]\n{match}\n\n[Link]\n"
        body += "".join(f"{k}={v}\n" for k, v in merged.items())
        plan.content = body.encode()
        return plan


# ---------------------------------------------------------------- NetworkManager
def nm_connections(host: Host) -> dict[str, str]:
    """device → active connection for devices NetworkManager manages ({} without nmcli)."""
    res = host.run(["nmcli", "-t", "-f", "DEVICE,STATE,CONNECTION", "device"], timeout=15)
    out: dict[str, str] = {}
    for line in res.stdout.splitlines() if res.ok else []:
        parts = re.split(r"(?<!\\):", line)
        if len(parts) >= 3 and parts[1].startswith("connected") and parts[2]:
            out[parts[0].replace("\\:", ":")] = parts[2].replace("\\:", ":")
    return out


def nm_property(host: Host, connection: str, prop: str) -> str | None:
    """One property of a NetworkManager connection as nmcli prints it (None: not readable)."""
    res = host.run(["nmcli", "-g", prop, "connection", "show", connection])
    return res.stdout.strip() if res.ok else None


def nm_setting_present(host: Host, connection: str, setting: str) -> bool:
    """True when the connection has the setting (e.g. `ethtool`) at all: nmcli prints no
    line for an absent one, and revert removes what apply created so the keyfile is as before."""
    res = host.run(["nmcli", "-t", "-f", setting, "connection", "show", connection])
    return not res.ok or bool(res.stdout.strip())


class NetworkManagerBackend:
    """`nmcli connection modify CONN ethtool.ring-rx N …` on the device's active connection."""

    name = "networkmanager"

    def __init__(self, host: Host, connection: str) -> None:
        self.host, self.connection = host, connection

    def plan(self, ifname: str, wanted: Mapping[str, object], override: bool) -> PersistPlan:
        plan = PersistPlan(self.name, f"nmcli connection {self.connection}",
                           connection=self.connection)
        for item, value in wanted.items():
            prop = ITEM_KEYS.get(item, (None, None))[1]
            if prop is None:
                plan.unpersisted[item] = "NetworkManager has no property for it"
                continue
            new = shown(normalise(item, value)) if prop.startswith("ethtool.feature") or \
                prop.startswith("ethtool.pause") else str(normalise(item, value))
            have = nm_property(self.host, self.connection, prop)
            if have not in (None, "", "ignore", "-1", "0", "default") and have != new:
                plan.conflicts.append({"item": item, "interface": ifname,
                                       "file": f"NetworkManager connection {self.connection}",
                                       "key": prop, "value": have})
                if not override:
                    continue
            plan.properties[prop] = new
            plan.keys[item] = prop
        return plan


def choose_backend(host: Host, root: str, ifname: str, nm: dict[str, str],
                   systemd: Systemd) -> tuple[Backend, str]:
    """The backend the host itself reads for `ifname`, and why: NetworkManager when it
    manages the device, else the interface's ifcfg file (network-scripts), else its ifupdown
    stanza, else systemd .link (keys gated on the version), else a udev rule."""
    if not root.rstrip("/") and ifname in nm:
        return (NetworkManagerBackend(host, nm[ifname]),
                f"NetworkManager manages {ifname} (connection {nm[ifname]})")
    ifcfg = under(root, f"{distro.IFCFG_DIR}/ifcfg-{ifname}")
    if host.read_bytes(ifcfg) is not None:
        return (distro.NetworkScriptsBackend(host, root, ifcfg, systemd),
                f"{ifcfg} exists: initscripts' ifup reads its ETHTOOL_OPTS and MTU")
    stanza = distro.find_stanza(host, root, ifname)
    if stanza is not None:
        return (distro.IfupdownBackend(host, root, stanza),
                f"{stanza} has an `iface {ifname}` stanza: ifupdown runs its post-up lines")
    if systemd.version is not None or not systemd.known and any(
            host.listdir(under(root, d)) for d in LINK_DIRS):
        return (LinkFileBackend(host, root, systemd),
                f"udev reads .link files ({systemd.source}"
                + (f": systemd {systemd.version})" if systemd.version else ")"))
    return (distro.UdevRuleBackend(host, root),
            f"no NetworkManager, ifcfg-{ifname}, ifupdown stanza or systemd ({systemd.source}):"
            " a udev rule applies it on every device add")


# ---------------------------------------------------------------- sysctl
def sysctl_files(host: Host, root: str) -> list[str]:
    """sysctl.d files in systemd-sysctl's order (later wins), then /etc/sysctl.conf."""
    seen: dict[str, str] = {}
    for d in SYSCTL_DIRS:
        for name in host.listdir(under(root, d)):
            if name.endswith(".conf") and name not in seen:
                seen[name] = f"{under(root, d)}/{name}"
    files = [seen[n] for n in sorted(seen)]
    conf = under(root, "/etc/sysctl.conf")
    if host.exists(conf) and conf not in files:
        files.append(conf)
    return files


def _sysctl_lines(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip().lstrip("-")
        if line and line[0] not in "#;" and "=" in line:
            k, _, v = line.partition("=")
            out[k.strip().replace("/", ".")] = " ".join(v.split())
    return out


def tuned_settings(host: Host, root: str) -> list[tuple[str, str, str]]:
    """(file, item, value) a tuned profile sets: [sysctl] as `sysctl.*`, [net] ethtool words."""
    active = (host.read_text(under(root, "/etc/tuned/active_profile")) or "").split()
    out: list[tuple[str, str, str]] = []
    for prof in active:
        if "/" in prof or prof in (".", ".."):
            continue
        for base in ("/etc/tuned", "/usr/lib/tuned"):
            path = under(root, f"{base}/{prof}/tuned.conf")
            text = host.read_text(path)
            if text is None:
                continue
            for sec, k, v in parse_ini(text):
                if sec == "sysctl":
                    out.append((path, f"sysctl.{k.replace('/', '.')}", v))
                elif sec == "net" and k in ("features", "ring", "pause", "channels"):
                    words = v.replace(",", " ").split()
                    group = {"features": "features", "ring": "ring", "pause": "pause",
                             "channels": "channels"}[k]
                    for w, val in zip(words[::2], words[1::2]):
                        out.append((path, f"{group}.{w}", val))
                elif sec == "net" and k == "txqueuelen":
                    out.append((path, "txqueuelen", v))
            break
    return out


class SysctlBackend:
    """`/etc/sysctl.d/90-hwmgr.conf` (merged with an earlier hwmgr file, sorted by name)."""

    name = "sysctl.d"

    def __init__(self, host: Host, root: str) -> None:
        self.host, self.root = host, root

    def plan(self, wanted: Mapping[str, object], override: bool) -> PersistPlan:
        ours = under(self.root, SYSCTL_FILE)
        plan = PersistPlan(self.name, ours)
        owners = [(f, _sysctl_lines(self.host.read_text(f) or ""))
                  for f in sysctl_files(self.host, self.root) if f != ours]
        tuned = tuned_settings(self.host, self.root)
        lines = _sysctl_lines(self.host.read_text(ours) or "")
        for item, value in wanted.items():
            name = item[len("sysctl."):]
            new = shown(normalise(item, value))
            clash = [(f, v[name]) for f, v in owners if name in v and not same(item, v[name], new)]
            clash += [(f, v) for f, i, v in tuned if i == item and not same(item, v, new)]
            if clash:
                plan.conflicts += [{"item": item, "interface": None, "file": f, "key": name,
                                    "value": v} for f, v in clash]
                if not override:
                    continue
            lines[name] = new
            plan.keys[item] = name
        plan.content = (HEADER + "".join(f"{k} = {v}\n" for k, v in sorted(lines.items()))
                        ).encode()
        return plan


def other_owner_conflicts(host: Host, root: str, ifname: str,
                          wanted: Mapping[str, object]) -> list[Conflict]:
    """Interface items a tuned profile's [net] section sets differently."""
    out: list[Conflict] = []
    for path, item, value in tuned_settings(host, root):
        item = canonical_item(item)
        if item in wanted and not same(item, value, wanted[item]):
            out.append({"item": item, "interface": ifname, "file": path, "key": item,
                        "value": value})
    return out
