#!/usr/bin/env python3
"""Write cluster.json, the small known cluster test_dashboard.mjs checks the
dashboard against: make_cluster.py > cluster.json (committed; rerun when it
changes). Python standard library only.

Seven nodes in three network domains (zone / block): three 8-GPU H100
(NVSwitch: one island) and two 8-GPU V100 (hybrid cube-mesh: two islands of
four) in zone-a, two PCIe L40S in zone-b, one cordoned and one not Ready. One
V100 GPU is unhealthy. Held: gang ml/train (2 members x 8 GPUs, bound),
ml/eval (4 GPUs), research/notebook (2), ops/legacy (1 GPU, no troupe.io/gpu-ids:
devices unknown). Pending: gang ml/llm, 2 members x 4 GPUs, none bound.
"""
import json

PRODUCT = {"h100": "NVIDIA-H100-80GB-HBM3", "v100": "Tesla-V100-SXM2-32GB", "l40s": "NVIDIA-L40S"}


def node(name, kind, zone, block, ready=True, cordoned=False, unhealthy=None):
    ann = {"troupe.io/gpu-unhealthy": unhealthy} if unhealthy else {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": ann, "labels": {
                "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone,
                "network.topology.nvidia.com/block": block,
                "nvidia.com/gpu.product": PRODUCT[kind], "nvidia.com/gpu.count": "8"}},
            "spec": {"unschedulable": True} if cordoned else {},
            "status": {"capacity": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(ns, name, uid, gpus, node_name=None, ids=None, group=None):
    meta = {"name": name, "namespace": ns, "uid": uid}
    if ids:
        meta["annotations"] = {"troupe.io/gpu-ids": ids}
    if group:
        meta["labels"] = {"scheduling.x-k8s.io/pod-group": group}
    spec = {"containers": [{"name": "main", "image": "registry.example/job:1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending"}}


def group(ns, name, min_member):
    # A long timeout: a plan made during the test must outlast a slow run.
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 600}}


items = [
    node("h100-a1-0", "h100", "zone-a", "block-1"),
    node("h100-a1-1", "h100", "zone-a", "block-1"),
    node("h100-a1-2", "h100", "zone-a", "block-1"),
    node("v100-a2-0", "v100", "zone-a", "block-2"),
    node("v100-a2-1", "v100", "zone-a", "block-2", unhealthy="7"),
    node("l40s-b1-0", "l40s", "zone-b", "block-3", cordoned=True),
    node("l40s-b1-1", "l40s", "zone-b", "block-3", ready=False),
    pod("ml", "train-0", "uid-train-0", 8, "h100-a1-0", "0,1,2,3,4,5,6,7", "train"),
    pod("ml", "train-1", "uid-train-1", 8, "h100-a1-1", "0,1,2,3,4,5,6,7", "train"),
    pod("ml", "eval", "uid-eval", 4, "h100-a1-2", "4,5,6,7"),
    pod("research", "notebook", "uid-notebook", 2, "v100-a2-0", "0,1"),
    pod("ops", "legacy", "uid-legacy", 1, "v100-a2-1"),
    pod("ml", "llm-0", "uid-llm-0", 4, group="llm"),
    pod("ml", "llm-1", "uid-llm-1", 4, group="llm"),
    group("ml", "train", 2),
    group("ml", "llm", 2),
]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=1))
