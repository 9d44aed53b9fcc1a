#!/usr/bin/env python3
"""End-to-end: does the real kube-scheduler bind GPU pods where troupe ranks
them first? troupe's prioritize answer is one term of kube-scheduler's sum
(rank x extender weight x 10, beside NodeResourcesFit's LeastAllocated,
BalancedAllocation and the rest), so the extender weight in
config/scheduler-config.yaml decides whether troupe's packing or the in-tree
spreading wins. troupe's own troupe_bind_top_choice_total counts the answer.

  test_shipped_weight_gives_troupes_choice   with the shipped weight every GPU
                                              pod is bound to a node troupe
                                              ranked 10, and the CPU pods land
                                              as they do without troupe
  test_scenario_can_fail_at_weight_1         the same scenario at weight 1:
                                              LeastAllocated outvotes troupe
                                              (the scenario tells weights apart)

The cluster (made here through the API, not kubesim's layout): 12 nodes of 8
GPUs (96 cpu, 768Gi) and 12 of 4 GPUs (48 cpu, 384Gi), all Ready. Each run
(run_scenario) starts from no pods: a pinned background of CPU services on the
4-GPU nodes (12 cpu, 48Gi each: those nodes look busier to LeastAllocated),
then 24 CPU-only pods through kube-scheduler (which never reach troupe:
managedResources), then GPU pods of 1, 2, 4 and 8 GPUs asking 10 cpu and 80Gi
per GPU, one after another. bench/e2e_agreement.py runs the same scenario for
several configurations and prints the figures (docs/configuration.md has them).
"""
import os
import random
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import E2E, create_node, metric_samples, wait_until, module_cluster  # noqa: E402
from rig_releases import ROOT  # noqa: E402

NODES8, NODES4 = 12, 12
NODE8 = {"cpu": "96", "memory": "768Gi", "gpus": 8, "topo": "dgx-h100.txt"}
NODE4 = {"cpu": "48", "memory": "384Gi", "gpus": 4, "topo": "bridged-4.txt"}
CPU_PODS, CPU_POD = 24, {"cpu": "4", "memory": "16Gi"}
GPU_CPU, GPU_MEM_GI = 10, 80                    # per GPU asked (workload())
GPU_SIZES = [1, 1, 2, 1, 4, 1, 2, 8, 1, 1, 2, 4, 1, 8, 2, 1, 1, 4, 2, 1]
SHIPPED = os.path.join(ROOT, "config", "scheduler-config.yaml")

# Model (c): GPU pods choose a profile of their own (schedulerName troupe)
# that packs by MostAllocated over cpu, memory and nvidia.com/gpu. Extenders
# are shared by a kube-scheduler's profiles, so in one kube-scheduler this
# scores exactly as the sidecar's second scheduler would (test_e2e_sidecar.py
# runs that deployment for real); CPU pods keep the default profile.
SIDECAR_PROFILE = """\
- schedulerName: troupe
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: cpu, weight: 1}
        - {name: memory, weight: 1}
        - {name: nvidia.com/gpu, weight: 3}
"""


def shipped_weight():
    with open(SHIPPED) as f:
        m = re.search(r"^\s+weight:\s*(\d+)\s*$", f.read(), re.M)
    return int(m.group(1))


def make_nodes(c):
    """The 24 nodes, with capacity, the topology capture troupe reads, Ready."""
    topo = {}
    for kind in (NODE8, NODE4):
        with open(os.path.join(ROOT, "tests", "data", "topo", kind["topo"])) as f:
            topo[kind["topo"]] = f.read()
    for i in range(NODES8 + NODES4):
        kind = NODE8 if i < NODES8 else NODE4
        name = ("g8-%02d" % i) if i < NODES8 else ("g4-%02d" % (i - NODES8))
        create_node(c, name, {"cpu": kind["cpu"], "memory": kind["memory"],
                              "nvidia.com/gpu": str(kind["gpus"])},
                    labels={"rig.troupe.io/gpus": str(kind["gpus"])},
                    annotations={"troupe.io/gpu-topology": topo[kind["topo"]]})


