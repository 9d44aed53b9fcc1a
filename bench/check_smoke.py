#!/usr/bin/env python3
"""Run a benchmark with small sizes and check that it completes and that its
Markdown table parses with numeric values. Never judges speed."""
import re
import subprocess
import sys

out = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=100)
if out.returncode != 0:
    sys.exit(f"benchmark exited {out.returncode}:\n{out.stderr}")
lines = out.stdout.splitlines()
# A table's header row is the one followed by its |---| separator.
rows = [l for i, l in enumerate(lines)
        if l.startswith("| ") and not l.startswith("| measure")
        and not (i + 1 < len(lines) and lines[i + 1].startswith("|-"))]
if len(rows) < 3:
    sys.exit(f"expected a table, got:\n{out.stdout}")
for row in rows:
    cells = [c.strip() for c in row.strip("|").split("|")]
    if not re.match(r"^[0-9.]+", cells[1]):
        sys.exit(f"not a figure: {row}")
print(out.stdout)
print("1 passed, 0 failed")
