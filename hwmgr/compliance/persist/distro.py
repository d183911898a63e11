"""The persistence backends of hosts without NetworkManager or a new enough systemd:
RHEL/CentOS network-scripts (`ETHTOOL_OPTS` and `MTU` in ifcfg-IF), Debian ifupdown
(`post-up` lines in the interface's stanza), and a udev rule for whatever nothing else carries.

Also what the host runs: `systemd_version` (from `systemctl --version`, else the distribution's
release via `keys.DISTRO_SYSTEMD`). Files are edited in place: only the lines hwmgr
owns change, every other byte is kept, and revert puts the backed-up file back.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Mapping

from hwmgr.compliance.persist.keys import DISTRO_SYSTEMD, ETHTOOL_FLAG, ETHTOOL_LONG
from hwmgr.compliance.persist.model import HEADER, PersistPlan, under
from hwmgr.compliance.read import canonical_item
from hwmgr.compliance.setters import LINK_ITEMS, normalise, shown
from hwmgr.host import capture
from hwmgr.host.seam import Host

IFCFG_DIR = "/etc/sysconfig/network-scripts"
INTERFACES = "/etc/network/interfaces"
INTERFACES_D = "/etc/network/interfaces.d"
UDEV_RULE = "/etc/udev/rules.d/70-hwmgr-{}.rules"
MARK = "# hwmgr apply: the settings below; `hwmgr revert` restores this file"
# ifupdown: the words that start a new stanza (interfaces(5))
_STANZA = re.compile(r"\s*(iface|mapping|auto|allow-\S+|source|source-directory|"
                     r"rename|no-auto-down|no-scripts)\b")


@dataclass(frozen=True)
class Systemd:
    """The host's systemd: its version (None: no systemd, or unknown) and where that came from."""

    version: int | None
    known: bool
    source: str


def _os_release(host: Host, root: str) -> tuple[str, str] | None:
    rh = host.read_text(under(root, "/etc/redhat-release"))
    if rh:
        m = re.search(r"release (\d+)", rh)
        return ("el", m.group(1)) if m else None
    text = host.read_text(under(root, "/etc/os-release")) or ""
    fields = dict(re.findall(r'^(ID|VERSION_ID)="?([^"\n]*)"?$', text, re.M))
    if "ID" not in fields:
        return None
    ver = fields.get("VERSION_ID", "")
    return fields["ID"], ver if fields["ID"] == "ubuntu" else ver.split(".")[0]


def _from_release(rel: tuple[str, str]) -> Systemd:
    ver = DISTRO_SYSTEMD[rel]
    name = f"{'EL' if rel[0] == 'el' else rel[0]} {rel[1]}"
    return Systemd(ver, True, f"{name} ships " + (f"systemd {ver}" if ver else "no systemd"))


def systemd_version(host: Host, root: str) -> Systemd:
    """The systemd that will read the files: an image's release under a persist root, else
    `systemctl --version` (live, or recorded in the snapshot), else the release's systemd
    (snapshots that did not record it), else unknown."""
    image = _os_release(host, root) if root.rstrip("/") else None
    if image in DISTRO_SYSTEMD:
        return _from_release(image)
    if host.live or not capture.lacks(host, capture.SYSTEMD):
        res = host.run(list(capture.SYSTEMCTL_VERSION_ARGV), timeout=capture.TIMEOUT)
        m = re.match(r"systemd (\d+)", res.stdout) if res.ok else None
        if m:
            return Systemd(int(m.group(1)), True, "systemctl --version")
    rel = _os_release(host, root)
    if rel in DISTRO_SYSTEMD:
        return _from_release(rel)
    return Systemd(None, False, "systemd version unknown")


# ---------------------------------------------------------------- ethtool words
def ethtool_words(ifname: str, item: str, value: object) -> tuple[str, str, str]:
    """(flag, key, value) of one item as `ethtool FLAG IF key value` spells it."""
    group, _, key = item.partition(".")
    return ETHTOOL_FLAG[group], key, shown(normalise(item, value))


def _item_of(flag: str, key: str) -> str | None:
    group = {v: k for k, v in ETHTOOL_FLAG.items()}.get(ETHTOOL_LONG.get(flag, flag))
    return canonical_item(f"{group}.{key}") if group else None


