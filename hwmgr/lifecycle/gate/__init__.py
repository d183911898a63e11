"""The kernel gate: every managed driver rebuilt and checked for a new kernel (`kernelgate`),
its records and the drivers still managed that `check` reads (`gaterecord`), and the boot
loader's hold of the default kernel (`bootloader`).

The top room of lifecycle/: it reads the plan room's upgrade records and expectations and
uses `builds/`; nothing in lifecycle/ imports it.
"""
