#!/usr/bin/env python3
"""Write the cluster snapshot `troupe simulate` replays the placement benchmark on.

    gen_sim_cluster.py [--nodes 64] [--out config/examples/cluster-sim-64.json]

The nodes are bench/sim_placement's four machine types, interleaved in equal shares
(node i is type i mod 4, as sim_placement mixes them), each with its links written out
in the troupe.io/gpu-topology annotation as `nvidia-smi topo -m` prints them, so the
simulator reads the same matrices sim_placement builds in bench/sim_cluster.c:

  nvswitch  8 GPUs, every pair NV12 (HGX A100/H100 baseboard), GPUs 0-3 and 4-7 on
            NUMA nodes 0 and 1;
  dgx1      DGX-1 V100 hybrid cube mesh (NV1/NV2 within each quad, i to i+4, SYS
            otherwise), the matrix of tests/data/topo/dgx1-v100.txt;
  pcie      8-GPU PCIe server: PIX in pairs, PXB within a socket, SYS across;
  bridge    4-GPU box with NVLink bridges (NV4) on 0-2 and 1-3, PHB otherwise.

No pods: the cluster starts empty. Network labels put the nodes in one zone, four
spines of 16 nodes and racks of 8 (the gang planner's domains, NVIDIA topograph's
label keys). Deterministic; Python standard library only.
"""
import argparse
import json

DGX1 = [
    [0, 1, 1, 2, 2, 0, 0, 0], [1, 0, 2, 1, 0, 2, 0, 0],
    [1, 2, 0, 2, 0, 0, 1, 0], [2, 1, 2, 0, 0, 0, 0, 1],
    [2, 0, 0, 0, 0, 1, 1, 2], [0, 2, 0, 0, 1, 0, 2, 1],
    [0, 0, 1, 0, 1, 2, 0, 2], [0, 0, 0, 1, 2, 1, 2, 0],
]


def link(kind, i, j):
    if kind == "nvswitch":
        return "NV12"
    if kind == "dgx1":
        return f"NV{DGX1[i][j]}" if DGX1[i][j] else "SYS"
    if kind == "pcie":
        return "PIX" if i // 2 == j // 2 else "PXB" if i // 4 == j // 4 else "SYS"
    return "NV4" if abs(i - j) == 2 else "PHB"


def topo_text(kind):
    n = 4 if kind == "bridge" else 8
    out = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\n"
    for i in range(n):
        cells = [" X " if i == j else link(kind, i, j) for j in range(n)]
        numa = 0 if n == 4 else i // 4
        cpus = "0-31" if n == 4 else ("0-47" if i < 4 else "48-95")
        out += f"GPU{i}\t" + "\t".join(cells) + f"\t{cpus}\t{numa}\n"
    return out


KINDS = ("nvswitch", "dgx1", "pcie", "bridge")
PRODUCT = {"nvswitch": "NVIDIA-H100-80GB-HBM3", "dgx1": "Tesla-V100-SXM2-32GB",
           "pcie": "NVIDIA-L40S", "bridge": "NVIDIA-RTX-A6000"}


def node(i):
    kind = KINDS[i % 4]
    gpus = 4 if kind == "bridge" else 8
    name = f"sim-{kind}-{i:03d}"
    res = {"cpu": "96", "memory": "1031723264Ki", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": f"sim-node-{i:03d}", "resourceVersion": str(1000 + i),
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": "zone-a",
                "network.topology.nvidia.com/spine": f"spine-{i // 16}",
                "network.topology.nvidia.com/block": f"rack-{i // 8}",
                "nvidia.com/gpu.product": PRODUCT[kind],
                "nvidia.com/gpu.count": str(gpus),
            },
            "annotations": {"troupe.io/gpu-topology": topo_text(kind)},
        },
        "spec": {},
        "status": {"capacity": res, "allocatable": dict(res),
                   "conditions": [{"type": "Ready", "status": "True",
                                   "reason": "KubeletReady"}]},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--out", default="config/examples/cluster-sim-64.json")
    a = ap.parse_args()
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
           "items": [node(i) for i in range(a.nodes)]}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
