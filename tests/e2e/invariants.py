"""troupe's two safety invariants, checked from the API server's state alone.

  1. No device is promised twice: no (node, GPU index) is held by two live
     pods (bound, not Succeeded or Failed; a terminating pod still holds its
     devices). A pod holds its troupe.io/gpu-ids-actual when valid (the
     devices the node agent read back from the kubelet: what troupe counts),
     else its troupe.io/gpu-ids.
  2. No gang is left partly bound: every gang has no member bound, or at least
     its minimum bound (members that ran and Succeeded count as bound).

The checker reads only what any client of the cluster can read (pods, the
scheduling.x-k8s.io PodGroups and, where served, the scheduling.k8s.io
PodGroups), never troupe's own endpoints, so it also holds troupe to account
across its restarts. Used after every end-to-end test and at every kill point.
"""
import collections
import time

GANG_LABELS = ("scheduling.x-k8s.io/pod-group", "scheduling.sigs.k8s.io/pod-group",
               "pod-group.scheduling.sigs.k8s.io", "pod-group.scheduling.sigs.k8s.io/name")


def gang_of(pod):
    """namespace/name of the pod's gang, and which API names its quorum, or None."""
    md = pod["metadata"]
    sg = (pod.get("spec", {}).get("schedulingGroup") or {}).get("podGroupName")
    if sg:
        return "%s/%s" % (md["namespace"], sg), "scheduling.k8s.io"
    labels = md.get("labels") or {}
    for key in GANG_LABELS:
        if labels.get(key):
            return "%s/%s" % (md["namespace"], labels[key]), "scheduling.x-k8s.io"
    return None


def _live(pod):
    return bool(pod["spec"].get("nodeName")) and pod["status"].get("phase") not in ("Succeeded",
                                                                                   "Failed")


def _items(cluster, path):
    status, out = cluster.request("GET", path)
    if status == 404:
        return []
    if status != 200:
        raise AssertionError("GET %s: %s %s" % (path, status, out))
    return out["items"]


def minimums(cluster):
    """Gang -> minimum, from both PodGroup APIs."""
    mins = {}
    for pg in _items(cluster, "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"):
        m = (pg.get("spec") or {}).get("minMember")
        if m:
            mins[("%s/%s" % (pg["metadata"]["namespace"], pg["metadata"]["name"]),
                  "scheduling.x-k8s.io")] = m
    for pg in _items(cluster, "/apis/%s/podgroups" % cluster.workload_api):
        gang = ((pg.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}
        if gang.get("minCount"):
            mins[("%s/%s" % (pg["metadata"]["namespace"], pg["metadata"]["name"]),
                  "scheduling.k8s.io")] = gang["minCount"]
    return mins


def violations(cluster):
    """Every breach of the two invariants in the cluster now, as sentences."""
    pods = _items(cluster, "/api/v1/pods")
    out = []
    holders = collections.defaultdict(list)
    for p in pods:
        if not _live(p):
            continue
        ann = p["metadata"].get("annotations") or {}
        ids = ann.get("troupe.io/gpu-ids")
        actual = ann.get("troupe.io/gpu-ids-actual")
        if actual and ids and len(actual.split(",")) == len(ids.split(",")):
            ids = actual
        if not ids:
            continue
        for i in ids.split(","):
            holders[(p["spec"]["nodeName"], i.strip())].append(
                "%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]))
    for (node, dev), who in sorted(holders.items()):
        if len(who) > 1:
            out.append("GPU %s of node %s is held by %d live pods: %s"
                       % (dev, node, len(who), ", ".join(who)))
    mins = minimums(cluster)
    bound = collections.Counter()
    members = collections.Counter()
    for p in pods:
        g = gang_of(p)
        if not g:
            continue
        members[g] += 1
        if p["spec"].get("nodeName") and p["status"].get("phase") != "Failed":
            bound[g] += 1
    for g, n in sorted(bound.items()):
        need = mins.get(g)
        if need and 0 < n < need:
            out.append("gang %s (%s) is partly bound: %d of its minimum %d members bound "
                       "(%d exist)" % (g[0], g[1], n, need, members[g]))
    return out


def assert_holds(cluster, settle=0.0, posting=()):
    """Fail unless both invariants hold. Device uniqueness must hold at every
    instant; a gang may be partly bound only while its binds are being posted, so
    with <settle> > 0 the gang invariant is given that long to become true.
    <posting> names gangs ("namespace/name") whose binds were being posted when
    troupe was killed: they may stay partly bound until troupe, restarted, binds
    the rest (docs/ha.md, Limits), so only the device invariant holds them."""
    deadline = time.monotonic() + settle
    excused = tuple("gang %s (" % g for g in posting)
    while True:
        v = [x for x in violations(cluster) if not x.startswith(excused)]
        devices = [x for x in v if x.startswith("GPU ")]
        if devices:
            raise AssertionError("invariant broken: " + "; ".join(devices))
        if not v:
            return
        if time.monotonic() >= deadline:
            raise AssertionError("invariant broken: " + "; ".join(v))
        time.sleep(0.25)
