"""What the verbs share: command-line options, plan and transaction views, option mapping.

Sits below `hwmgr.commands` so that no verb imports `cli` or another verb. May import every
core package; only `commands` and `cli` import it.
"""