def split_ethtool_opts(value: str) -> list[list[str]]:
    """ETHTOOL_OPTS as initscripts' `ethtool_set` (network-scripts/network-functions, the same
    in EL6's 9.03 and EL7's 9.49) runs it: with IFS=';' bash splits the groups (an empty
    group between two ';' stays, a trailing empty one does not), each is then word-split on
    blanks; a group containing '-' anywhere (`[[ "${opts}" =~ [[:space:]]*- ]]` is
    unanchored) is run as `ethtool GROUP`, any other as `ethtool -s $REALDEVICE GROUP`.
    Returns each call's argv after `ethtool`."""
    groups = value.split(";")
    if groups and groups[-1] == "":
        groups.pop()
    return [group.split() if "-" in group else ["-s", "$DEVICE", *group.split()]
            for group in groups]


def _merge_groups(ifname: str, groups: list[list[str]],
                  wanted: dict[str, tuple[str, str, str]]) -> list[list[str]]:
    """`groups` with each wanted (flag, key, value) set: in the device's existing group for
    that flag when there is one, else in a new `FLAG IF key value` group."""
    left = dict(wanted)
    out = []
    for g in groups:
        g = list(g)
        flag = ETHTOOL_LONG.get(g[0], g[0])
        if len(g) >= 2 and g[1] == ifname and flag in ETHTOOL_FLAG.values():
            pairs = list(zip(g[2::2], g[3::2]))
            for i, (k, _) in enumerate(pairs):
                item = _item_of(flag, k)
                if item in left:
                    pairs[i] = (k, left.pop(item)[2])
            for item, (f, k, v) in list(left.items()):
                if f == flag:
                    pairs.append((k, v))
                    del left[item]
            g = [g[0], g[1], *[w for p in pairs for w in p]]
        out.append(g)
    by_flag: dict[str, list[str]] = {}
    for f, k, v in left.values():
        by_flag.setdefault(f, []).extend([k, v])
    out += [[f, ifname, *kv] for f, kv in by_flag.items()]
    return out


def _replace_line(text: str, key: str, value: str) -> str:
    """`text` with the last `KEY=` line set to `KEY=value` (appended when absent)."""
    lines = text.splitlines(keepends=True)
    at = [i for i, ln in enumerate(lines) if re.match(rf"\s*{key}=", ln)]
    new = f"{key}={value}"
    if at:
        eol = lines[at[-1]][len(lines[at[-1]].rstrip("\r\n")):] or "\n"
        lines[at[-1]] = new + eol
        return "".join(lines)
    if text and not text.endswith("\n"):
        text += "\n"
    return text + new + "\n"


def _shell_value(text: str, key: str) -> str | None:
    """The value of the last `KEY=` assignment of a sourced shell file (None when absent)."""
    found = None
    for ln in text.splitlines():
        m = re.match(rf"\s*{key}=(.*)$", ln)
        if m:
            words = shlex.split(m.group(1), comments=True)
            found = " ".join(words)
    return found


