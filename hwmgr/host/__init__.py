"""The host seam: `Host` (paths and writes confined to a root), command runners, snapshots.

Owns every read and write of a machine: the live host (`/`), a snapshot directory or archive,
or a fake tree in tests, so the same code runs on all three. Imports only `hwmgr.errors` and
`hwmgr.output`; everything else imports it.
"""
