"""The reads alone: the files an inventory of a snapshot tree opens, in a tight loop.

No parsing, no names, no verdicts, no JSON: each function directory listed, its one-value
attributes read, its links read, each netdev's attributes and recorded `ethtool -i` output
read. The attribute names come from the command line (bench/inventory passes hwmgr's own
lists), so this floor follows what hwmgr reads. Prints the number of functions walked.
Usage: python3 readfloor.py TREE FUNC_ATTRS NET_ATTRS   (attribute lists comma-separated)
"""

import json
import os
import sys

FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW


def read(path: str) -> bytes:
    fd = os.open(path, FLAGS)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def main() -> int:
    root, func_attrs, net_attrs = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
    with open(f"{root}/commands/index.json", "rb") as fh:
        outputs = {tuple(e["argv"]): e["stdout"] for e in json.load(fh)}
    devices = f"{root}/sys/bus/pci/devices"
    walked = 0
    for addr in sorted(os.listdir(devices)):
        base = f"{devices}/{addr}"
        with os.scandir(base) as it:
            entries = {e.name: e for e in it}
        values = [read(f"{base}/{n}") for n in func_attrs if n in entries]
        values += [os.readlink(f"{base}/{n}") for n in entries
                   if n == "physfn" or n.startswith("virtfn")]
        for ifname in sorted(os.listdir(f"{base}/net")) if "net" in entries else ():
            netdev = f"{root}/sys/class/net/{ifname}"
            with os.scandir(netdev) as it:
                present = {e.name for e in it}
            values += [read(f"{netdev}/{n}") for n in net_attrs if n in present]
            out = outputs.get(("ethtool", "-i", ifname))
            if out:
                values.append(read(f"{root}/{out}"))
        walked += 1
    print(walked)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
