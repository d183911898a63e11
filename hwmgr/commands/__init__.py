"""The verbs: one module per command, each with NAME, EXAMPLES, EXIT_CODES,
add_arguments and run (cli.VERBS lists them, each with its line of `hwmgr --help`).

A verb turns arguments and the `cli.Context` into an `Outcome`; it never prints or exits, and
never imports another verb (shared pieces live in `hwmgr.ui` or the core packages).
"""
