#!/usr/bin/env python3
"""How often does the real kube-scheduler bind a GPU pod where troupe ranked it
first, by configuration? Runs tests/e2e/test_e2e_placement_agreement.py's
scenario (24 nodes of 8 and 4 GPUs, a pinned CPU background, 24 CPU pods
through kube-scheduler, then 20 GPU pods of 1 to 8 GPUs one after another) on
one real control plane (tests/e2e/cluster.py, in build/e2e/agreement-bench),
once per configuration and round, and prints per configuration:

  top        share of GPU pods bound to a node troupe's prioritize answered 10
             (troupe_bind_top_choice_total{outcome="top"} / GPU pods)
  8free      whole 8-GPU nodes left without a GPU pod (of 12): room for the
             8-GPU jobs to come
  on4        GPUs placed on the 4-GPU nodes (troupe's choice for small pods)
  nodes      nodes touched by GPU pods
  unplaced   GPU pods no node had room for (8-GPU pods after the whole 8-GPU
             nodes were broken), each deleted and the run going on
  cpu        whether the CPU pods landed as without troupe (same counts per
             node kind as a run of "none" with the same seed; kube-scheduler
             breaks ties at random, so list "none" twice to see its own spread),
             and how many requests they sent troupe (0: never)

Configurations: "none" (no extender: kube-scheduler alone), a number (the
shipped config at that extender weight), "sidecar:W" (GPU pods in a second
profile, schedulerName troupe, NodeResourcesFit MostAllocated over cpu, memory
and nvidia.com/gpu, at weight W; see the test for why one kube-scheduler with
two profiles scores as the sidecar does).

  nice python3 bench/e2e_agreement.py [--configs none,1,5,10,20,sidecar:5]
                                      [--rounds N] [--seeds 1,2,3] [--json]

Needs the Kubernetes binaries (./scripts/e2e builds them) and troupe built
(TROUPE_BIN, default build/src/extender/troupe). About 10 s a run, after a minute to
start the control plane.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
os.environ.setdefault("TROUPE_BIN", os.path.join(HERE, "..", "build", "src", "extender", "troupe"))

import test_e2e_placement_agreement as sc     # noqa: E402
from e2e_common import start_module_cluster, wait_until      # noqa: E402


def parse_config(text):
    if text == "none":
        return {"weight": None, "sidecar": False}
    if text.startswith("sidecar:"):
        return {"weight": int(text.split(":", 1)[1]), "sidecar": True}
    return {"weight": int(text), "sidecar": False}


def moved_pods(shape, baselines):
    """How many CPU pods went elsewhere than in the closest run without troupe,
    counted on the per-kind sorted counts (test_e2e_placement_agreement's
    cpu_shape). kube-scheduler breaks ties between equal nodes at random, so
    two runs without troupe can differ too on a random background: give
    "none" twice to see by how much."""
    def dist(a, b):
        return sum(abs(x - y) for k in a for x, y in zip(a[k], b[k])) // 2
    return min(dist(shape, b) for b in baselines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="none,1,5,10,20,sidecar:5",
                    help="comma-separated configurations: none, a weight, sidecar:WEIGHT")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each configuration")
    ap.add_argument("--seeds", default="",
                    help="comma-separated seeds of random backgrounds and GPU pod requests "
                         "(workload() in the test); empty: the test's fixed scenario")
    ap.add_argument("--json", action="store_true", help="print every run as JSON too")
    args = ap.parse_args()
    configs = [(t, parse_config(t)) for t in args.configs.split(",") if t]
    c = start_module_cluster("agreement-bench", nodes=0)
    runs = []
    try:
        sc.make_nodes(c)
        ns = "agreement-bench"
        c.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        wait_until(lambda: c.request("GET", "/api/v1/namespaces/%s/serviceaccounts/default"
                                     % ns)[0] == 200, what="default service account")
        seeds = [int(x) for x in args.seeds.split(",") if x] or [None]
        baseline = {}   # seed -> where the CPU pods went in each run without troupe
        for rnd in range(args.rounds):
            for seed in seeds:
                for name, cfg in configs:
                    r = sc.run_scenario(c, ns, cfg["weight"], cfg["sidecar"], seed)
                    r["config"], r["round"] = name, rnd
                    if cfg["weight"] is None:
                        baseline.setdefault(seed, []).append(r["cpu_shape"])
                    runs.append(r)
                    print("# %s seed %s round %d: top %s, 8-GPU nodes free %d, unplaced %d" % (
                        name, seed, rnd, r["top_choice"], r["whole_8gpu_free"],
                        len(r["unplaced"])), file=sys.stderr)
    finally:
        c.down()
    print("%-11s %6s %6s %5s %6s %8s  %s" % ("config", "top", "8free", "on4", "nodes", "unplaced",
                                             "cpu pods"))
    for name in dict.fromkeys(n for n, _ in configs):     # each once, in order
        rs = [r for r in runs if r["config"] == name]
        tops = [r["top_share"] for r in rs if r["top_share"] is not None]
        # (the share is per run; the figure is their mean)
        moved = max(moved_pods(r["cpu_shape"], baseline.get(r["seed"], [r["cpu_shape"]]))
                    for r in rs)
        print("%-11s %6s %6.1f %5.1f %6.1f %8.1f  %s, %d requests to troupe" % (
            name, "%.0f%%" % (100 * sum(tops) / len(tops)) if tops else "-",
            sum(r["whole_8gpu_free"] for r in rs) / len(rs),
            sum(r["gpu_on_4gpu_nodes"] for r in rs) / len(rs),
            sum(r["nodes_touched"] for r in rs) / len(rs),
            sum(len(r["unplaced"]) for r in rs) / len(rs),
            "as without troupe" if not moved else
            "%d placed otherwise than without troupe" % moved,
            sum(r["cpu_requests_to_troupe"] for r in rs)))
    if args.json:
        print(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
