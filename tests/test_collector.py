"""hwmgr/fleet/collect.sh (the Python-less collector) under dash and busybox sh.

The script runs against fixture trees (HWMGR_COLLECT_ROOT) with stub ethtool/modinfo/MegaCli
that print the fixture's recorded outputs, and against this machine; `hwmgr inventory --root`
on its archive must report exactly what it reports on the fixture or the live host. PATH
holds only the stubs and the tools the script may use (coreutils or busybox applets, tar,
gzip), so a dependency on anything else fails the test.
"""

from __future__ import annotations

import json
import os
import pty
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.netns import VethLink

from hwmgr.host.capture import COLLECTOR, COLLECTOR_RECORDS, NET_SYSCTLS

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "hwmgr" / "fleet" / "collect.sh"
FIXTURES = REPO / "tests" / "fixtures" / "hosts"
# every external command the script may run, besides the optional host tools
TOOLS = ("mktemp", "mkdir", "mv", "rm", "ln", "tr", "head", "cut", "readlink", "uname", "date",
         "timeout", "tar", "gzip")
BUSYBOX = shutil.which("busybox")
CAT = shutil.which("cat")  # the stubs' own tool: PATH holds only what the script may use
SHELLS = {
    "dash": [shutil.which("dash")] if shutil.which("dash") else None,
    "busybox": [BUSYBOX, "sh"] if BUSYBOX else None,
}


def tool_dir(tmp: Path, flavour: str) -> Path:
    """A bin dir with only TOOLS: links to coreutils/tar/gzip, or to busybox applets."""
    d = tmp / f"tools-{flavour}"
    d.mkdir()
    for name in TOOLS:
        target = BUSYBOX if flavour == "busybox" else shutil.which(name)
        assert target, f"{name} is missing on this machine"
        (d / name).symlink_to(target)
    if flavour == "busybox":
        (d / "sh").symlink_to(BUSYBOX)
    return d


def stub_dir(tmp: Path, fixture: Path, kernel: str) -> Path:
    """ethtool/modinfo/MegaCli stubs that print the fixture's recorded outputs."""
    d = tmp / "stubs"
    d.mkdir()
    cases: dict[str, list[str]] = {}
    for e in json.loads((fixture / "commands" / "index.json").read_text()):
        tool, *args = e["argv"]
        keys = [" ".join(args)]
        if tool == "modinfo":  # the collector asks for the snapshot's kernel explicitly
            keys.append(" ".join(["-k", kernel, *args]))
        out = (f"{CAT} {shlex.quote(str(fixture / e['stdout']))}; " if e.get("stdout")
               else "")
        for key in keys:
            cases.setdefault(tool, []).append(
                f"    {shlex.quote(key)}) {out}exit {e['rc']} ;;")
    for tool, lines in cases.items():
        body = "\n".join(lines)
        (d / tool).write_text(f"#!/bin/sh\ncase \"$*\" in\n{body}\nesac\n"
                              f"echo \"{tool}: stub has no output for: $*\" >&2\nexit 1\n")
        (d / tool).chmod(0o755)
    return d


def collect(shell: list[str], out: Path, *, path: str, root: Path | None = None) -> str:
    """Run the script; returns its stderr. The archive goes to `out`."""
    env = {"PATH": path, "TMPDIR": str(out.parent)}
    if root is not None:
        env["HWMGR_COLLECT_ROOT"] = str(root)
    with open(out, "wb") as fh:
        res = subprocess.run([*shell, str(SCRIPT)], stdout=fh, stderr=subprocess.PIPE,
                             env=env, timeout=300, check=False)
    assert res.returncode == 0, res.stderr.decode()
    return res.stderr.decode()


