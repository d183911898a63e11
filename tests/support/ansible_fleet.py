"""A generated fleet on this one machine for the hwmgr.fleet Ansible tests and bench/fleet.

Each live "host" is a network namespace `hwf-<pid>-<n>` of its own with a veth pair (`v0`,
`v1`) and its own net.* sysctls, reached with `ansible_connection=local` and an
`ansible_python_interpreter` wrapper that runs Python inside the namespace; old hosts get
a shell wrapper for the POSIX collector instead; a real `sshd` on 127.0.0.1 (own host key,
own authorized key, own config in the temporary directory) reaches some of the same kind
of namespaces over SSH; snapshot hosts point `hwmgr_root` at fixture trees; unreachable
hosts are SSH hosts on a port nobody listens on. `Fleet.teardown()` removes every namespace
and stops sshd, and is safe to call twice.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIXTURE_HOSTS = REPO / "tests" / "fixtures" / "hosts"
COLLECTION = REPO / "ansible_collections" / "hwmgr" / "fleet"
BIN = Path(sys.executable).parent
IP = shutil.which("ip") or "/usr/sbin/ip"
SSHD = "/usr/sbin/sshd"
_FLEETS = itertools.count(1)
TXQ_WANTED = 1000  # the site layer's veth txqueuelen (the kernel's default for veth)
TXQ_DRIFTED = 500

# a partial site catalog layer (no header: it is layered over the host's own catalog, whose
# rules and verdicts still apply): governs veth by driver name, wants TCP window scaling on,
# and adds one PCI ID to ixgbe (issue 38: that must leave ixgbe's other devices, and every
# host's verdicts, as they were)
SITE_DEVICE = {"vendor": "8086", "device": "1fff", "name": "a PCI ID this site adds to ixgbe"}
SITE_CATALOG = {
    "drivers": {
        "ixgbe": {"devices": [SITE_DEVICE]},
        "veth": {
            "version_scheme": "driver",
            "description": "virtual Ethernet pairs in the test namespaces",
            "netdev_drivers": ["veth"],
            "devices": [],
            "versions": {},
            "settings": {"txqueuelen": TXQ_WANTED,
                         "evidence": "test site layer: the kernel's veth default"},
        }
    },
    "sysctl": [
        {"name": "net.ipv4.tcp_window_scaling", "value": 1,
         "evidence": "seed 003: large windows need window scaling"},
    ],
}


def sh(argv: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run a setup command; raise with its stderr when `check` and it fails."""
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: rc {res.returncode}: {res.stderr.strip()}")
    return res


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_exec(path: Path, text: str) -> Path:
    """An executable script."""
    path.write_text(text)
    path.chmod(0o755)
    return path


