"""Allow `python -m hwmgr`."""

from hwmgr.cli import main

raise SystemExit(main())