def findings(root: Path | None, *catalog: str, runner: list[str] | None = None) -> tuple[int, set]:
    """`hwmgr check --json` (of `root`, or this host; inside `runner`, e.g. a namespace): its
    exit code and each finding as (layer, device, interface, item, status, expected, actual)."""
    argv = [*(runner or []), sys.executable, "-m", "hwmgr", "check", "--json", *catalog]
    if root is not None:
        argv += ["--root", str(root)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO,
                         check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode in (0, 5, 11), res.stderr
    data = json.loads(res.stdout)["data"]
    return res.returncode, {
        (f["layer"], f["device"], f["interface"], f["item"], f["status"],
         json.dumps(f["expected"]), json.dumps(f["actual"])) for f in data["findings"]}


def fixture_tree(tmp: Path, root: Path) -> Path:
    """The fixture as a tree the collector reads: its sys/ and proc/sys/net/, and a /proc
    naming the kernel and hostname of its snapshot.json (where the fixture keeps them)."""
    meta = json.loads((root / "snapshot.json").read_text())
    tree = tmp / "root"
    tree.mkdir()
    for entry in root.iterdir():
        if entry.name != "proc":
            (tree / entry.name).symlink_to(entry)
    (tree / "proc/sys/kernel").mkdir(parents=True)
    (tree / "proc/sys/kernel/osrelease").write_text(meta["kernel"] + "\n")
    (tree / "proc/sys/kernel/hostname").write_text(meta["hostname"] + "\n")
    if (root / "proc/sys/net").is_dir():
        (tree / "proc/sys/net").symlink_to(root / "proc/sys/net")
    return tree


def inventory(root: Path | None) -> dict:
    argv = [sys.executable, "-m", "hwmgr", "inventory", "--json"]
    if root is not None:
        argv += ["--root", str(root)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO,
                         check=False)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["data"]


def members(archive: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(archive) as tf:
        return {m.name: m for m in tf.getmembers()}


def read_member(archive: Path, name: str) -> bytes:
    with tarfile.open(archive) as tf:
        f = tf.extractfile(name)
        assert f is not None
        return f.read()


@pytest.fixture(params=[k for k, v in SHELLS.items() if v] or ["none"])
def shell(request: pytest.FixtureRequest) -> tuple[str, list[str]]:
    if request.param == "none":
        pytest.skip("neither dash nor busybox is installed (make apt-test installs them)")
    return request.param, SHELLS[request.param]


# ------------------------------------------------------------------------ fixture hosts
@pytest.mark.slow  # the collector under each shell
@pytest.mark.parametrize("fixture", ["seed000-ustor", "seed002-router"])
def test_fixture_snapshot_inventories_the_same(tmp_path: Path, shell, fixture: str) -> None:
    name, argv = shell
    root = FIXTURES / fixture
    kernel = json.loads((root / "snapshot.json").read_text())["kernel"]
    tree = fixture_tree(tmp_path, root)
    path = f"{stub_dir(tmp_path, root, kernel)}:{tool_dir(tmp_path, name)}"
    out = tmp_path / "snap.tar.gz"
    collect(argv, out, path=path, root=tree)

    want, got = inventory(root), inventory(out)
    assert got["host"] == want["host"]
    assert got["devices"] == want["devices"] and got["devices"]
    assert got["interfaces"] == want["interfaces"]
    assert got["notes"] == want["notes"]
    index = json.loads(read_member(out, "hwmgr-snapshot/commands/index.json"))
    recorded = json.loads((root / "commands" / "index.json").read_text())
    # exactly the tools that exist (the stubs); ip and lspci are absent, so not recorded
    assert {e["argv"][0] for e in index} == {e["argv"][0] for e in recorded}
    assert {tuple(e["argv"]) for e in recorded if e["argv"][0] == "ethtool"} <= {
        tuple(e["argv"]) for e in index}
    drivers = {d["pci_driver"] for d in want["devices"] if d["pci_driver"]}
    if "modinfo" in {e["argv"][0] for e in recorded}:
        assert {tuple(e["argv"]) for e in index if e["argv"][0] == "modinfo"} >= {
            ("modinfo", "-k", kernel, drv) for drv in drivers}


@pytest.mark.slow  # the collector under each shell, then three checks
@pytest.mark.parametrize("fixture", ["seed002-before", "seed002-after", "seed000-ustor"])
def test_fixture_collector_checks_like_the_host(tmp_path: Path, shell, fixture: str) -> None:
    """Parity, fixture host × collector: `check --root` of the collector's archive gives the
    findings (status, expected, actual) and exit code of `check --root` on the host itself
    (the fixture tree, its tools answering what they printed on the real host)."""
    name, argv = shell
    root = FIXTURES / fixture
    kernel = json.loads((root / "snapshot.json").read_text())["kernel"]
    path = f"{stub_dir(tmp_path, root, kernel)}:{tool_dir(tmp_path, name)}"
    out = tmp_path / "snap.tar.gz"
    collect(argv, out, path=path, root=fixture_tree(tmp_path, root))
    want, got = findings(root), findings(out)
    assert got == want and want[1]
    meta = json.loads(read_member(out, "hwmgr-snapshot/snapshot.json"))
    assert meta["records"] == sorted(COLLECTOR_RECORDS) and meta["collector"] == COLLECTOR
    assert meta["sysctls"] == list(NET_SYSCTLS)


@pytest.mark.slow  # a real download or gpg/collector run of a few seconds: the slow lane
def test_seed000_raid_firmware_comes_from_megacli(tmp_path: Path) -> None:
    """seed 000's MegaRAID has no firmware in sysfs: the recorded MegaCli output supplies it."""
    argv = SHELLS["dash"] or SHELLS["busybox"]
    if argv is None:
        pytest.skip("dash or busybox needed")
    root = FIXTURES / "seed000-ustor"
    path = f"{stub_dir(tmp_path, root, 'x')}:{tool_dir(tmp_path, 'coreutils')}"
    out = tmp_path / "snap.tar.gz"
    collect(argv, out, path=path, root=root)
    raid = [d for d in inventory(out)["devices"] if d["class"] == "0104"]
    assert raid and raid[0]["firmware_version"] and raid[0]["firmware_source"] == "MegaCli"


@pytest.mark.slow  # a collector run of a few seconds: the slow lane
def test_plan_on_a_collector_archive_says_what_the_collector_cannot_record(
        tmp_path: Path) -> None:
    """`plan --root` of a real collector archive: what the collector never records (kernel
    headers, Secure Boot) is unknown (11) and said so, with advice a host without Python can
    read truthfully, never "retake it with hwmgr ≥ ..."."""
    argv = SHELLS["dash"] or SHELLS["busybox"]
    if argv is None:
        pytest.skip("dash or busybox needed")
    root = FIXTURES / "seed000-ustor"
    kernel = json.loads((root / "snapshot.json").read_text())["kernel"]
    path = f"{stub_dir(tmp_path, root, kernel)}:{tool_dir(tmp_path, 'coreutils')}"
    out = tmp_path / "snap.tar.gz"
    collect(argv, out, path=path, root=fixture_tree(tmp_path, root))
    res = subprocess.run([sys.executable, "-m", "hwmgr", "plan", "upgrade", "be2net", "--to",
                          "10.2.470.14", "--force", "--json", "--root", str(out)], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=False,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    unread = [r["reason"] for r in json.loads(res.stdout)["data"]["refusals"]
              if r["code"] == 11]
    assert len(unread) == 2, res.stdout
    assert "kernel headers listing" in unread[0] and "Secure Boot state" in unread[1]
    assert all("the shell collector does not record it" in r and "retake" not in r
               for r in unread)
    assert "retake" not in res.stderr


# ------------------------------------------------------------------------ this machine
@pytest.mark.slow  # the collector under each shell
def test_live_snapshot_inventories_the_same(tmp_path: Path, shell) -> None:
    name, argv = shell
    if not Path("/sys/bus/pci/devices").is_dir():
        pytest.skip("no PCI bus on this machine")
    bins = tmp_path / "host-tools"
    bins.mkdir()
    for tool in ("ethtool", "modinfo", "ip", "lspci"):
        found = shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin")
        if found:
            (bins / tool).symlink_to(found)
    out = tmp_path / "live.tar.gz"
    collect(argv, out, path=f"{bins}:{tool_dir(tmp_path, name)}")
    want, got = inventory(None), inventory(out)
    assert got["host"] == want["host"]
    assert got["devices"] == want["devices"]
    assert got["interfaces"] == want["interfaces"]
    names = members(out)
    assert all(not m.islnk() and (m.isfile() or m.isdir() or m.issym())
               for m in names.values())
    assert "hwmgr-snapshot/proc/sys/net/ipv4/tcp_rmem" in names
    assert "hwmgr-snapshot/proc/sys/net/core/rmem_max" in names
    tcp = read_member(out, "hwmgr-snapshot/proc/sys/net/ipv4/tcp_rmem")
    assert tcp == Path("/proc/sys/net/ipv4/tcp_rmem").read_bytes()
    for iface in want["interfaces"]:
        assert f"hwmgr-snapshot/sys/class/net/{iface['name']}/mtu" in names


@pytest.mark.slow  # the collector under each shell, a snapshot and three checks
def test_live_check_snapshot_and_collector_agree(tmp_path: Path, shell) -> None:
    """Parity on this machine: check live, check --root of `hwmgr snapshot`, check --root of
    the collector's archive (made by `hwmgr collect-script` for the catalog in force)."""
    name, argv = shell
    bins = tmp_path / "host-tools"
    bins.mkdir()
    for tool in ("ethtool", "modinfo", "ip", "lspci"):
        found = shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin")
        if found:
            (bins / tool).symlink_to(found)
    script = tmp_path / "collect.sh"
    script.write_text(subprocess.run([sys.executable, "-m", "hwmgr", "collect-script"],
                                     capture_output=True, text=True, cwd=REPO, check=True,
                                     timeout=60).stdout)
    out = tmp_path / "live.tar.gz"
    env = {"PATH": f"{bins}:{tool_dir(tmp_path, name)}", "TMPDIR": str(tmp_path)}
    with open(out, "wb") as fh:
        subprocess.run([*argv, str(script)], stdout=fh, env=env, timeout=300, check=True)
    snap = tmp_path / "snap"
    subprocess.run([sys.executable, "-m", "hwmgr", "snapshot", str(snap)], cwd=REPO,
                   capture_output=True, timeout=120, check=True)
    live = findings(None)
    assert findings(snap) == live
    assert findings(out) == live
    assert live[0] in (0, 5)  # this machine is fully readable


@pytest.mark.slow  # a veth pair in namespaces, the collector under each shell
def test_veth_namespace_check_snapshot_and_collector_agree(tmp_path: Path, shell,
                                                           veth: VethLink) -> None:
    """Parity on a live veth host (side a of a pair, in its own network namespace), with a
    site catalog that governs veth: drift and unsupported items alike on all paths."""
    name, argv = shell
    catalogs = ["--catalog", str(REPO / "catalogs"),
                "--catalog", str(FIXTURES.parent / "catalogs/good/site-veth.json")]
    bins = tmp_path / "host-tools"
    bins.mkdir()
    for tool in ("ethtool", "ip"):
        (bins / tool).symlink_to(shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin"))
    script = tmp_path / "collect.sh"
    script.write_text(subprocess.run([sys.executable, "-m", "hwmgr", "collect-script",
                                      *catalogs], capture_output=True, text=True, cwd=REPO,
                                     check=True, timeout=60).stdout)
    ns = veth.argv(veth.ns_a, [])  # ip netns exec NS
    out, snap = tmp_path / "veth.tar.gz", tmp_path / "snap"
    with open(out, "wb") as fh:
        subprocess.run([*ns, "env", "-i", f"PATH={bins}:{tool_dir(tmp_path, name)}",
                        f"TMPDIR={tmp_path}", *argv, str(script)], stdout=fh, timeout=300,
                       check=True)
    subprocess.run([*ns, sys.executable, "-m", "hwmgr", "snapshot", *catalogs, str(snap)],
                   cwd=REPO, capture_output=True, timeout=120, check=True)
    live = findings(None, *catalogs, runner=ns)
    statuses = {f[4] for f in live[1] if f[2] == veth.if_a}
    assert live[0] == 5 and {"drift", "unsupported"} <= statuses
    assert findings(snap, *catalogs) == live
    assert findings(out, *catalogs) == live


@pytest.mark.slow  # two collectors printed and run, two checks
def test_collector_for_another_catalog_names_the_sysctl_it_lacks(tmp_path: Path) -> None:
    """A site rule on a sysctl outside the fixed list: the collector made for that catalog
    copies it (judged like live); one made without it says it lacks exactly that sysctl."""
    sh = SHELLS["dash"] or SHELLS["busybox"]
    if sh is None:
        pytest.skip("dash or busybox needed")
    site = tmp_path / "site.json"
    site.write_text(json.dumps({"sysctl": [{"name": "net.ipv4.tcp_fastopen", "value": 1,
                                            "evidence": "site policy (test)"}]}))
    root = FIXTURES / "seed002-after"
    tree = fixture_tree(tmp_path, root)
    (tree / "proc/sys/net").unlink()
    shutil.copytree(root / "proc/sys/net", tree / "proc/sys/net")
    (tree / "proc/sys/net/ipv4/tcp_fastopen").write_text("3\n")
    path = f"{stub_dir(tmp_path, root, 'x')}:{tool_dir(tmp_path, 'coreutils')}"
    outs = {}
    for made_for in ([], ["--site-catalog", str(site)]):
        script = tmp_path / f"collect{len(made_for)}.sh"
        script.write_text(subprocess.run(
            [sys.executable, "-m", "hwmgr", "collect-script", *made_for], capture_output=True,
            text=True, cwd=REPO, check=True, timeout=60).stdout)
        out = outs[len(made_for)] = tmp_path / f"snap{len(made_for)}.tar.gz"
        with open(out, "wb") as fh:
            subprocess.run([*sh, str(script)], stdout=fh, timeout=300, check=True,
                           env={"PATH": path, "HWMGR_COLLECT_ROOT": str(tree),
                                "TMPDIR": str(tmp_path)})
    argv = ["check", "--json", "--layer", "sysctl", "--site-catalog", str(site), "--root"]
    for n, (status, actual) in ((2, ("drift", 3)), (0, ("unknown", None))):
        res = subprocess.run([sys.executable, "-m", "hwmgr", *argv, str(outs[n])], cwd=REPO,
                             capture_output=True, text=True, timeout=60, check=False)
        fo = {f["item"]: f for f in json.loads(res.stdout)["data"]["findings"]}[
            "sysctl.net.ipv4.tcp_fastopen"]
        assert (fo["status"], fo["actual"]) == (status, actual)
    assert res.returncode == 11
    assert "did not record net.ipv4.tcp_fastopen" in fo["reason"]
    assert "hwmgr collect-script --site-catalog" in fo["reason"]
    assert "retake it with hwmgr" not in fo["reason"]


# ------------------------------------------------------------------------ hostile input
def test_hostile_names_are_escaped_or_skipped(tmp_path: Path, shell) -> None:
    name, argv = shell
    root = tmp_path / "root"
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/hostname").write_bytes(b'ev"il\\host\x1b[31m\t\xff\n')
    (root / "proc/sys/kernel/osrelease").write_text("3.10.0-957.el7.x86_64\n")
    dev = root / "sys/bus/pci/devices/0000:01:00.0"
    (dev / "net/eth0").mkdir(parents=True)
    (dev / "net/bad name").mkdir(parents=True)
    (root / "sys/bus/pci/devices/..evil").mkdir()
    for attr, val in (("vendor", "0x8086"), ("device", "0x1528"), ("class", "0x020000")):
        (dev / attr).write_text(val + "\n")
    for ifname in ("eth0", "bad name", '"quote'):
        (root / "sys/class/net" / ifname).mkdir(parents=True)
        (root / "sys/class/net" / ifname / "mtu").write_text("1500\n")
    out = tmp_path / "snap.tar.gz"
    collect(argv, out, path=str(tool_dir(tmp_path, name)), root=root)
    meta = json.loads(read_member(out, "hwmgr-snapshot/snapshot.json"))
    assert meta["hostname"] == 'ev"il\\host[31m'  # control characters and non-ASCII dropped
    assert meta["format"] == "hwmgr-snapshot" and meta["version"] == 1
    names = members(out)
    assert "hwmgr-snapshot/sys/class/net/eth0/mtu" in names
    assert not [n for n in names if "bad name" in n or '"quote' in n or "..evil" in n]
    data = inventory(out)
    assert data["host"]["hostname"] == 'ev"il\\host[31m'
    assert [d["interfaces"] for d in data["devices"]] == [["eth0"]]


def test_json_escaping_of_command_arguments(tmp_path: Path, shell) -> None:
    """argv strings in commands/index.json go through the same escaping (a stub prints its
    argv; the kernel release, passed to modinfo -k, carries the hostile characters)."""
    name, argv = shell
    root = tmp_path / "root"
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_bytes(b'5.14"\\x\x07y\n')
    dev = root / "sys/bus/pci/devices/0000:01:00.0"
    dev.mkdir(parents=True)
    (root / "sys/bus/pci/drivers/ixgbe").mkdir(parents=True)
    (dev / "driver").symlink_to("../../drivers/ixgbe")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "modinfo").write_text('#!/bin/sh\nprintf "%s|" "$@"\n')
    (stubs / "modinfo").chmod(0o755)
    out = tmp_path / "snap.tar.gz"
    collect(argv, out, path=f"{stubs}:{tool_dir(tmp_path, name)}", root=root)
    index = json.loads(read_member(out, "hwmgr-snapshot/commands/index.json"))
    assert index == [{"argv": ["modinfo", "-k", '5.14"\\xy', "ixgbe"], "rc": 0,
                      "stdout": "commands/001-modinfo-k-5.14-x-y-ixgbe.txt"}]
    printed = read_member(out, "hwmgr-snapshot/commands/001-modinfo-k-5.14-x-y-ixgbe.txt")
    assert printed == b'-k|5.14"\\x\x07y|ixgbe|'  # the command got the real (unstripped) value


def test_refuses_to_write_the_archive_to_a_terminal(tmp_path: Path) -> None:
    sh = SHELLS["dash"] or SHELLS["busybox"]
    if sh is None:
        pytest.skip("dash or busybox needed")
    master, slave = pty.openpty()
    try:
        res = subprocess.run([*sh, str(SCRIPT)], stdout=slave, stderr=subprocess.PIPE,
                             timeout=60, check=False, env={"PATH": os.environ["PATH"]})
    finally:
        os.close(slave)
        os.close(master)
    assert res.returncode == 1 and b"redirect it to a file" in res.stderr


# ------------------------------------------------------------------------ the script itself
@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck_clean() -> None:
    res = subprocess.run(["shellcheck", "-s", "sh", str(SCRIPT)], capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stdout


def test_shipped_sysctl_list_is_the_snapshots() -> None:
    """The shipped script copies capture.NET_SYSCTLS (the verb writes the same block)."""
    from hwmgr.commands.collect_script import script_text

    assert script_text([]) == SCRIPT.read_text()
    assert "net.ipv4.tcp_fastopen" in script_text(["net.ipv4.tcp_fastopen"])


def test_one_copy_shipped_and_printed_by_the_verb() -> None:
    link = REPO / "contrib" / "collector" / "hwmgr-collect.sh"
    assert link.is_symlink() and link.resolve() == SCRIPT.resolve()
    res = subprocess.run([sys.executable, "-m", "hwmgr", "collect-script"], capture_output=True,
                         timeout=60, cwd=REPO, check=False)
    assert res.returncode == 0 and res.stdout == SCRIPT.read_bytes()
    res = subprocess.run([sys.executable, "-m", "hwmgr", "collect-script", "--json"],
                         capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert json.loads(res.stdout)["data"]["script"] == SCRIPT.read_text()