class NetworkScriptsBackend:
    """RHEL/CentOS initscripts: `ETHTOOL_OPTS` (ring, pause, channels, features) and `MTU` in
    the interface's existing ifcfg file; `ifup` applies them at boot and on `ifup IF`."""

    name = "network-scripts"

    def __init__(self, host: Host, root: str, path: str, systemd: Systemd) -> None:
        self.host, self.root, self.target, self.systemd = host, root, path, systemd

    def plan(self, ifname: str, wanted: Mapping[str, object], override: bool) -> PersistPlan:
        plan = PersistPlan(self.name, self.target)
        if self.systemd.version is not None or not self.systemd.known:
            # EL6's initscripts (9.03) ran ifup from net.hotplug on every add; EL7's (9.49)
            # dropped net.hotplug, so only boot and `ifup IF` read the file there
            plan.not_on_add = "initscripts without net.hotplug re-read ifcfg only on ifup"
        text = self.host.read_text(self.target) or ""
        try:
            current = _shell_value(text, "ETHTOOL_OPTS") or ""
        except ValueError:
            plan.refusals.append(f"{self.target}: ETHTOOL_OPTS is not one shell word; "
                                 "fix its quoting first")
            return plan
        opts: dict[str, tuple[str, str, str]] = {}
        for item, value in wanted.items():
            if item == "mtu":
                text = _replace_line(text, "MTU", str(normalise(item, value)))
                plan.keys[item] = "MTU"
            elif item.split(".", 1)[0] in ETHTOOL_FLAG:
                opts[item] = ethtool_words(ifname, item, value)
                plan.keys[item] = "ETHTOOL_OPTS"
            else:
                plan.unpersisted[item] = ("initscripts has no ifcfg key for it (ifup-eth reads "
                                          "MTU and ETHTOOL_OPTS only)")
        if opts:
            calls = [g for g in split_ethtool_opts(current) if g[2:] or g[:2] != ["-s", "$DEVICE"]]
            groups = _merge_groups(ifname, [g for g in calls if g[:2] != ["-s", "$DEVICE"]], opts)
            plain = [g[2:] for g in calls if g[:2] == ["-s", "$DEVICE"]]
            value = "; ".join([" ".join(g) for g in plain] + [" ".join(g) for g in groups])
            text = _replace_line(text, "ETHTOOL_OPTS", shlex.quote(value) if "'" in value
                                 else f'"{value}"')
        plan.content = text.encode()
        return plan


# ---------------------------------------------------------------- ifupdown
def interfaces_files(host: Host, root: str) -> list[str]:
    """/etc/network/interfaces and the files of /etc/network/interfaces.d, in ifupdown's
    order (the `source-directory` Debian ships by default)."""
    d = under(root, INTERFACES_D)
    files = [under(root, INTERFACES)]
    files += [f"{d}/{n}" for n in host.listdir(d, re.compile(r"[A-Za-z0-9_-]+"))]
    return [f for f in files if host.read_bytes(f) is not None]


def find_stanza(host: Host, root: str, ifname: str) -> str | None:
    """The file holding `iface IF ...`, or None."""
    pat = re.compile(rf"^\s*iface\s+{re.escape(ifname)}\s", re.M)
    for f in interfaces_files(host, root):
        if pat.search(host.read_text(f) or ""):
            return f
    return None


def _command(ifname: str, item: str, value: object) -> str:
    if item in LINK_ITEMS:
        return f"/sbin/ip link set dev {ifname} {item} {shown(normalise(item, value))}"
    flag, key, v = ethtool_words(ifname, item, value)
    return f"/sbin/ethtool {flag} {ifname} {key} {v}"


def _post_up_item(line: str, ifname: str) -> str | None:
    words = line.split()
    if words[:1] != ["post-up"]:
        return None
    w = words[1:]
    if len(w) >= 6 and w[0].endswith("/ip") and w[1:4] == ["link", "set", "dev"] \
            and w[4] == ifname:
        return w[5]
    if len(w) >= 5 and w[0].endswith("/ethtool") and w[2] == ifname:
        return _item_of(w[1], w[3])
    return None


