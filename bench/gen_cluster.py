#!/usr/bin/env python3
"""Generate a benchmark cluster and the request bodies kube-scheduler would send.

    gen_cluster.py --nodes N [--seed S] [--occupancy F] [--full-nodes 100,500,2500]
                   [--names 500,N] --out DIR

Writes into DIR:

  cluster.json          a v1 List of Nodes, Pods and PodGroups, as `kubectl get
                        nodes,pods,podgroups -A -o json` prints it: troupe loads it
                        with --cluster, so runs need no API server.
  filter-names-K.json   ExtenderArgs for a 1-GPU pod with K NodeNames (a
                        nodeCacheCapable extender; kube-scheduler samples about 500
                        of 5,000 nodes by default, all of them with
                        percentageOfNodesToScore: 100). K = each --names size.
  prioritize-names-K.json  the same pod and names, for prioritize.
  filter-nodes-K.json   ExtenderArgs with K full Node objects (not nodeCacheCapable).
  bind-K.json           ExtenderBindingArgs for the pod, to the first named node.
  names-K.txt           the K names, one a line (bench/wrk/sequence.lua binds to them).
  manifest.json         what was generated (sizes, bytes, seed).

Nodes are a realistic fleet: names like `dgx-h100-z1-s03-b12-n07`, the labels a GPU
node carries (hostname, instance type, zone, NVIDIA topograph's network tiers and
accelerator domain, GPU Feature Discovery's product and count), some taints and
cordons, and three board kinds in equal shares: 8-GPU NVSwitch (HGX H100 profile),
8-GPU hybrid cube-mesh (DGX-1 V100 profile) and 8-GPU PCIe servers (their
`nvidia-smi topo -m` text in the troupe.io/gpu-topology annotation). Existing
occupancy: pods of 1, 2, 4 and 8 GPUs bound with troupe.io/gpu-ids until about
--occupancy of the GPUs are used, plus some bound gangs with their PodGroups.
Full Node objects carry what a real kubelet reports (addresses, nodeInfo, images,
conditions), about 4-5 KB each. Python standard library only; deterministic per seed.
"""
import argparse
import json
import os
import random

KINDS = ("nvswitch", "cubemesh", "pcie")
PRODUCT = {"nvswitch": "NVIDIA-H100-80GB-HBM3", "cubemesh": "Tesla-V100-SXM2-32GB",
           "pcie": "NVIDIA-L40S"}
INSTANCE = {"nvswitch": "p5.48xlarge", "cubemesh": "p3dn.24xlarge", "pcie": "g6e.48xlarge"}