@dataclass
class Fleet:
    """Hosts for an inventory, plus what must be removed afterwards."""

    tmp: Path
    # unique per instance too: a test may hold two fleets at once
    prefix: str = field(default_factory=lambda: f"hwf-{os.getpid()}-{next(_FLEETS)}")
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    expected: dict[str, str] = field(default_factory=dict)  # host -> report status
    namespaces: list[str] = field(default_factory=list)
    sshd: subprocess.Popen | None = None
    ssh_port: int = 0
    timing_log: Path | None = None  # bench/fleet: wrappers log "what start_ns end_ns rc"
    # each host its own user cache directory, empty at first, as a real host's is (the
    # catalog's passed schema check is cached there once per catalog version); else the
    # hosts share this machine's, and only the first pays the cold check
    own_cache: bool = False
    _n: int = 0

    def __post_init__(self) -> None:
        self.bin = self.tmp / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        # hwmgr as installed on every "host": this checkout's package, the test venv's Python
        env = f"PYTHONPATH={REPO}${{PYTHONPATH:+:$PYTHONPATH}}"
        if self.timing_log is None:
            text = f'#!/bin/sh\n{env} exec {sys.executable} -m hwmgr "$@"\n'
        else:  # bench/fleet: wall and CPU time of every hwmgr process (wait4's rusage)
            text = (f"#!{sys.executable} -S\nimport os, sys, time\n"
                    f"os.environ['PYTHONPATH'] = {str(REPO)!r}\n"
                    "t = time.monotonic_ns()\npid = os.fork()\nif pid == 0:\n"
                    f"    os.execv({sys.executable!r}, [{sys.executable!r}, '-m', 'hwmgr',"
                    " *sys.argv[1:]])\n"
                    "_, status, ru = os.wait4(pid, 0)\nrc = os.waitstatus_to_exitcode(status)\n"
                    f"with open({str(self.timing_log)!r}, 'a') as fh:\n"
                    "    fh.write(f'hwmgr-{sys.argv[1]} {t} {time.monotonic_ns()} {rc} "
                    "{ru.ru_utime + ru.ru_stime}\\n')\nsys.exit(rc)\n")
        self.hwmgr = write_exec(self.bin / "hwmgr", text)
        self.catalog = self.tmp / "site-catalog.json"
        self.catalog.write_text(json.dumps(SITE_CATALOG, indent=1) + "\n")
        self.report = self.tmp / "report"

    # ------------------------------------------------------------------ namespaces
    def namespace(self, *, window_scaling: int = 1, txqueuelen: int = TXQ_WANTED) -> str:
        """A new namespace with lo and a veth pair up, and its own sysctls."""
        self._n += 1
        ns = f"{self.prefix}-{self._n}"
        sh([IP, "netns", "add", ns])
        self.namespaces.append(ns)
        sh([IP, "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1"])
        for ifname in ("lo", "v0", "v1"):
            sh([IP, "-n", ns, "link", "set", ifname, "up"])
        if txqueuelen != TXQ_WANTED:
            sh([IP, "-n", ns, "link", "set", "v0", "txqueuelen", str(txqueuelen)])
        sh([IP, "netns", "exec", ns, "sysctl", "-qw",
            f"net.ipv4.tcp_window_scaling={window_scaling}"])
        return ns

    def timed(self, command: str, what: str) -> str:
        """Shell text running `command` (exec'd), or timing it into timing_log."""
        if self.timing_log is None:
            return f"exec {command}\n"
        return (f"s=$(date +%s%N)\n{command}\nrc=$?\n"
                f"echo {what} $s $(date +%s%N) $rc - >> {self.timing_log}\nexit $rc\n")

    def wrappers(self, ns: str, *, installed: bool = False) -> tuple[Path, Path]:
        """Python and sh wrappers that run inside namespace `ns` (sh runs the collector);
        `installed`: the Python that has hwmgr and its dependencies, as the RPM or deb
        installs them (this run's venv; the system Python with only hwmgr on its path failed
        whenever the catalog's schema verdict was not cached yet: no jsonschema there)."""
        python = sys.executable if installed else "/usr/bin/python3"
        cache = self.tmp / "cache" / ns
        env = f"XDG_CACHE_HOME={cache} " if self.own_cache else ""
        if self.timing_log is None:
            text = f"#!/bin/sh\n{env}exec {IP} netns exec {ns} {python} \"$@\"\n"
        else:  # bench/fleet: the host side's CPU (the module's process and what it runs), and
            # this wrapper's own, apart from the control node's
            argv = [IP, "netns", "exec", ns, python]
            text = (f"#!{sys.executable} -S\nimport os, resource, sys, time\n"
                    + (f"os.environ['XDG_CACHE_HOME'] = {str(cache)!r}\n" if self.own_cache
                       else "")
                    + "t = time.monotonic_ns()\npid = os.fork()\nif pid == 0:\n"
                    f"    os.execv({IP!r}, [*{argv!r}, *sys.argv[1:]])\n"
                    "_, status, ru = os.wait4(pid, 0)\nrc = os.waitstatus_to_exitcode(status)\n"
                    "me = resource.getrusage(resource.RUSAGE_SELF)\nend = time.monotonic_ns()\n"
                    f"with open({str(self.timing_log)!r}, 'a') as fh:\n"
                    "    fh.write(f'host-python {t} {end} {rc} {ru.ru_utime + ru.ru_stime}\\n'\n"
                    "             f'wrapper {t} {end} 0 {me.ru_utime + me.ru_stime}\\n')\n"
                    "sys.exit(rc)\n")
        py = write_exec(self.bin / f"py-{ns}", text)
        shell = write_exec(self.bin / f"sh-{ns}", "#!/bin/sh\n" + self.timed(
            f"{IP} netns exec {ns} /bin/sh \"$@\"", f"collector-{ns}"))
        return py, shell

    # ------------------------------------------------------------------ hosts
    def live(self, name: str, expected: str, *, ssh: bool = False, collector: bool = False,
             no_python: bool = False, installed: bool = False, **ns_args: int) -> None:
        """A namespace host, checked live (Python) or through the collector. `installed`:
        hwmgr is importable by the host's Python and `hwmgr_executable` is left unset, so
        hwmgr_check runs the check in its own process (via=auto); otherwise the host runs
        this fleet's hwmgr command."""
        ns = self.namespace(**ns_args)
        py, shell = self.wrappers(ns, installed=installed)
        host: dict[str, Any] = {} if installed else {"hwmgr_executable": str(self.hwmgr)}
        host.update(self.ssh_vars() if ssh else {"ansible_connection": "local"})
        host["ansible_python_interpreter"] = "/nonexistent/python3" if no_python else str(py)
        if collector:
            host["hwmgr_collector"] = True
        if collector or no_python:
            host["hwmgr_collector_shell"] = str(shell)
        self.hosts[name] = host
        self.expected[name] = expected

    def snapshot(self, name: str, root: Path, expected: str) -> None:
        """A host known only by its snapshot (checked on the control node)."""
        self.hosts[name] = {"hwmgr_root": str(root), "ansible_connection": "local"}
        self.expected[name] = expected

    def unreachable(self, name: str, *, collector: bool = False) -> None:
        """An SSH host on a port nobody listens on."""
        vars_ = self.ssh_vars(port=free_port())
        if collector:
            vars_["hwmgr_collector"] = True
        self.hosts[name] = vars_
        self.expected[name] = "unreachable"

    def failing(self, name: str) -> None:
        """A host with Python but without hwmgr: the check fails there."""
        ns = self.namespace()
        py, _ = self.wrappers(ns)
        self.hosts[name] = {"ansible_connection": "local", "ansible_python_interpreter": str(py),
                            "hwmgr_executable": str(self.tmp / "no-such-hwmgr")}
        self.expected[name] = "failed"

    # ------------------------------------------------------------------ sshd
    def ssh_vars(self, port: int | None = None) -> dict[str, Any]:
        """Connection variables for a host behind this fleet's sshd (or a closed port)."""
        return {"ansible_connection": "ssh", "ansible_host": "127.0.0.1",
                "ansible_port": port or self.ssh_port, "ansible_user": "root",
                "ansible_ssh_private_key_file": str(self.tmp / "ssh" / "id_ed25519"),
                "ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null "
                "-o StrictHostKeyChecking=no -o IdentitiesOnly=yes -o ConnectTimeout=10"}

    def start_sshd(self) -> None:
        """Our own sshd on 127.0.0.1:<free port>, key login for root only, config in tmp."""
        d = self.tmp / "ssh"
        d.mkdir(mode=0o700)
        for key in ("host_key", "id_ed25519"):
            sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)])
        (d / "authorized_keys").write_text((d / "id_ed25519.pub").read_text())
        self.ssh_port = free_port()
        (d / "sshd_config").write_text("\n".join([
            f"Port {self.ssh_port}", "ListenAddress 127.0.0.1", f"HostKey {d / 'host_key'}",
            f"AuthorizedKeysFile {d / 'authorized_keys'}", f"PidFile {d / 'sshd.pid'}",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            "Subsystem sftp internal-sftp", "MaxStartups 100:30:200", "MaxSessions 100",
            "LogLevel ERROR", ""]))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
        self.sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.sshd.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.sshd.stderr.read()}")
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.ssh_port), timeout=1):
                return
            time.sleep(0.05)
        raise RuntimeError(f"sshd does not listen on 127.0.0.1:{self.ssh_port}")

    # ------------------------------------------------------------------ files and running
    def inventory(self, extra: dict[str, Any] | None = None) -> Path:
        """The YAML inventory (JSON is valid YAML) with every host and the fleet's vars."""
        vars_ = {"hwmgr_report_dir": str(self.report), "hwmgr_catalogs": [str(self.catalog)],
                 "hwmgr_local_executable": str(self.hwmgr)}
        vars_.update(extra or {})
        path = self.tmp / "inventory.yml"
        path.write_text(json.dumps({"all": {"vars": vars_, "hosts": self.hosts}}, indent=1))
        return path

    def env(self, collections: Path) -> dict[str, str]:
        """Environment for ansible-playbook: our collections path, temp dirs under tmp."""
        env = dict(os.environ)
        env.update({
            "ANSIBLE_COLLECTIONS_PATH": str(collections),
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_LOCAL_TEMP": str(self.tmp / "ansible-local"),
            "ANSIBLE_REMOTE_TMP": str(self.tmp / "ansible-remote"),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.tmp / "cp"),
            "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=5s",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_CONFIG": str(self.tmp / "no-ansible.cfg"),
            "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            # the catalog's schema verdict starts unknown, as on a fresh host, in every run:
            # the hosts' first checks then validate it in full (a warm ~/.cache hid a host
            # Python without jsonschema until the cache lost its key)
            "XDG_CACHE_HOME": str(self.tmp / "cache"),
        })
        return env

    def teardown(self) -> None:
        """Stop sshd, delete every namespace (idempotent)."""
        if self.sshd is not None:
            if self.sshd.poll() is None:
                self.sshd.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.sshd.wait(timeout=5)
            if self.sshd.poll() is None:
                self.sshd.kill()
                self.sshd.wait(timeout=5)
            if self.sshd.stderr:
                self.sshd.stderr.close()
            self.sshd = None
        for ns in self.namespaces:
            sh([IP, "netns", "del", ns], check=False)
        self.namespaces.clear()


