#!/usr/bin/env python3
"""The simulator and the daemon make the same choice for the same state.

`troupe simulate` claims to replay the daemon's own decisions. Here both read
one snapshot: the daemon (the real binary, from the snapshot) answers a
prioritize for a pending pod over every node, and the simulator places the
same pod, as a one-job trace, over the same snapshot. The simulator's node
must be one the daemon ranked best (answered 10), and with several tie seeds
the simulator's picks must stay inside that set: nodes troupe ranks best are
exactly the nodes kube-scheduler may pick when nothing else tells them
apart. Random states (node kinds, devices already held, pod sizes) over many
rounds, so a difference between the two scores anywhere shows up.

  test_simulator_picks_a_node_the_daemon_ranks_best
        40 random states x 6 tie seeds, the default policy (topology);
  test_binpack_policy_agrees_too
        the same with scoring.policy binpack (the simulator's --policy binpack);
  test_a_different_policy_disagrees
        the check can fail: the simulator under least-allocated (a baseline,
        not the daemon's policy) leaves the daemon's best set in some state.
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))

from troupe_proc import Troupe, binary  # noqa: E402
import gen_sim_cluster  # noqa: E402

ROUNDS = 40
SEEDS = 6


def random_state(rng):
    """A snapshot of 4-9 nodes of gen_sim_cluster's kinds, some devices held by
    bound pods; and a pending pod that fits somewhere."""
    items, free = [], []
    for i in range(rng.randint(4, 9)):
        kind = rng.choice(gen_sim_cluster.KINDS)
        n = gen_sim_cluster.node(gen_sim_cluster.KINDS.index(kind))
        name = f"n{i}"
        n["metadata"].update(name=name, uid=f"uid-{name}")
        n["metadata"]["labels"]["kubernetes.io/hostname"] = name
        items.append(n)
        gpus = int(n["status"]["allocatable"]["nvidia.com/gpu"])
        held = sorted(rng.sample(range(gpus), rng.randint(0, gpus)))
        free.append(gpus - len(held))
        if held:
            items.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"held-{i}", "namespace": "default", "uid": f"held-{i}",
                             "annotations": {"troupe.io/gpu-ids": ",".join(map(str, held))}},
                "spec": {"nodeName": name, "containers": [{
                    "name": "c", "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": str(len(held))}}}]},
                "status": {"phase": "Running"}})
    most = max(free)
    if most == 0:
        return None
    k = rng.choice([g for g in (1, 2, 4, 8) if g <= most] or [1])
    snap = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": items}
    return snap, k, [n["metadata"]["name"] for n in items if n["kind"] == "Node"]


def pending_pod(k):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "probe", "namespace": "ml", "uid": "uid-probe"},
            "spec": {"schedulerName": "default-scheduler", "containers": [{
                "name": "main", "image": "x",
                "resources": {"limits": {"nvidia.com/gpu": str(k)}}}]},
            "status": {"phase": "Pending"}}


class Agreement(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def daemon_best(self, cpath, names, k, policy):
        """The nodes the daemon's prioritize answers 10 for, over every node."""
        config = f"scoring:\n  policy: {policy}\n"
        with Troupe(cluster=cpath, config_text=config) as t:
            status, _, ans = t.request("POST", "/prioritize",
                                       {"Pod": pending_pod(k), "Nodes": None,
                                        "NodeNames": names})
        self.assertEqual(status, 200, ans)
        self.assertEqual({h["Host"] for h in ans}, set(names), ans)
        return {h["Host"] for h in ans if h["Score"] == 10}, ans

    def sim_picks(self, cpath, k, policy, seeds):
        tpath = os.path.join(self.dir.name, "trace.json")
        with open(tpath, "w") as f:
            json.dump({"jobs": [{"name": "probe", "arrival": 0, "duration": "1h",
                                 "gpus": k}]}, f)
        picks = set()
        for seed in seeds:
            p = subprocess.run([binary(), "simulate", "--cluster", cpath, "--workload", tpath,
                                "--policy", policy, "--seed", str(seed), "-o", "json",
                                "--per-job"], capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            job = json.loads(p.stdout)["policies"][0]["jobs"][0]
            picks.add(job["pods"][0]["node"])
        return picks

    def rounds(self, daemon_policy, sim_policy, seed):
        """(rounds run, rounds where a simulator pick fell outside the
        daemon's best set, the first such round's evidence)."""
        rng = random.Random(seed)
        runs, outside, first = 0, 0, None
        while runs < ROUNDS:
            st = random_state(rng)
            if not st:
                continue
            snap, k, names = st
            cpath = os.path.join(self.dir.name, "cluster.json")
            with open(cpath, "w") as f:
                json.dump(snap, f)
            best, ans = self.daemon_best(cpath, names, k, daemon_policy)
            self.assertTrue(best, f"no node ranked 10 for a pod that fits: {ans}")
            picks = self.sim_picks(cpath, k, sim_policy, range(1, SEEDS + 1))
            runs += 1
            if not picks <= best:
                outside += 1
                first = first or (k, sorted(best), sorted(picks), ans)
        return runs, outside, first

    def test_simulator_picks_a_node_the_daemon_ranks_best(self):
        runs, outside, first = self.rounds("topology", "topology", 15)
        self.assertEqual(outside, 0, f"{outside} of {runs} states disagree; first: {first}")

    def test_binpack_policy_agrees_too(self):
        runs, outside, first = self.rounds("binpack", "binpack", 16)
        self.assertEqual(outside, 0, f"{outside} of {runs} states disagree; first: {first}")

    def test_a_different_policy_disagrees(self):
        runs, outside, _ = self.rounds("topology", "least-allocated", 17)
        self.assertGreater(outside, 0, "least-allocated never left the daemon's best set: "
                                       "the check could not tell policies apart")


if __name__ == "__main__":
    unittest.main()
