"""Shared pieces of the end-to-end tests: one real cluster per test module,
pod manifests, and waits that read the API server (pods, events, conditions).

The cluster is started once per module (tests/e2e/cluster.py), with troupe built
by meson (TROUPE_BIN) and the Kubernetes binaries built by scripts/lib/k8s.sh.
Each test works in a namespace of its own and deletes it, waiting until its pods
are gone, so the next test starts from free GPUs. The invariant checker
(invariants.py) runs after every test.
"""
import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cluster as rig          # noqa: E402
import invariants              # noqa: E402

FAST_TROUPE = """\
log_level: debug
api:
  backoff_initial_ms: 200
  backoff_max_ms: 2000
gang:
  settle_seconds: 1
"""


def wait_until(cond, timeout=60.0, what="condition", interval=0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %.0fs waiting for %s (last: %r)" % (timeout, what, last))


def gpu_pod(name, gpus, hosts=None, kind=None, annotations=None, labels=None, priority=None,
            run_seconds=None, cpu="100m", limits_only=False, scheduling_group=None):
    """A pod asking <gpus> nvidia.com/gpu (0 still names the resource; None asks
    none at all: a CPU-only pod), optionally pinned to <hosts> or a board <kind>."""
    res = {"requests": {"cpu": cpu, "memory": "64Mi"}, "limits": {}}
    if gpus is not None:
        res["limits"]["nvidia.com/gpu"] = str(gpus)
        if not limits_only:
            res["requests"]["nvidia.com/gpu"] = str(gpus)
    ann = dict(annotations or {})
    if run_seconds is not None:
        ann["rig.troupe.io/run-seconds"] = str(run_seconds)
    spec = {"containers": [{"name": "work", "image": "registry.invalid/e2e:1", "resources": res}],
            "terminationGracePeriodSeconds": 0}
    if kind:
        spec["nodeSelector"] = {"rig.troupe.io/kind": kind}
    if hosts:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": list(hosts)}]}]}}}
    if priority:
        spec["priorityClassName"] = priority
    if scheduling_group:
        spec["schedulingGroup"] = {"podGroupName": scheduling_group}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": dict(labels or {}), "annotations": ann},
            "spec": spec}


def create_node(c, name, resources, labels=None, annotations=None, taints=None):
    """A Node made through the API, not by kubesim: <resources> as its capacity
    and allocatable (cpu, memory and pods added when absent), Ready, with
    <labels> (kubernetes.io/hostname added), <annotations> and <taints>."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    labels = dict({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}, **(labels or {}))
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": labels, "annotations": dict(annotations or {})}}
    status, out = c.request("POST", "/api/v1/nodes", node)
    if status not in (201, 409):
        raise AssertionError("create node %s: %s" % (name, out))
    res = dict({"cpu": "64", "memory": "512Gi", "pods": "110"}, **resources)
    for _ in range(20):     # a controller may touch the new node meanwhile
        cur = c.get("/api/v1/nodes/" + name)
        cur["status"] = {
            "capacity": res, "allocatable": res, "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "nodeInfo": {"kubeletVersion": c.version, "operatingSystem": "linux",
                         "architecture": "amd64"}}
        status, out = c.request("PUT", "/api/v1/nodes/%s/status" % name, cur)
        if status != 409:
            break
        time.sleep(0.2)
    if status != 200:
        raise AssertionError("node %s status: %s" % (name, out))
    # The API server's TaintNodesByCondition admission put not-ready on the
    # new node; the rig has no node-lifecycle controller to lift it
    # (kubesim's untaintNotReady does the same for its nodes).
    for _ in range(20):
        cur = c.get("/api/v1/nodes/" + name)
        cur["spec"]["taints"] = list(taints or [])
        if not cur["spec"]["taints"]:
            del cur["spec"]["taints"]
        status, out = c.request("PUT", "/api/v1/nodes/" + name, cur)
        if status != 409:
            break
        time.sleep(0.2)
    if status != 200:
        raise AssertionError("node %s taints: %s" % (name, out))


def gpu_ids(pod):
    v = (pod["metadata"].get("annotations") or {}).get("troupe.io/gpu-ids")
    return [int(x) for x in v.split(",")] if v else None


class E2E(unittest.TestCase):
    """Base class: a cluster shared by the module's tests (see setUpModule in each
    test file), a namespace per test, the invariant checker after each test."""

    cluster = None   # set by the module's setUpModule

    def setUp(self):
        self.c = type(self).cluster
        self.ns = "e2e-" + re.sub(r"[^a-z0-9]+", "-", self._testMethodName.lower())[:50].strip("-")
        status, out = self.c.request("POST", "/api/v1/namespaces",
                                     {"metadata": {"name": self.ns}})
        self.assertIn(status, (201, 409), out)
        wait_until(lambda: self.c.request(
            "GET", "/api/v1/namespaces/%s/serviceaccounts/default" % self.ns)[0] == 200,
            what="default service account in " + self.ns)

    def tearDown(self):
        try:
            invariants.assert_holds(self.c, settle=20)
        finally:
            self.delete_namespace(self.ns)

    # ---- objects ----------------------------------------------------------

    def create(self, obj, ns=None, path=None):
        ns = ns or self.ns
        if path is None:
            kind = obj["kind"]
            path = {"Pod": "/api/v1/namespaces/%s/pods",
                    "PodGroup": "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/%s/podgroups",
                    }[kind] % ns
        status, out = self.c.request("POST", path, obj)
        self.assertEqual(status, 201, "create %s: %s" % (obj["metadata"]["name"], out))
        return out

    def pod(self, name, ns=None):
        status, out = self.c.request("GET", "/api/v1/namespaces/%s/pods/%s" % (ns or self.ns, name))
        return out if status == 200 else None

    def pods(self, ns=None, selector=None):
        path = "/api/v1/namespaces/%s/pods" % (ns or self.ns)
        if selector:
            path += "?labelSelector=" + selector
        return self.c.get(path)["items"]

    def delete_pod(self, name, ns=None, wait=True):
        self.c.request("DELETE", "/api/v1/namespaces/%s/pods/%s" % (ns or self.ns, name))
        if wait:
            wait_until(lambda: self.pod(name, ns) is None, what="pod %s gone" % name)

    def delete_namespace(self, ns):
        self.c.request("DELETE", "/api/v1/namespaces/%s/pods" % ns)   # all of them, at once
        self.c.request("DELETE", "/api/v1/namespaces/" + ns)
        wait_until(lambda: self.c.request("GET", "/api/v1/namespaces/" + ns)[0] == 404,
                   timeout=120, what="namespace %s gone" % ns)

    def podgroup(self, name, min_member, timeout=None, min_resources=None):
        spec = {"minMember": min_member}
        if timeout:
            spec["scheduleTimeoutSeconds"] = timeout
        if min_resources:
            spec["minResources"] = min_resources
        return self.create({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": name}, "spec": spec})

    # ---- waits ------------------------------------------------------------

    def wait_bound(self, name, timeout=60, ns=None):
        return wait_until(lambda: (lambda p: p if p and p["spec"].get("nodeName") else None)(
            self.pod(name, ns)), timeout=timeout, what="pod %s bound" % name)

    def wait_running(self, name, timeout=60, ns=None):
        return wait_until(lambda: (lambda p: p if p and p["status"].get("phase") == "Running"
                                   else None)(self.pod(name, ns)),
                          timeout=timeout, what="pod %s Running" % name)

    def events(self, name, ns=None, reason=None):
        ns = ns or self.ns
        out = self.c.get("/api/v1/namespaces/%s/events?fieldSelector=involvedObject.name=%s"
                         % (ns, name))["items"]
        return [e for e in out if reason is None or e.get("reason") == reason]

    def wait_event(self, name, reason, contains="", timeout=60, ns=None):
        def found():
            for e in self.events(name, ns, reason):
                if contains in (e.get("message") or ""):
                    return e
            return None
        return wait_until(found, timeout=timeout,
                          what="%s event on %s containing %r" % (reason, name, contains))

    def condition(self, pod, ctype):
        for c in pod["status"].get("conditions") or []:
            if c["type"] == ctype:
                return c
        return None

    def assert_never_bound(self, names, seconds):
        """Watch for <seconds> that none of <names> gets a node."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for n in names:
                p = self.pod(n)
                self.assertFalse(p and p["spec"].get("nodeName"),
                                 "%s was bound to %s" % (n, p and p["spec"].get("nodeName")))
            time.sleep(0.5)


