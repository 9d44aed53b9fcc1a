#!/usr/bin/env python3
"""Smoke of bench_verbs for the test suite: generate a small cluster with
bench/gen_cluster.py, run bench_verbs on it, and check through check_smoke.py
that it completes and prints a table of figures. Never judges speed.

    smoke_verbs.py BENCH_VERBS [bench_verbs options...]
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

with tempfile.TemporaryDirectory() as d:
    subprocess.run([sys.executable, os.path.join(HERE, "gen_cluster.py"), "--nodes", "300",
                    "--names", "100,all", "--full-nodes", "100", "--out", d],
                   check=True, stdout=subprocess.DEVNULL)
    sys.exit(subprocess.run([sys.executable, os.path.join(HERE, "check_smoke.py"), sys.argv[1],
                             "--data", d] + sys.argv[2:]).returncode)
