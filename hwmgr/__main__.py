"""Allow `python -m hwmgr`."""

from hwmgr.cli import run

run()