def metric_samples(text, name):
    """{labels-string: value} of one metric family in Prometheus text."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, _, val = line.rpartition(" ")
            labels = key[len(name):]
            out[labels] = float(val)
    return out


def apply_node_rbac(cluster, allocator=False):
    """config/deploy/troupe-node.yaml's ServiceAccount and RBAC, as shipped; not
    its DaemonSet, whose pods no kubelet would run on the rig. <allocator>:
    with the rule the file says to uncomment for allocator mode."""
    with open(os.path.join(rig.ROOT, "config", "deploy", "troupe-node.yaml")) as f:
        text = f.read()
    if allocator:
        text, n = re.subn(r"(?m)(^# Allocator mode \(--allocator\).*\n.*uncomment for it:\n)"
                          r"# (- apiGroups.*)\n# ( +resources.*)\n# ( +verbs.*)\n",
                          r"\1\2\n\3\n\4\n", text)
        assert n == 1, "troupe-node.yaml: no commented rule for allocator mode"
    docs = [d for d in re.split(r"^---\s*$", text, flags=re.M)
            if re.search(r"^kind:", d, re.M)]
    rbac = [d for d in docs if not re.search(r"^kind:\s*DaemonSet", d, re.M)]
    assert len(rbac) == 3, "troupe-node.yaml: %d objects besides the DaemonSet" % len(rbac)
    cluster.kubectl("apply", "-f", "-", input="---\n".join(rbac))


def start_module_cluster(name, **kw):
    """The cluster a test module shares, in build/e2e/<name>."""
    kw.setdefault("troupe_config", FAST_TROUPE)
    # TROUPE_E2E_RELEASE=1.36 runs the suite against the previous minor release
    # (./scripts/e2e --release 1.36), in folders of its own.
    release = os.environ.get("TROUPE_E2E_RELEASE") or None
    kw.setdefault("release", release)
    folder = os.path.join(rig.ROOT, "build", "e2e-" + release if release else "e2e", name)
    c = rig.Cluster(folder, **kw)
    c.down()
    c.up()
    return c


def module_cluster(name, **kw):
    """setUpModule and tearDownModule for a test module that shares one cluster:
    `setUpModule, tearDownModule = module_cluster("gang", nodes=20)`."""
    def set_up():
        E2E.cluster = start_module_cluster(name, **kw)

    def tear_down():
        if E2E.cluster:
            E2E.cluster.down()
    return set_up, tear_down