def leftover_namespaces(prefix: str) -> list[str]:
    """Namespaces with `prefix` that still exist (for a teardown assertion)."""
    return sorted(n for n in (p.name for p in Path("/run/netns").glob("*"))
                  if n == prefix or n.startswith(prefix + "-"))


def build_collection(tmp: Path) -> Path:
    """`ansible-galaxy collection build` + `install` into tmp; returns the collections path."""
    out, cols = tmp / "build", tmp / "collections"
    out.mkdir()
    sh([str(BIN / "ansible-galaxy"), "collection", "build", str(COLLECTION),
        "--output-path", str(out)], timeout=120)
    (tarball,) = out.glob("hwmgr-fleet-*.tar.gz")
    # --force: the checkout itself is on sys.path (editable install), and ansible-galaxy
    # counts an ansible_collections/ found there as "already installed"
    sh([str(BIN / "ansible-galaxy"), "collection", "install", "--force", str(tarball), "-p",
        str(cols)], timeout=120)
    return cols


def standard_fleet(fleet: Fleet, *, scale: int = 1) -> None:
    """The mixed test fleet (35 hosts at scale 1): compliant, drifted, old, SSH, snapshot,
    unreadable, failing and unreachable hosts; `scale` multiplies the namespace hosts."""
    for i in range(12 * scale):  # every other one checked inside the module's process
        fleet.live(f"web-{i + 1:02d}", "compliant", installed=bool(i % 2))
    for i in range(4 * scale):
        fleet.live(f"db-{i + 1:02d}", "drift", window_scaling=0, installed=i == 0)
    for i in range(3 * scale):
        fleet.live(f"lb-{i + 1:02d}", "drift", txqueuelen=TXQ_DRIFTED)
    fleet.live("ssh-ok", "compliant", ssh=True)
    fleet.live("ssh-drift", "drift", ssh=True, window_scaling=0)
    fleet.live("ssh-old", "compliant", ssh=True, collector=True)
    for i in range(2 * scale):
        fleet.live(f"old-{i + 1:02d}", "compliant", collector=True)
    fleet.live("old-drift", "drift", collector=True, txqueuelen=TXQ_DRIFTED)
    fleet.live("nopython", "compliant", no_python=True)
    fleet.failing("no-hwmgr")
    fleet.snapshot("snap-missing", fleet.tmp / "no-such-snapshot", "failed")
    fleet.snapshot("snap-garbled", FIXTURE_HOSTS / "broken" / "garbled", "failed")
    fleet.unreachable("down-01")
    fleet.unreachable("down-old", collector=True)