def pod(name, cpu, memory, gpus=0, node=None, scheduler=None):
    res = {"requests": {"cpu": cpu, "memory": memory}, "limits": {}}
    if gpus:
        res["requests"]["nvidia.com/gpu"] = res["limits"]["nvidia.com/gpu"] = str(gpus)
    spec = {"containers": [{"name": "work", "image": "registry.invalid/e2e:1", "resources": res}],
            "terminationGracePeriodSeconds": 0}
    if node:
        spec["nodeName"] = node
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def configure(c, weight=None, sidecar=False):
    """Restart kube-scheduler with the shipped config at extender weight
    <weight> (None: without troupe; the extenders section is left out), and
    with model (c)'s second profile if <sidecar>."""
    base = type(c).scheduler_config

    def text(self=c):
        t = base(self)
        if weight is not None:
            t = re.sub(r"^(\s+weight:)\s*\d+\s*$", r"\g<1> %d" % weight, t, flags=re.M)
        if sidecar:
            t = t.replace("- schedulerName: default-scheduler\n",
                          "- schedulerName: default-scheduler\n" + SIDECAR_PROFILE)
        return t
    c.scheduler_config = text
    c.reconfigure(with_troupe=weight is not None)


def top_choice(c):
    if not c.alive("troupe"):
        return {}
    s = metric_samples(c.metrics("troupe"), "troupe_bind_top_choice_total")
    return {k.split('"')[1]: v for k, v in s.items()}


def troupe_requests(c):
    if not c.alive("troupe"):
        return 0.0
    s = metric_samples(c.metrics("troupe"), "troupe_requests_total")
    return sum(v for k, v in s.items() if 'verb="other"' not in k)     # not /metrics itself


def clear(c, ns):
    c.request("DELETE", "/api/v1/namespaces/%s/pods?gracePeriodSeconds=0" % ns)
    wait_until(lambda: not c.get("/api/v1/namespaces/%s/pods" % ns)["items"], timeout=120,
               what="pods of %s gone" % ns)


def create(c, ns, obj):
    status, out = c.request("POST", "/api/v1/namespaces/%s/pods" % ns, obj)
    if status != 201:
        raise AssertionError("create %s: %s" % (obj["metadata"]["name"], out))


def bound(c, ns, name, timeout=60):
    return wait_until(lambda: c.get("/api/v1/namespaces/%s/pods/%s" % (ns, name))["spec"].get(
        "nodeName"), timeout=timeout, what="pod %s bound" % name)


def bound_or_unschedulable(c, ns, name, timeout=60):
    """The pod's node, or None once kube-scheduler found no node for it."""
    def seen():
        p = c.get("/api/v1/namespaces/%s/pods/%s" % (ns, name))
        if p["spec"].get("nodeName"):
            return p["spec"]["nodeName"]
        for cond in p.get("status", {}).get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return "-"
        return None
    node = wait_until(seen, timeout=timeout, what="pod %s bound or unschedulable" % name)
    return None if node == "-" else node


def cpu_shape(nodes):
    """Where the CPU pods went, up to kube-scheduler's random choice among
    equal nodes: per node kind, the sorted counts of CPU pods per node."""
    out = {}
    for kind in ("g8", "g4"):
        names = ["%s-%02d" % (kind, i) for i in range(NODES8 if kind == "g8" else NODES4)]
        out[kind] = sorted(nodes.count(n) for n in names)
    return out


def workload(seed=None):
    """(background, gpu_requests): the pinned CPU pods as (node, cpu, memory
    Gi), and per GPU pod the (cpu, memory Gi) it asks per GPU. seed None: the
    test's scenario (12 cpu, 48Gi on each 4-GPU node; 10 cpu, 80Gi per GPU).
    A seed: a random background on every node (up to 40% of its cpu and,
    independently, of its memory: LeastAllocated and BalancedAllocation then
    differ between all nodes) and GPU pods that are by turns cpu-heavy (7
    cpu, 20Gi per GPU) and memory-heavy (2 cpu, 56Gi), so that a full node's
    worth of either still fits beside the background."""
    if seed is None:
        return ([("g4-%02d" % i, 12, 48) for i in range(NODES4)],
                [(GPU_CPU, GPU_MEM_GI)] * len(GPU_SIZES))
    rnd = random.Random(seed)
    bg = []
    for i in range(NODES8 + NODES4):
        kind = NODE8 if i < NODES8 else NODE4
        name = ("g8-%02d" % i) if i < NODES8 else ("g4-%02d" % (i - NODES8))
        cpu, mem = int(kind["cpu"]), int(kind["memory"][:-2])
        bg.append((name, int(cpu * 0.4 * rnd.random()), int(mem * 0.4 * rnd.random())))
    per = [(7, 20) if rnd.random() < 0.5 else (2, 56) for _ in GPU_SIZES]
    return bg, per


