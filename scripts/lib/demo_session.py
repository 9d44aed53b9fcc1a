#!/usr/bin/env python3
"""A narrated scheduling session against a running troupe, for scripts/demo.

It plays kube-scheduler's part for a handful of pods (filter, then prioritize,
then bind, exactly as the extender protocol has it) and prints what troupe
answered at each step, then the cluster's GPU state as troupe sees it.
"""
import json
import sys
import threading
import time
import urllib.request

BASE = sys.argv[1]
CLUSTER = sys.argv[2]
# troupe's ops listener (/debug/state): the third argument, else its default.
OPS = sys.argv[3] if len(sys.argv) > 3 else "http://127.0.0.1:8889"


def call(method, path, body=None, base=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request((base or BASE) + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def pod(name, gpus, ns="ml", request_only=False):
    res = {"requests": {"nvidia.com/gpu": str(gpus)}} if request_only else {
        "limits": {"nvidia.com/gpu": str(gpus)}}
    return {"metadata": {"name": name, "namespace": ns, "uid": f"demo-{ns}-{name}"},
            "spec": {"containers": [{"name": "main", "image": "trainer:1", "resources": res}]}}


def bold(s):
    return f"\033[1m{s}\033[0m" if sys.stdout.isatty() else s


with open(CLUSTER) as f:
    nodes = [i["metadata"]["name"] for i in json.load(f)["items"] if i["kind"] == "Node"]


def schedule(step, p, gpus):
    name = f'{p["metadata"]["namespace"]}/{p["metadata"]["name"]}'
    print(bold(f"[{step}] pod {name} asks for {gpus} x nvidia.com/gpu"))
    _, f = call("POST", "/filter", {"Pod": p, "Nodes": None, "NodeNames": nodes})
    if f.get("Error"):
        print(f"    filter      error (kube-scheduler reports it on the pod): {f['Error']}\n")
        return
    fit = f["NodeNames"]
    print(f"    filter      {len(fit)} of {len(nodes)} nodes fit: {', '.join(fit) or '-'}")
    refused = dict(f["FailedNodes"])
    refused.update(f["FailedAndUnresolvableNodes"])
    for node, why in sorted(refused.items()):
        kind = "never" if node in f["FailedAndUnresolvableNodes"] else "not now"
        print(f"        x {node:<12} {why}  ({kind})")
    if not fit:
        print("    -> unschedulable for now; kube-scheduler retries after the next cluster event\n")
        return
    if len(fit) == 1:
        host = fit[0]
        print(f"    prioritize  skipped: only {host} is feasible")
    else:
        _, scores = call("POST", "/prioritize", {"Pod": p, "Nodes": None, "NodeNames": fit})
        scores.sort(key=lambda s: (-s["Score"], s["Host"]))
        print("    prioritize  " + "  ".join(f'{s["Host"]}={s["Score"]}' for s in scores)
              + "   (0-10; fuller nodes first)")
        host = scores[0]["Host"]
    _, b = call("POST", "/bind", {"PodName": p["metadata"]["name"],
                                  "PodNamespace": p["metadata"]["namespace"],
                                  "PodUID": p["metadata"]["uid"], "Node": host})
    if b["Error"]:
        print(f"    bind        {host}: refused: {b['Error']}\n")
    else:
        print(f"    bind        -> {bold(host)}\n")


_, state = call("GET", "/debug/state", base=OPS)
st = state["stats"]
print(f"cluster {CLUSTER}: {st['nodes']} nodes, {st['gpusAllocatable']} GPUs allocatable, "
      f"{st['gpusHeld']} already held by running pods\n")


def gang_demo():
    """The example cluster's PodGroup ml/llm wants 2 workers x 8 GPUs together."""
    members = [{"metadata": {"name": f"llm-worker-{i}", "namespace": "ml",
                             "uid": f"6f1c2a3e-0000-4000-8000-00000000001{i}",
                             "labels": {"scheduling.x-k8s.io/pod-group": "llm"}},
                "spec": {"containers": [{"name": "main", "resources": {
                    "limits": {"nvidia.com/gpu": "8"}}}]}} for i in range(2)]
    print(bold("[gang] pod group ml/llm: 2 workers x 8 GPUs, all or nothing (PodGroup minMember 2)"))
    answers = {}

    def bind(p, node):
        md = p["metadata"]
        _, answers[md["name"]] = call("POST", "/bind", {
            "PodName": md["name"], "PodNamespace": "ml", "PodUID": md["uid"], "Node": node})

    threads = []
    for p in members:
        _, f = call("POST", "/filter", {"Pod": p, "Nodes": None, "NodeNames": nodes})
        fit = f["NodeNames"]
        print(f"    filter      {p['metadata']['name']}: planned slots on {', '.join(fit)}; "
              f"other nodes: {next(iter(f['FailedNodes'].values()), '-')}")
        t = threading.Thread(target=bind, args=(p, fit[0]))
        t.start()
        threads.append(t)
        time.sleep(0.3)
        if len(threads) == 1:
            print(f"    bind        {p['metadata']['name']} -> {fit[0]}: held (waiting for the "
                  f"rest of the gang; answered: {p['metadata']['name'] in answers})")
    for t in threads:
        t.join()
    for name in sorted(answers):
        print(f"    bind        {name}: {'bound' if not answers[name]['Error'] else answers[name]['Error']}")
    print("    -> quorum reached: every held binding was released together\n")


plan = [("llama-ft", 4, {}), ("resnet-sweep-1", 2, {}), ("resnet-sweep-2", 2, {}),
        ("gang", 0, {}), ("big-train", 8, {}), ("notebook", 1, {"ns": "research"}),
        ("typo", 2, {"request_only": True}), ("too-big", 16, {})]
for i, (name, gpus, kw) in enumerate(plan, 1):
    if name == "gang":
        gang_demo()
        continue
    schedule(i, pod(name, gpus, **kw), gpus)

# kube-scheduler retries a bind whose reply it lost: troupe answers it again.
_, b = call("POST", "/bind", {"PodName": "llama-ft", "PodNamespace": "ml",
                              "PodUID": "demo-ml-llama-ft", "Node": "gpu-a100-0"})
print(bold("[retry] bind ml/llama-ft again (a lost reply)") +
      f"\n    bind        {'accepted: same pod, same node, nothing changes' if not b['Error'] else b['Error']}\n")

_, state = call("GET", "/debug/state", base=OPS)
print(bold("GPU state as troupe sees it"))
print(f"    {'node':<12} {'ready':<6} {'cordon':<7} {'free/alloc':<11} devices held by troupe-known pods")
for n in sorted(state["nodes"], key=lambda n: n["name"]):
    if n["gpuCapacity"] == 0:
        continue
    extra = f" (+{n['gpuUnattributed']} held, devices unknown)" if n["gpuUnattributed"] else ""
    print(f"    {n['name']:<12} {str(n['ready']).lower():<6} {str(n['unschedulable']).lower():<7} "
          f"{n['gpuFree']:>2}/{n['gpuAllocatable']:<8} {n['devicesHeld'] or '-'}{extra}")
print("\nThe full HTTP surface, flags and annotations: docs/operations.md, docs/reference.md.")
