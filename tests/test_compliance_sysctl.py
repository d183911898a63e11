"""net.* sysctls: names to /proc/sys paths, value parsing, reading through a rooted Host."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwmgr.compliance.items import Status
from hwmgr.compliance.sysctl import (
    parse_sysctl_value,
    read_sysctls,
    sysctl_path,
)
from hwmgr.errors import BadInputError
from hwmgr.host.runner import SubprocessRunner
from hwmgr.host.seam import Host


def test_paths() -> None:
    assert sysctl_path("net.ipv4.tcp_rmem") == "/proc/sys/net/ipv4/tcp_rmem"
    assert sysctl_path("net.ipv4.conf.eth0/100.rp_filter") == \
        "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"


@pytest.mark.parametrize("bad", ["kernel.panic", "net", "net..x", "net.a.//.b", "net.a b",
                                 "net.ipv4.conf.../x", "../net.x", "net.x\n"])
def test_bad_names_refused(bad: str) -> None:
    with pytest.raises(BadInputError):
        sysctl_path(bad)


def test_values() -> None:
    assert parse_sysctl_value("4096\t131072\t6291456\n") == [4096, 131072, 6291456]
    assert parse_sysctl_value("4096 87380 6291456") == [4096, 87380, 6291456]
    assert parse_sysctl_value("1\n") == 1
    assert parse_sysctl_value("-1") == -1
    assert parse_sysctl_value("cubic reno\n") == "cubic reno"
    assert parse_sysctl_value("") is None and parse_sysctl_value(None) is None


def test_read_through_a_rooted_host(tmp_path: Path) -> None:
    base = tmp_path / "proc/sys/net/ipv4"
    (base / "conf/eth0.100").mkdir(parents=True)
    (base / "tcp_rmem").write_text("4096\t131072\t6291456\n")
    (base / "ip_forward").write_text("0\n")
    (base / "conf/eth0.100/rp_filter").write_text("2\n")
    (tmp_path / "proc/sys/net/core").mkdir()
    (tmp_path / "proc/sys/net/core/rmem_max").symlink_to("/etc/hostname")  # stays in root
    got = read_sysctls(Host(tmp_path, SubprocessRunner()),
                       ["net.ipv4.tcp_rmem", "net.ipv4.ip_forward",
                        "net.ipv4.conf.eth0/100.rp_filter", "net.ipv4.missing",
                        "net.core.rmem_max"])
    assert got == {
        "sysctl.net.ipv4.tcp_rmem": [4096, 131072, 6291456],
        "sysctl.net.ipv4.ip_forward": 0,
        "sysctl.net.ipv4.conf.eth0/100.rp_filter": 2,
        "sysctl.net.ipv4.missing": Status.UNKNOWN,
        "sysctl.net.core.rmem_max": Status.UNKNOWN,
    }


def test_read_live_host() -> None:
    got = read_sysctls(Host("/", SubprocessRunner()), ["net.ipv4.tcp_rmem"])
    value = got["sysctl.net.ipv4.tcp_rmem"]
    assert isinstance(value, list) and len(value) == 3 and all(v > 0 for v in value)