def pcie_topo():
    """`nvidia-smi topo -m` of an 8-GPU PCIe server: pairs under one switch (PIX),
    switches of a socket behind host bridges (PXB), the sockets across SYS."""
    head = "\t" + "\t".join(f"GPU{i}" for i in range(8)) + "\tCPU Affinity\tNUMA Affinity\n"
    rows = []
    for i in range(8):
        cells = []
        for j in range(8):
            if i == j:
                cells.append(" X ")
            elif i // 2 == j // 2:
                cells.append("PIX")
            elif i // 4 == j // 4:
                cells.append("PXB")
            else:
                cells.append("SYS")
        cpus = "0-47" if i < 4 else "48-95"
        rows.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{cpus}\t{i // 4}\n")
    return head + "".join(rows)


PCIE_TOPO = pcie_topo()


class Fleet:
    def __init__(self, n, seed, occupancy):
        self.rng = random.Random(seed)
        self.n = n
        self.occupancy = occupancy
        self.nodes = []         # (name, kind, labels, taints, unschedulable)
        self.used = {}          # name -> set of device indices
        self.pods = []
        self.groups = []

    def build(self):
        rng = self.rng
        # Zones of up to 2,048 nodes, spines of 256, blocks (racks) of 32, NVLink
        # domains of 8 for the NVSwitch boards.
        for i in range(self.n):
            kind = KINDS[i % 3]
            zone, spine, block = i // 2048, (i // 256) % 8, (i // 32) % 8
            name = (f"{'dgx' if kind != 'pcie' else 'gpu'}-{PRODUCT[kind].split('-')[1].lower()}"
                    f"-z{zone}-s{spine:02d}-b{block:02d}-n{i % 32:02d}-{i:05d}")
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": INSTANCE[kind],
                "topology.kubernetes.io/region": "us-east-1",
                "topology.kubernetes.io/zone": f"us-east-1{'abcdefghijklmnopqrstuvwxyz'[zone % 26]}",
                "fabric.topograph.run/tier-3": f"dc-{zone}",
                "fabric.topograph.run/tier-2": f"spine-{zone}-{spine}",
                "fabric.topograph.run/tier-1": f"block-{zone}-{spine}-{block}",
                "nvidia.com/gpu.product": PRODUCT[kind],
                "nvidia.com/gpu.count": "8",
                "nvidia.com/gpu.memory": "81559" if kind == "nvswitch" else "32768",
                "nvidia.com/cuda.driver.major": "550",
                "feature.node.kubernetes.io/pci-10de.present": "true",
            }
            if kind == "nvswitch":
                labels["accelerator.topograph.run/domain"] = f"nvl-{i // 8}"
            taints = []
            if rng.random() < 0.3:
                taints.append({"key": "nvidia.com/gpu", "value": "present",
                               "effect": "NoSchedule"})
            if rng.random() < 0.02:
                taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"})
            unschedulable = rng.random() < 0.01
            self.nodes.append((name, kind, labels, taints, unschedulable))
            self.used[name] = set()
        # Occupancy: single pods until the target share of GPUs is used.
        target = int(self.n * 8 * self.occupancy)
        held = 0
        sizes = (1, 2, 4, 8)
        weights = (40, 25, 20, 15)
        k = 0
        tries = 0
        while held < target and tries < self.n * 20:
            tries += 1
            size = rng.choices(sizes, weights)[0]
            name = self.nodes[rng.randrange(self.n)][0]
            free = [d for d in range(8) if d not in self.used[name]]
            if len(free) < size:
                continue
            ids = sorted(rng.sample(free, size))
            self.used[name].update(ids)
            held += size
            self.pods.append(self.pod(f"team-{k % 17}", f"job-{k}", name, size, ids))
            k += 1
        # A few bound gangs of 8-GPU members, each with its PodGroup.
        empty = [nd[0] for nd in self.nodes if not self.used[nd[0]]]
        rng.shuffle(empty)
        for g in range(min(8, len(empty) // 8)):
            group = f"llm-{g}"
            self.groups.append({"apiVersion": "scheduling.x-k8s.io/v1alpha1",
                                "kind": "PodGroup",
                                "metadata": {"name": group, "namespace": "research",
                                             "uid": f"pg-{g}"},
                                "spec": {"minMember": 4, "scheduleTimeoutSeconds": 60}})
            for m in range(4):
                node = empty.pop()
                self.used[node].update(range(8))
                self.pods.append(self.pod("research", f"{group}-{m}", node, 8, list(range(8)),
                                          group=group))

    def pod(self, ns, name, node, gpus, ids, group=None):
        labels = {"app": name.rsplit("-", 1)[0]}
        if group:
            labels["scheduling.x-k8s.io/pod-group"] = group
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}",
                             "labels": labels,
                             "annotations": {"troupe.io/gpu-ids": ",".join(map(str, ids))}},
                "spec": {"nodeName": node, "schedulerName": "default-scheduler",
                         "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05",
                                         "resources": {"limits": {"nvidia.com/gpu": str(gpus)},
                                                       "requests": {"cpu": str(4 * gpus),
                                                                    "memory": f"{32 * gpus}Gi"}}}]},
                "status": {"phase": "Running"}}

    def node_object(self, idx, full):
        name, kind, labels, taints, unschedulable = self.nodes[idx]
        md = {"name": name, "labels": labels, "uid": f"node-uid-{idx:05d}",
              "resourceVersion": str(1000 + idx)}
        if kind == "pcie":
            md["annotations"] = {"troupe.io/gpu-topology": PCIE_TOPO}
        spec = {}
        if taints:
            spec["taints"] = taints
        if unschedulable:
            spec["unschedulable"] = True
        res = {"cpu": "192", "memory": "2113389628Ki", "pods": "110",
               "ephemeral-storage": "7499362032Ki", "nvidia.com/gpu": "8",
               "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
        status = {"capacity": dict(res), "allocatable": dict(res, cpu="191500m"),
                  "conditions": [
                      {"type": t, "status": "False", "reason": f"KubeletHas{r}",
                       "lastHeartbeatTime": "2026-11-29T10:00:00Z",
                       "lastTransitionTime": "2026-11-01T08:00:00Z"}
                      for t, r in (("MemoryPressure", "SufficientMemory"),
                                   ("DiskPressure", "NoDiskPressure"),
                                   ("PIDPressure", "SufficientPID"))] + [
                      {"type": "Ready", "status": "True", "reason": "KubeletReady",
                       "message": "kubelet is posting ready status",
                       "lastHeartbeatTime": "2026-11-29T10:00:00Z",
                       "lastTransitionTime": "2026-11-01T08:00:00Z"}]}
        if full:
            ip = f"10.{(idx >> 16) & 255}.{(idx >> 8) & 255}.{idx & 255}"
            md["creationTimestamp"] = "2026-11-01T08:00:00Z"
            md["annotations"] = dict(md.get("annotations", {}), **{
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"})
            spec["podCIDR"] = f"100.{64 + (idx >> 8) % 64}.{idx & 255}.0/24"
            spec["providerID"] = f"aws:///us-east-1a/i-0{idx:016x}"
            status["addresses"] = [{"type": "InternalIP", "address": ip},
                                   {"type": "Hostname", "address": name}]
            status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
            status["nodeInfo"] = {
                "machineID": f"{idx:032x}", "systemUUID": f"ec2{idx:029x}",
                "bootID": f"{idx * 7919:032x}", "kernelVersion": "6.1.0-28-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": "v1.31.2", "kubeProxyVersion": "v1.31.2",
                "operatingSystem": "linux", "architecture": "amd64"}
            status["images"] = [
                {"names": [f"nvcr.io/nvidia/{img}@sha256:{(idx * 31 + k) * 977:064x}",
                           f"nvcr.io/nvidia/{img}"], "sizeBytes": 9000000000 + k * 1000}
                for k, img in enumerate(("pytorch:24.05-py3", "tritonserver:24.05-py3",
                                         "k8s-device-plugin:v0.16.2", "dcgm-exporter:3.3.7",
                                         "gpu-feature-discovery:v0.16.2",
                                         "cuda:12.4.1-base-ubuntu22.04"))]
        return {"apiVersion": "v1", "kind": "Node", "metadata": md, "spec": spec,
                "status": status}


def extender_pod(gpus=1):
    """The pod kube-scheduler asks about: a 1-GPU training worker."""
    return {"metadata": {"name": "bench-0", "namespace": "ml", "uid": "bench-pod-0",
                         "labels": {"app": "bench"}},
            "spec": {"schedulerName": "default-scheduler",
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                      "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)},
                                                   "requests": {"cpu": "8",
                                                                "memory": "64Gi"}}}]},
            "status": {"phase": "Pending"}}


