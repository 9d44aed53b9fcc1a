#!/usr/bin/env python3
"""Write the cluster snapshots `troupe simulate` replays its benchmarks on.

    gen_sim_cluster.py [--nodes 64] [--out config/examples/cluster-sim-64.json]
    gen_sim_cluster.py --kind nvl72 [--racks 16] [--out config/examples/cluster-gang-nvl72.json]
    gen_sim_cluster.py --kind h100 [--nodes 128] [--out config/examples/cluster-gang-h100.json]
    gen_sim_cluster.py --kind mig [--nodes 32] [--out config/examples/cluster-mig-mixed.json]

--kind mixed (the default), the placement benchmark's cluster: four machine types,
interleaved in equal shares (node i is type i mod 4, the mix of the retired
bench/sim_placement, so its published figures stay comparable), each with its links
written out in the troupe.io/gpu-topology annotation as `nvidia-smi topo -m` prints them:

  nvswitch  8 GPUs, every pair NV12 (HGX A100/H100 baseboard), GPUs 0-3 and 4-7 on
            NUMA nodes 0 and 1;
  dgx1      DGX-1 V100 hybrid cube mesh (NV1/NV2 within each quad, i to i+4, SYS
            otherwise), the matrix of tests/data/topo/dgx1-v100.txt;
  pcie      8-GPU PCIe server: PIX in pairs, PXB within a socket, SYS across;
  bridge    4-GPU box with NVLink bridges (NV4) on 0-2 and 1-3, PHB otherwise.

No pods: the cluster starts empty. Network labels put the nodes in one zone, four
spines of 16 nodes and racks of 8 (the gang planner's domains, NVIDIA topograph's
label keys).

--kind nvl72, GB200 NVL72 racks for the gang benchmarks: 18 compute trays per rack, each
a node of 4 GPUs (two Grace CPUs, GPUs 0-1 and 2-3 on NUMA nodes 0 and 1) whose pairs are
NV18 (the 18 NVLink 5 links of a Blackwell GPU, all through the rack's NVLink switches),
and every GPU of a rack in one NVLink domain: GPU Feature Discovery's label
nvidia.com/gpu.clique=<ClusterUUID>.<CliqueId> names it, one ClusterUUID per rack (made
up, deterministic) and clique 0 (the whole rack, no partitions). Racks sit in blocks of 2
and spines of 8 (topograph's network.topology.nvidia.com/* keys), one zone.

--kind h100, 8-GPU HGX H100 nodes (every pair NV18, GPUs 0-3 and 4-7 on NUMA 0 and 1)
with topograph-style labels: two zones, spines of 32 nodes, blocks (racks) of 8, the keys
of troupe's default gang levels (gang_default_levels).

In both gang clusters a deterministic share of the nodes cannot take pods, as a snapshot
shows them (cache_snapshot_load reads spec.unschedulable and the Ready condition): every
53rd node is cordoned (spec.unschedulable and the node.kubernetes.io/unschedulable
taint) and every 71st NotReady (Ready Unknown, NodeStatusUnknown, the unreachable
taints), about 3 % in all. No pods: the clusters start empty. Deterministic; Python
standard library only.
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


def nv_topo(gpus, numa_split):
    """`nvidia-smi topo -m` for <gpus> GPUs, every pair NV18."""
    out = "\t" + "\t".join(f"GPU{i}" for i in range(gpus)) + "\tCPU Affinity\tNUMA Affinity\n"
    for i in range(gpus):
        cells = [" X " if i == j else "NV18" for j in range(gpus)]
        numa = i // numa_split
        cpus = "0-71" if numa == 0 else "72-143"
        out += f"GPU{i}\t" + "\t".join(cells) + f"\t{cpus}\t{numa}\n"
    return out


CORDON_EVERY, NOT_READY_EVERY = 53, 71


def gang_node(i, name, gpus, labels, topo, product):
    """A node of a gang cluster; node i is cordoned or NotReady on the deterministic
    shares above."""
    res = {"cpu": "144", "memory": "1981808640Ki", "pods": "110", "nvidia.com/gpu": str(gpus)}
    labels = dict(labels, **{"kubernetes.io/hostname": name, "nvidia.com/gpu.product": product,
                             "nvidia.com/gpu.count": str(gpus)})
    spec, ready = {}, {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    if i % CORDON_EVERY == CORDON_EVERY - 1:
        spec = {"unschedulable": True,
                "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}
    elif i % NOT_READY_EVERY == NOT_READY_EVERY - 1:
        spec = {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
                           {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}
        ready = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                 "message": "Kubelet stopped posting node status."}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"gang-node-{i:05d}",
                     "resourceVersion": str(1000 + i), "labels": labels,
                     "annotations": {"troupe.io/gpu-topology": topo}},
        "spec": spec,
        "status": {"capacity": res, "allocatable": dict(res), "conditions": [ready]},
    }


def nvl72_nodes(racks):
    topo, out = nv_topo(4, 2), []
    for r in range(racks):
        # A made-up, deterministic ClusterUUID per rack (GFD reads the real one from
        # the fabric manager); clique 0 is the whole rack.
        uuid = f"{0x6b1d0000 + r:08x}-72aa-4c1e-9e00-{r:012x}"
        for t in range(18):
            i = r * 18 + t
            labels = {"topology.kubernetes.io/zone": "zone-a",
                      "network.topology.nvidia.com/spine": f"spine-{r // 8}",
                      "network.topology.nvidia.com/block": f"block-{r // 2}",
                      "nvidia.com/gpu.clique": f"{uuid}.0"}
            out.append(gang_node(i, f"gb200-r{r:02d}-t{t:02d}", 4, labels, topo,
                                 "NVIDIA-GB200"))
    return out


def h100_nodes(n):
    topo = nv_topo(8, 4)
    return [gang_node(i, f"h100-{i:04d}", 8,
                      {"topology.kubernetes.io/zone": f"zone-{'ab'[i * 2 // n]}",
                       "network.topology.nvidia.com/spine": f"spine-{i // 32}",
                       "network.topology.nvidia.com/block": f"rack-{i // 8}"},
                      topo, "NVIDIA-H100-80GB-HBM3")
            for i in range(n)]


# mig-parted's "all-balanced" for an H100-80GB (its config-default.yaml): on
# every GPU two 1g.10gb, one 2g.20gb and one 3g.40gb MIG device.
MIG_BALANCED = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}


def mig_nodes(n):
    """8-GPU H100 nodes with every GPU cut as all-balanced, the device plugin's
    MIG strategy mixed: nvidia.com/mig-<profile> resources and GFD's labels."""
    out = []
    for i in range(n):
        name = f"mig-{i:04d}"
        res = {"cpu": "144", "memory": "1981808640Ki", "pods": "110"}
        labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                  "nvidia.com/gpu.count": "8", "nvidia.com/mig.strategy": "mixed",
                  "nvidia.com/mig.config": "all-balanced", "nvidia.com/mig.capable": "true",
                  "network.topology.nvidia.com/block": f"rack-{i // 8}"}
        for profile, per_gpu in MIG_BALANCED.items():
            res[f"nvidia.com/mig-{profile}"] = str(8 * per_gpu)
            labels[f"nvidia.com/mig-{profile}.count"] = str(8 * per_gpu)
            labels[f"nvidia.com/mig-{profile}.product"] = f"NVIDIA-H100-80GB-HBM3-MIG-{profile}"
        out.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"mig-node-{i:05d}",
                         "resourceVersion": str(1000 + i), "labels": labels},
            "spec": {},
            "status": {"capacity": res, "allocatable": dict(res), "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
        })
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kind", choices=("mixed", "nvl72", "h100", "mig"), default="mixed",
                    help="the cluster: the placement benchmark's four machine types "
                    "(mixed), GB200 NVL72 racks, 8-GPU H100 nodes, or 8-GPU H100 nodes "
                    "cut into MIG devices (mig: strategy mixed, all-balanced)")
    ap.add_argument("--nodes", type=int, default=None,
                    help="nodes (mixed: 64, h100: 128, mig: 32; not for nvl72)")
    ap.add_argument("--racks", type=int, default=16, help="NVL72 racks of 18 nodes (nvl72)")
    ap.add_argument("--out", default=None, help="the file to write (default: the example's "
                    "path under config/examples/)")
    a = ap.parse_args()
    if a.kind == "nvl72" and a.nodes is not None:
        ap.error("--kind nvl72 counts racks: use --racks")
    if a.kind == "mixed":
        items = [node(i) for i in range(a.nodes or 64)]
        a.out = a.out or "config/examples/cluster-sim-64.json"
    elif a.kind == "nvl72":
        items = nvl72_nodes(a.racks)
        a.out = a.out or "config/examples/cluster-gang-nvl72.json"
    elif a.kind == "mig":
        items = mig_nodes(a.nodes or 32)
        a.out = a.out or "config/examples/cluster-mig-mixed.json"
    else:
        items = h100_nodes(a.nodes or 128)
        a.out = a.out or "config/examples/cluster-gang-h100.json"
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
           "items": items}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