def run_scenario(c, ns, weight=None, sidecar=False, seed=None):
    """One run from no pods; returns its figures."""
    background, per_gpu = workload(seed)
    configure(c, weight, sidecar)
    clear(c, ns)
    for node, cpu, mem in background:
        if cpu or mem:
            create(c, ns, pod("bg-" + node, str(cpu), "%dGi" % mem, node=node))
    # kube-scheduler must count the background before the CPU pods come: a
    # moment for its informer (kubesim plays the kubelet only for its own
    # nodes, so these pods stay Pending: assigned all the same).
    time.sleep(2)
    before = troupe_requests(c)
    for i in range(CPU_PODS):
        create(c, ns, pod("cpu-%02d" % i, CPU_POD["cpu"], CPU_POD["memory"]))
    cpu_nodes = [bound(c, ns, "cpu-%02d" % i) for i in range(CPU_PODS)]
    cpu_to_troupe = troupe_requests(c) - before
    t0 = top_choice(c)
    placed, used, unplaced = [], {}, []
    for i, g in enumerate(GPU_SIZES):
        name = "gpu-%02d-%d" % (i, g)
        cpu, mem = per_gpu[i]
        create(c, ns, pod(name, str(cpu * g), "%dGi" % (mem * g), gpus=g,
                          scheduler="troupe" if sidecar else None))
        node = bound_or_unschedulable(c, ns, name)
        if node is None:        # no node has room: the stranded GPUs' cost
            unplaced.append((name, g))
            c.request("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (ns, name))
            continue
        placed.append((name, g, node))
        used[node] = used.get(node, 0) + g
    t1 = top_choice(c)
    delta = {k: int(t1.get(k, 0) - t0.get(k, 0)) for k in ("top", "other", "unscored")}
    return {
        "weight": weight, "sidecar": sidecar, "seed": seed,
        "top_choice": delta,
        "top_share": delta["top"] / len(placed) if t1 and placed else None,
        "whole_8gpu_free": sum(1 for i in range(NODES8) if not used.get("g8-%02d" % i)),
        "gpu_on_4gpu_nodes": sum(g for _, g, n in placed if n.startswith("g4-")),
        "nodes_touched": len(used),
        "cpu_shape": cpu_shape(cpu_nodes),
        "cpu_nodes": cpu_nodes,
        "cpu_requests_to_troupe": cpu_to_troupe,
        "unplaced": unplaced,
        "placed": placed,
    }


def figures(r):
    """A run's figures without the per-pod lists, for the test's output."""
    return {k: v for k, v in r.items() if k not in ("placed", "cpu_nodes")}


setUpModule, tearDownModule = module_cluster("agreement", nodes=0)


class Agreement(E2E):

    @classmethod
    def setUpClass(cls):
        make_nodes(cls.cluster)

    @classmethod
    def tearDownClass(cls):
        configure(cls.cluster, shipped_weight())

    def test_shipped_weight_gives_troupes_choice(self):
        without = run_scenario(self.c, self.ns, None)
        w = shipped_weight()
        r = run_scenario(self.c, self.ns, w)
        print("\nweight %d: %s" % (w, figures(r)))
        self.assertEqual(r["top_choice"], {"top": len(GPU_SIZES), "other": 0, "unscored": 0},
                         "with the shipped weight %d kube-scheduler bound GPU pods off troupe's "
                         "top node: %s" % (w, r["placed"]))
        # CPU pods never reach troupe, and land as they do without it.
        self.assertEqual(r["cpu_requests_to_troupe"], 0)
        self.assertEqual(r["cpu_shape"], without["cpu_shape"])

    def test_scenario_can_fail_at_weight_1(self):
        r = run_scenario(self.c, self.ns, 1)
        print("\nweight 1: %s" % figures(r))
        self.assertGreater(r["top_choice"]["other"], 0,
                           "at weight 1 LeastAllocated should outvote troupe somewhere: the "
                           "scenario no longer tells weights apart")


if __name__ == "__main__":
    unittest.main()