class IfupdownBackend:
    """Debian ifupdown: `post-up` lines at the end of the interface's `iface` stanza, after a
    marker comment; ifup runs them at boot, on `ifup IF` and, for `allow-hotplug`
    interfaces, on device add. `|| true`: a refused value must not fail the interface."""

    name = "ifupdown"

    def __init__(self, host: Host, root: str, path: str) -> None:
        self.host, self.root, self.target = host, root, path

    def plan(self, ifname: str, wanted: Mapping[str, object], override: bool) -> PersistPlan:
        plan = PersistPlan(self.name, self.target)
        lines = (self.host.read_text(self.target) or "").splitlines(keepends=True)
        hotplug = re.compile(rf"\s*allow-hotplug\s(.*\s)?{re.escape(ifname)}(\s|$)")
        if not any(hotplug.match(ln) for f in interfaces_files(self.host, self.root)
                   for ln in (self.host.read_text(f) or "").splitlines()):
            plan.not_on_add = f"ifupdown runs ifup on device add only for allow-hotplug {ifname}"
        start = next(i for i, ln in enumerate(lines)
                     if re.match(rf"\s*iface\s+{re.escape(ifname)}\s", ln))
        end = next((i for i in range(start + 1, len(lines)) if _STANZA.match(lines[i])),
                   len(lines))
        while end > start + 1 and (not lines[end - 1].strip()
                                   or lines[end - 1].lstrip().startswith("#")
                                   and lines[end - 1].strip() != MARK):
            end -= 1  # blank lines and others' comments before the next stanza stay there
        keep = []
        ours: dict[str, str] = {}
        in_block = False
        for ln in lines[start + 1:end]:
            if ln.strip() == MARK:
                in_block = True
                continue
            item = _post_up_item(ln, ifname) if in_block else None
            if item is not None:
                ours[item] = ln.strip()
                continue
            in_block = False
            keep.append(ln)
        for item, value in wanted.items():
            group = item.split(".", 1)[0]
            if item not in LINK_ITEMS and group not in ETHTOOL_FLAG:
                plan.unpersisted[item] = "no ifupdown option sets it"
                continue
            ours[item] = f"post-up {_command(ifname, item, value)} || true"
            plan.keys[item] = "post-up"
        indent = re.match(r"\s*", keep[0]).group(0) if keep else "    "  # type: ignore[union-attr]
        block = [f"{indent}{MARK}\n"] + [f"{indent}{v}\n" for v in ours.values()]
        if keep and not keep[-1].endswith("\n"):
            keep[-1] += "\n"
        head = lines[start] if lines[start].endswith("\n") else lines[start] + "\n"
        lines[start:end] = [head, *keep, *block]
        plan.content = "".join(lines).encode()
        return plan


# ---------------------------------------------------------------- udev rule fallback
class UdevRuleBackend:
    """`/etc/udev/rules.d/70-hwmgr-IF.rules`: on every `add` of the device (boot, driver
    reload, hot plug) udev sets tx_queue_len/mtu as attributes and runs ethtool for the rest."""

    name = "udev-rule"

    def __init__(self, host: Host, root: str) -> None:
        self.host, self.root = host, root

    def path(self, ifname: str) -> str:
        return under(self.root, UDEV_RULE.format(ifname))

    def plan(self, ifname: str, wanted: Mapping[str, object], override: bool) -> PersistPlan:
        target = self.path(ifname)
        plan = PersistPlan(self.name, target)
        base = f"/sys/class/net/{ifname}"
        mac = (self.host.read_attr(f"{base}/address") or "").lower()
        permanent = (self.host.read_attr(f"{base}/addr_assign_type") or "0") == "0"
        match = (f'ACTION=="add", SUBSYSTEM=="net", ATTR{{address}}=="{mac}"'
                 if mac and permanent else f'ACTION=="add", SUBSYSTEM=="net", KERNEL=="{ifname}"')
        old = (self.host.read_text(target) or "").splitlines()
        rules: dict[str, str] = {}
        for ln in old:
            m = re.search(r'ATTR\{(tx_queue_len|mtu)\}="', ln) or re.search(
                r'RUN\+="\S*ethtool (\S+) \$name (\S+) ', ln)
            if m and m.re.groups == 1:
                rules["txqueuelen" if m.group(1) == "tx_queue_len" else "mtu"] = ln
            elif m:
                rules[_item_of(m.group(1), m.group(2)) or ln] = ln
        for item, value in wanted.items():
            v = shown(normalise(item, value))
            if item in LINK_ITEMS:
                attr = "tx_queue_len" if item == "txqueuelen" else "mtu"
                rules[item] = f'{match}, ATTR{{{attr}}}="{v}"'
            elif item.split(".", 1)[0] in ETHTOOL_FLAG:
                flag, key, v = ethtool_words(ifname, item, value)
                rules[item] = f'{match}, RUN+="/sbin/ethtool {flag} $name {key} {v}"'
            else:
                plan.unpersisted[item] = "no udev rule sets it"
                continue
            plan.keys[item] = "udev rule"
        plan.content = (HEADER + "".join(f"{r}\n" for r in rules.values())).encode()
        return plan


__all__ = ["Systemd", "systemd_version", "split_ethtool_opts", "NetworkScriptsBackend",
           "IfupdownBackend", "UdevRuleBackend", "find_stanza", "interfaces_files"]
