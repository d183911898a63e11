"""Print a one-line summary of an hwmgr --json output file (lab guest, stdlib only)."""
import json
import sys

try:
    with open(sys.argv[1]) as fh:
        doc = json.load(fh)
except (OSError, ValueError) as exc:
    print(f"(no JSON: {exc})")
    sys.exit(0)
data = doc.get("data") or {}
parts = [f"status={doc.get('status')}"]
if isinstance(data, dict) and "expectations" in data:
    for e in data["expectations"]:
        bad = [f"{f['device']} {f['field']}={f['actual']}" for f in e.get("findings", [])
               if f.get("result") == "fail"][:3]
        parts.append(f"{e['driver']} {e['expected_version']}: {e['status']}, {e['action']}"
                     + (f" [{'; '.join(bad)}]" if bad else ""))
if doc.get("errors"):
    parts.append("errors=" + "; ".join(doc["errors"])[:200])
print(" ".join(parts))
