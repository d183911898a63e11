#!/usr/bin/env python3
"""Decode the hex archive the collector wrapper printed (stdin) into ARCHIVE, atomically.

Used by fleet-check.yml on the control node: prints the archive's size in bytes; exits 1
with one line on stderr when the output holds no complete archive.
"""

import os
import sys


def main() -> int:
    """Read stdin, take the text between the markers, write the bytes to argv[1]."""
    text = sys.stdin.read()
    begin, end = text.find("HWMGR-HEX-BEGIN"), text.find("HWMGR-HEX-END")
    if begin < 0 or end < begin:
        errors = [ln.strip() for ln in text.splitlines() if "HWMGR-COLLECT-ERROR" in ln]
        print(errors[0] if errors else "the collector printed no archive", file=sys.stderr)
        return 1
    try:
        data = bytes.fromhex("".join(text[begin + len("HWMGR-HEX-BEGIN"):end].split()))
    except ValueError as exc:
        print(f"the collector's archive is garbled ({exc})", file=sys.stderr)
        return 1
    dest = sys.argv[1]
    tmp = f"{dest}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, dest)
    print(len(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
