#!/usr/bin/env python3
"""Count test cases across meson test logs and print one closing line.

Each meson test is a binary or script that runs many cases; the count given is
of cases: cmocka's "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)", and
unittest's "Ran N tests" with its failures and errors. A test whose output has
neither counts as one case.
"""
import json
import re
import sys

CMOCKA_PASS = re.compile(r"^\[  PASSED  \] (\d+) test\(s\)\.", re.M)
CMOCKA_FAIL = re.compile(r"^\[  FAILED  \] (\d+) test\(s\)", re.M)
PY_RAN = re.compile(r"^Ran (\d+) tests? in", re.M)
PY_BAD = re.compile(r"^FAILED \((?:failures=(\d+))?(?:, )?(?:errors=(\d+))?", re.M)


def count(entry):
    out = (entry.get("stdout") or "") + (entry.get("stderr") or "")
    ok = entry.get("result") == "OK"
    p = [int(x) for x in CMOCKA_PASS.findall(out)]
    f = [int(x) for x in CMOCKA_FAIL.findall(out)]
    if p or f:
        return sum(p), sum(f) or (0 if ok else 1)
    ran = [int(x) for x in PY_RAN.findall(out)]
    if ran:
        bad = sum(int(a or 0) + int(b or 0) for a, b in PY_BAD.findall(out))
        return sum(ran) - bad, bad or (0 if ok else 1)
    return (1, 0) if ok else (0, 1)


def main(paths):
    passed = failed = 0
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    p, q = count(json.loads(line))
                    passed += p
                    failed += q
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
