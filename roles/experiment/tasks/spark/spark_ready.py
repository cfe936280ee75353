# Waits until the Spark query in DIR runs with EXECUTORS executors and has reported progress;
# prints {"app_id", "executors"} and exits 0, or a reason and 1 (the driver ended, or TIMEOUT s).
import json
import sys
import time
from pathlib import Path

work, wanted, timeout_s = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + timeout_s
reason = "no status from the driver yet"
while time.monotonic() < deadline:
    if (work / "done.json").exists():
        print(f"the driver ended: {(work / 'done.json').read_text().strip()[:1500]}")
        sys.exit(1)
    try:
        lines = (work / "status.jsonl").read_text().splitlines()
        settings = json.loads((work / "settings.json").read_text())
        last = json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        last, settings = {}, {}
    executors = last.get("executors") or []
    if last and last.get("batch_id") is not None and len(executors) >= wanted:
        print(json.dumps({"app_id": settings.get("app_id"), "executors": executors}))
        sys.exit(0)
    if last:
        reason = f"{len(executors)} of {wanted} executors, batch {last.get('batch_id')}"
    time.sleep(0.5)
try:
    log = [line for line in (work / "driver.log").read_text().splitlines() if " ERROR " in line]
except OSError:
    log = []
print(
    f"not ready after {timeout_s:g} s: {reason}"
    + (f"; the driver's last error: {log[-1][:800]}" if log else "")
)
sys.exit(1)