def write(path, obj):
    data = json.dumps(obj, separators=(",", ":"))
    with open(path, "w") as f:
        f.write(data)
    return len(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, required=True, help="how many nodes")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--occupancy", type=float, default=0.5,
                    help="share of GPUs already used by bound pods (default 0.5)")
    ap.add_argument("--names", default="500,all",
                    help="NodeNames body sizes, comma-separated; 'all' = every node")
    ap.add_argument("--full-nodes", default="100,500,2500",
                    help="full Nodes body sizes (capped at --nodes)")
    ap.add_argument("--out", required=True, help="output directory")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    fleet = Fleet(a.nodes, a.seed, a.occupancy)
    fleet.build()
    items = [fleet.node_object(i, full=False) for i in range(a.nodes)] + fleet.groups + fleet.pods
    manifest = {"nodes": a.nodes, "seed": a.seed, "pods": len(fleet.pods),
                "podgroups": len(fleet.groups), "bodies": {}}
    manifest["cluster_bytes"] = write(os.path.join(a.out, "cluster.json"),
                                      {"apiVersion": "v1", "kind": "List",
                                       "metadata": {"resourceVersion": ""}, "items": items})
    rng = random.Random(a.seed + 1)
    names_all = [nd[0] for nd in fleet.nodes]
    pod = extender_pod()
    for size in a.names.split(","):
        k = a.nodes if size == "all" else min(int(size), a.nodes)
        # kube-scheduler sends the nodes that passed its own filters, from a
        # rotating start index: a contiguous run of the node list.
        start = rng.randrange(a.nodes)
        names = [names_all[(start + i) % a.nodes] for i in range(k)]
        args = {"Pod": pod, "Nodes": None, "NodeNames": names}
        manifest["bodies"][f"filter-names-{k}"] = write(
            os.path.join(a.out, f"filter-names-{k}.json"), args)
        manifest["bodies"][f"prioritize-names-{k}"] = write(
            os.path.join(a.out, f"prioritize-names-{k}.json"), args)
        with open(os.path.join(a.out, f"names-{k}.txt"), "w") as f:
            f.write("\n".join(names) + "\n")
        manifest["bodies"][f"bind-{k}"] = write(
            os.path.join(a.out, f"bind-{k}.json"),
            {"PodName": pod["metadata"]["name"], "PodNamespace": "ml",
             "PodUID": pod["metadata"]["uid"], "Node": names[0]})
    for size in a.full_nodes.split(","):
        k = min(int(size), a.nodes)
        start = rng.randrange(a.nodes)
        objs = [fleet.node_object((start + i) % a.nodes, full=True) for i in range(k)]
        manifest["bodies"][f"filter-nodes-{k}"] = write(
            os.path.join(a.out, f"filter-nodes-{k}.json"),
            {"Pod": pod, "Nodes": {"items": objs}, "NodeNames": None})
    write(os.path.join(a.out, "manifest.json"), manifest)
    print(json.dumps(manifest))


if __name__ == "__main__":
    main()
