#!/usr/bin/env python3
"""Write the fuzzer's seed corpus, tests/data/fuzz/<target>/, from the test
cluster (tests/data/cluster.json) and the request shapes of
docs/kube-interfaces.md: small valid examples of each body and object, and a
few hostile ones. Files already there are kept (crashes added by hand stay);
run it again after changing the examples below.

    python3 tests/fuzz/make_corpus.py
"""
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
OUT = ROOT / "tests" / "data" / "fuzz"
cluster = json.loads((ROOT / "tests" / "data" / "cluster.json").read_text())
items = cluster["items"]
nodes = [i for i in items if i["kind"] == "Node"]
pods = [i for i in items if i["kind"] == "Pod"]
groups = [i for i in items if i["kind"] == "PodGroup"]
names = [n["metadata"]["name"] for n in nodes]


def dump(o):
    # Python writes float("inf") as Infinity, which is no JSON: 1e309 is, and
    # reads as infinity.
    return json.dumps(o, separators=(",", ":")).replace("Infinity", "1e309")


def pod(name, gpus, extra_meta=None, spec_extra=None):
    meta = {"name": name, "namespace": "ml", "uid": "uid-" + name}
    meta.update(extra_meta or {})
    spec = {"schedulerName": "default-scheduler", "containers": [
        {"name": "worker", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    spec.update(spec_extra or {})
    return {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


P4 = pod("train-0", 4)
P8 = pod("llm-worker-0", 8, {"uid": "6f1c2a3e-0000-4000-8000-000000000010"})
PGANG = pod("g-0", 2, {"labels": {"scheduling.x-k8s.io/pod-group": "llm"},
                       "annotations": {"troupe.io/topology": "nvlink"}})
PINIT = pod("init-0", 1, spec_extra={"initContainers": [
    {"name": "i", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
    {"name": "side", "restartPolicy": "Always",
     "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "500m"}}}],
    "overhead": {"cpu": "250m", "memory": "64Mi"}, "priority": 1000})


def names_args(p, ns):
    return {"Pod": p, "Nodes": None, "NodeNames": ns}


def full_args(p, ns):
    return {"Pod": p, "Nodes": {"metadata": {}, "items": ns}, "NodeNames": None}


verbs = {
    "names-4": dump(names_args(P4, names + ["ghost-0"])),
    "names-8": dump(names_args(P8, names)),
    "names-gang": dump(names_args(PGANG, names[:3])),
    "names-init": dump(names_args(PINIT, names)),
    "names-empty": dump(names_args(P4, [])),
    "full-4": dump(full_args(P4, nodes[:3])),
    "full-8": dump(full_args(P8, nodes)),
    "spaced": json.dumps(names_args(P4, names[:4]), indent=1),
    "escaped-names": '{"Pod":' + dump(P4) + ',"Nodes":null,"NodeNames":["gpu-\\u0061100-0",'
                     '"gpu-h100-1","\\u00e9t\\u00e9"]}',
    "names-first": '{"NodeNames":["gpu-a100-0","cpu-0"],"Pod":' + dump(P4) + ',"Nodes":null}',
    "nested-nodenames": '{"Pod":{"metadata":{"name":"a","namespace":"ml","uid":"u",'
                        '"annotations":{"x":"\\"NodeNames\\":[\\"cpu-0\\"]"}},"spec":{}},'
                        '"NodeNames":["gpu-h100-1"]}',
    "hostile-dup": '{"Pod":' + dump(P4) + ',"NodeNames":["gpu-a100-0"],'
                   '"NodeNames":["cpu-0"],"Nodes":null}',
    "hostile-numbers": dump(names_args(pod("n-0", 1, spec_extra={"priority": 1e300}),
                                       names[:2])).replace("1e+300", "1e309"),
    "hostile-quantity": dump(names_args(pod("q-0", "9223372036854775808"), names[:2])),
    "hostile-escape": '{"Pod":' + dump(P4) + ',"NodeNames":["gpu-a100-0\\u00zz","\\ud800"]}',
}
bind = {
    "bind-pending": dump({"PodName": "llm-worker-0", "PodNamespace": "ml",
                          "PodUID": "6f1c2a3e-0000-4000-8000-000000000010",
                          "Node": "gpu-h100-1"}),
    "bind-unknown": dump({"PodName": "train-0", "PodNamespace": "ml", "PodUID": "uid-train-0",
                          "Node": "gpu-a100-1"}),
    "bind-full": dump({"PodName": "llm-worker-1", "PodNamespace": "ml",
                       "PodUID": "6f1c2a3e-0000-4000-8000-000000000011",
                       "Node": "gpu-a100-0"}),
    "bind-bound": dump({"PodName": "resnet-0", "PodNamespace": "ml",
                        "PodUID": "6f1c2a3e-0000-4000-8000-000000000001",
                        "Node": "gpu-a100-1"}),
    "bind-ghost": dump({"PodName": "x", "PodNamespace": "ml", "PodUID": "u", "Node": "ghost"}),
    "hostile-dup": '{"PodName":"llm-worker-0","PodNamespace":"ml","PodUID":'
                   '"6f1c2a3e-0000-4000-8000-000000000010","Node":"gpu-h100-1",'
                   '"Node":"cpu-0"}',
    "hostile-escape": '{"PodName":"llm-worker-0\\u00zz","PodNamespace":"ml","PodUID":'
                      '"6f1c2a3e-0000-4000-8000-000000000010","Node":"gpu-h100-1\\u0000"}',
    "hostile-types": '{"PodName":1e309,"PodNamespace":null,"PodUID":[],"Node":{}}',
}
uids = [p["metadata"]["uid"] for p in pods]
preempt = {
    "meta": dump({"Pod": P8, "NodeNameToVictims": None, "NodeNameToMetaVictims": {
        "gpu-a100-0": {"Pods": [{"UID": uids[0]}], "NumPDBViolations": 0},
        "gpu-h100-0": {"Pods": [{"UID": uids[1]}, {"UID": "unknown"}], "NumPDBViolations": 1},
        "gpu-v100-0": {"Pods": [{"UID": uids[2]}], "NumPDBViolations": 0}}}),
    "full": dump({"Pod": P8, "NodeNameToMetaVictims": None, "NodeNameToVictims": {
        "gpu-a100-0": {"Pods": [pods[0]], "NumPDBViolations": 0},
        "gpu-h100-0": {"Pods": [pods[1]], "NumPDBViolations": 2}}}),
    "gang": dump({"Pod": PGANG, "NodeNameToMetaVictims": {
        "gpu-a100-0": {"Pods": [{"UID": uids[0]}], "NumPDBViolations": 0}}}),
    "cpu-pod": dump({"Pod": pod("c", 0), "NodeNameToMetaVictims": {
        "cpu-0": {"Pods": [{"UID": uids[4]}], "NumPDBViolations": 0}}}),
    "hostile-pdb": '{"Pod":' + dump(P8) + ',"NodeNameToMetaVictims":{"gpu-a100-0":{"Pods":'
                   '[{"UID":"' + uids[0] + '"}],"NumPDBViolations":1e309}}}',
    "hostile-dup": '{"Pod":' + dump(P8) + ',"NodeNameToMetaVictims":{"gpu-a100-0":{"Pods":'
                   '[{"UID":"' + uids[0] + '"}],"Pods":[],"NumPDBViolations":0}},'
                   '"NodeNameToMetaVictims":{}}',
    "hostile-many": dump({"Pod": P8, "NodeNameToMetaVictims": {"gpu-a100-0": {
        "Pods": [{"UID": "v-%d" % i} for i in range(300)] + [{"UID": uids[0]}],
        "NumPDBViolations": 0}}}),
}
objects = {}
for o in nodes[:3] + nodes[5:7] + pods[:2] + pods[5:6] + groups:
    objects[o["kind"].lower() + "-" + o["metadata"]["name"]] = dump(o)
objects["node-hostile"] = dump({
    "metadata": {"name": "h", "labels": {"b": "1", "a": "2", "a ": "3"},
                 "annotations": {"troupe.io/gpu-unhealthy": "0,63,64,-1",
                                 "troupe.io/gpu-uuids": "GPU-a,,GPU-b",
                                 "troupe.io/gpu-topology": "GPU0\tX\n"}},
    "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}, {}]},
    "status": {"capacity": {"nvidia.com/gpu": "1e309", "amd.com/gpu": "4"},
               "allocatable": {"nvidia.com/gpu": "-1", "cpu": "9223372036854775807",
                               "memory": "1Ei"},
               "conditions": [{"type": "Ready", "status": "True"}, {"type": "Ready"}]}})
def shared_node(name, res, labels, alloc=None):
    """A node of the test cluster's first, advertising <res> ({name: count})
    with <labels> from GPU Feature Discovery."""
    n = json.loads(dump(nodes[0]))
    n["metadata"]["name"] = name
    n["metadata"]["labels"] = dict(n["metadata"].get("labels") or {}, **labels)
    n["metadata"]["annotations"] = {"troupe.io/gpu-uuids": ",".join(
        "GPU-%d" % i for i in range(8)), "troupe.io/gpu-unhealthy": "1"}
    n["status"]["capacity"] = dict(res)
    n["status"]["allocatable"] = dict(alloc or res)
    return n


objects["node-time-slicing"] = dump(shared_node("ts", {"nvidia.com/gpu": "32"}, {
    "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}, {"nvidia.com/gpu": "28"}))
objects["node-mps-80"] = dump(shared_node("mps", {"nvidia.com/gpu": "80"}, {
    "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "10"}))
objects["node-mig-single"] = dump(shared_node("ms", {"nvidia.com/gpu": "56"}, {
    "nvidia.com/mig.strategy": "single",
    "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb"}))
objects["node-mig-mixed"] = dump(shared_node("mm", {
    "nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "12", "nvidia.com/mig-2g.20gb": "6"}, {
    "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "8"},
    {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "10", "nvidia.com/mig-2g.20gb": "6"}))
objects["node-sharing-hostile"] = dump(shared_node("sh", {
    "nvidia.com/gpu": "64", "nvidia.com/mig-1g.10gb": "63", "nvidia.com/mig-2g.20gb": "1e309"}, {
    "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "4294967297",
    "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.count": "-3",
    "nvidia.com/gpu.product": "X-MIG-9g.0gb+me-SHARED"}))
objects["pod-slots"] = dump(pod("slots-0", 3, {"annotations": {
    "troupe.io/gpu-ids": "0:1,7:3,99:0,0:1,:,1:"}}, {"nodeName": "ts"}))
objects["pod-hostile"] = dump({
    "metadata": {"name": "p", "namespace": "ml", "uid": "u", "deletionTimestamp": "x",
                 "annotations": {"troupe.io/gpu-ids": "0,0,63,64", "troupe.io/topology": "",
                                 "scheduling.x-k8s.io/min-member": "-5"},
                 "labels": {"troupe.io/queue": ""}},
    "spec": {"nodeName": "", "priority": 2147483648, "containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "4", "amd.com/gpu": "2"},
                       "requests": {"nvidia.com/gpu": "5", "cpu": "1e18"}}}],
             "initContainers": [{"restartPolicy": "Always",
                                 "resources": {"limits": {"nvidia.com/gpu": "4294967296"}}}],
             "overhead": {"memory": "-1"}}, "status": {"phase": "Running"}})
objects["podgroup-hostile"] = dump({
    "metadata": {"name": "g", "namespace": "ml"},
    "spec": {"minMember": 1e309, "scheduleTimeoutSeconds": -0.5,
             "minResources": {"nvidia.com/gpu": "9e18", "cpu": "-1", "memory": "1Ei"}}})


def event(t, o):
    return dump({"type": t, "object": o})


topo_text = (ROOT / "tests" / "data" / "topo" / "dgx-a100.txt").read_text()
node_topo = json.loads(dump(nodes[0]))
node_topo["metadata"]["annotations"] = {"troupe.io/gpu-topology": topo_text,
                                        "troupe.io/gpu-unhealthy": "3"}

watch = {
    "node-topology": event("MODIFIED", node_topo) + "\n",
    "nodes": "\n".join(event("MODIFIED", n) for n in nodes[:3]) + "\n" +
             event("DELETED", nodes[4]) + "\n" +
             event("BOOKMARK", {"metadata": {"resourceVersion": "2001"}}) + "\n",
    "pods": "\n".join(event("ADDED", p) for p in pods[:3]) + "\n" +
            event("DELETED", pods[0]) + "\r\n" +
            event("MODIFIED", dict(pods[5], spec=dict(pods[5]["spec"], nodeName="gpu-h100-1")))
            + "\n",
    "groups": event("ADDED", groups[0]) + "\n" + event("DELETED", groups[0]) + "\n",
    "slices-topology": event("ADDED", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "s0"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": names[0],
                 "pool": {"name": names[0]}, "devices": [
                     {"name": "gpu-%d" % i, "attributes": {
                         "index": {"int": i}, "numaNode": {"int": i // 4},
                         "resource.kubernetes.io/pcieRoot": {"string": "pci%d" % (i // 2)}}}
                     for i in range(8)]}}) + "\n" + event("DELETED", {
        "metadata": {"name": "s0"}, "spec": {"driver": "gpu.nvidia.com"}}) + "\n",
    "error-410": event("ERROR", {"kind": "Status", "code": 410, "message": "too old"}) + "\n",
    "error-huge": event("ERROR", {"kind": "Status", "code": 1e309, "message": "x"}) + "\n",
    "partial": event("ADDED", pods[1]) + "\n" + event("ADDED", pods[2])[:40],
    "unknown": dump({"type": "WHAT", "object": {}}) + "\n\n  \n" + dump({"object": {}}) + "\n",
}
lists = {
    "cluster": dump(cluster),
    "nodes-page": dump({"kind": "NodeList", "metadata": {"resourceVersion": "5",
                                                         "continue": "abc"},
                        "items": nodes[:4]}),
    "pods-page": dump({"kind": "PodList", "metadata": {"resourceVersion": "6"},
                       "items": pods[:4]}),
    "empty": dump({"metadata": {"resourceVersion": "7"}, "items": None}),
    "dup": dump({"metadata": {}, "items": [nodes[0], nodes[0], pods[0], pods[0]]}),
    "node-topology": dump({"metadata": {"resourceVersion": "8"}, "items": [node_topo]}),
}

# The topology target's seeds are the topology parser's own test data.
topo = {p.stem: p.read_text() for p in sorted((ROOT / "tests" / "data" / "topo").glob("*.txt"))}

for target, files in [("topo", topo), ("filter", verbs), ("prioritize", verbs), ("bind", bind),
                      ("preempt", preempt), ("objects", objects), ("watch", watch),
                      ("list", lists)]:
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / (name + (".txt" if target == "topo" else ".json"))).write_text(text)
