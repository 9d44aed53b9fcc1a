#!/usr/bin/env python3
"""config/deploy/admission-policy.yaml on the real kube-apiserver: only troupe's
identity may add, change or remove troupe.io/gpu-* annotations of pods.

The policy is applied to the rig's cluster (troupe runs there as
system:serviceaccount:kube-system:troupe, with a service-account token: see
tests/e2e/rig_components.py troupe_token). Another service account, given RBAC
to create, patch and bind pods so that only admission can say no, then tries
every way in; the admin (system:masters, which RBAC never refuses) is refused
too, which shows the refusal is the policy's.

  test_create_denied        a pod created with troupe.io/gpu-devices or with
                            spec.nodeName and troupe.io/gpu-ids: refused with
                            the policy's message; unrelated annotations pass
  test_patch_denied         adding, changing or removing a gpu-* annotation
                            of a pod troupe bound: refused; a label or another
                            annotation on the same pod: allowed
  test_binding_denied       a Binding carrying troupe.io/gpu-ids from anyone
                            but troupe: refused; a plain Binding: allowed
  test_troupe_allowed       troupe binds a GPU pod (its Binding carries the
                            annotations), and a Binding posted with troupe's
                            own token is let through

config/deploy/node-admission-policy.yaml, in the same cluster (one start for
both: the rig is slow to start): troupe-node's service account and RBAC from
config/deploy/troupe-node.yaml (not its DaemonSet: the rig has no kubelet), and
a pod of troupe-node's bound to one rig node, whose token the API server gives
that node's name (user extra authentication.kubernetes.io/node-name):

  test_own_node_published   the real troupe-node (--once, the fake NVML) with
                            that token publishes on its own node: exit 0, the
                            three annotations there
  test_other_node_denied    the same token on another node: refused with the
                            policy's message, by troupe-node and by a patch
  test_other_fields_denied  on its own node, a label, another annotation, a
                            taint: each refused, naming what was refused
  test_unbound_token_denied a troupe-node token bound to no pod names no node:
                            refused even on the node the pod is on
"""
import json
import os
import ssl
import subprocess
import sys
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as rig  # noqa: E402
from e2e_common import E2E, apply_node_rbac, gpu_pod, gpu_ids, wait_until, module_cluster  # noqa: E402

POLICY = os.path.join(rig.ROOT, "config", "deploy", "admission-policy.yaml")
MESSAGE = "only troupe may set troupe.io/gpu-* and troupe.io/gang-plan annotations"
MERGE = "application/merge-patch+json"
NODE_POLICY = os.path.join(rig.ROOT, "config", "deploy", "node-admission-policy.yaml")
NOT_OWN_NODE = "troupe-node may write only the Node its own pod runs on"
ONLY_TOPOLOGY = ("troupe-node may change only the troupe.io/gpu-topology, troupe.io/gpu-uuids, "
                 "troupe.io/gpu-topology-source and troupe.io/gpu-unhealthy annotations of a Node")
NODE_KEYS = ("troupe.io/gpu-topology", "troupe.io/gpu-uuids", "troupe.io/gpu-topology-source",
             "troupe.io/gpu-unhealthy")
TROUPE_NODE_BIN = os.environ.get("TROUPE_NODE_BIN") or os.path.join(
    rig.ROOT, "build", "src", "node", "troupe-node")
FAKE_NVML_LIB = os.environ.get("FAKE_NVML_LIB") or os.path.join(
    rig.ROOT, "build", "tests", "node", "libfake_nvml.so")

setUpModule, tearDownModule = module_cluster("admission", nodes=4)


def pending_pod(name, annotations=None):
    """A CPU pod no scheduler takes (schedulerName names none): it stays
    unbound until the test posts its Binding."""
    p = gpu_pod(name, None, annotations=annotations)
    p["spec"]["schedulerName"] = "nobody"
    return p


def as_token(c, token, method, path, body=None, content_type="application/json"):
    """One call to the API server with a bearer token: (status, parsed body)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(c.api_url + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", content_type)
    ctx = ssl.create_default_context(cafile=c.pki.path("ca.crt"))
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


class AdmissionPolicy(E2E):

    @classmethod
    def setUpClass(cls):
        c = cls.cluster
        c.kubectl("apply", "-f", POLICY)
        # The API server loads a new policy asynchronously: wait until it refuses.

        def enforced():
            status, out = c.request("POST", "/api/v1/namespaces/default/pods?dryRun=All",
                                    pending_pod("probe", {"troupe.io/gpu-ids": "0"}))
            return status == 403 and MESSAGE in json.dumps(out)
        wait_until(enforced, timeout=60, what="the admission policy to be enforced")

    def setUp(self):
        super().setUp()
        # The intruder may do everything to pods in its namespace that RBAC can
        # grant, so a refusal can only come from admission.
        sa = "intruder"
        self.c.kubectl("-n", self.ns, "create", "serviceaccount", sa)
        self.c.kubectl("-n", self.ns, "create", "role", "pods-all",
                       "--verb=get,list,create,update,patch,delete",
                       "--resource=pods,pods/binding,pods/status")
        self.c.kubectl("-n", self.ns, "create", "rolebinding", "pods-all", "--role=pods-all",
                       "--serviceaccount=%s:%s" % (self.ns, sa))
        self.intruder = self.c.kubectl("-n", self.ns, "create", "token", sa).stdout.strip()
        self.troupe = self.c.troupe_token()

    # ---- requests as a service account --------------------------------------

    def as_token(self, token, method, path, body=None, content_type="application/json"):
        return as_token(self.c, token, method, path, body, content_type)

    def pods_path(self, name=""):
        return "/api/v1/namespaces/%s/pods%s" % (self.ns, "/" + name if name else "")

    def assert_denied(self, answer, key):
        status, out = answer
        self.assertEqual(status, 403, out)
        text = out.get("message", "") if isinstance(out, dict) else out
        self.assertIn(MESSAGE, text)
        self.assertIn(key, text)
        self.assertIn("ValidatingAdmissionPolicy", text)

    def assert_allowed(self, answer):
        status, out = answer
        self.assertIn(status, (200, 201), out)
        return out

    def bound_gpu_pod(self, name):
        """A 1-GPU pod troupe placed: it carries troupe.io/gpu-ids."""
        self.create(gpu_pod(name, 1))
        p = self.wait_bound(name)
        self.assertIsNotNone(gpu_ids(p), p["metadata"])
        return p

    # ---- tests --------------------------------------------------------------

    def test_create_denied(self):
        self.assert_denied(self.as_token(self.intruder, "POST", self.pods_path(), pending_pod(
            "forged", {"troupe.io/gpu-devices": "0,1"})), "troupe.io/gpu-devices")
        # Bound at creation, never seen by a scheduler, claiming devices.
        direct = gpu_pod("direct", 2, annotations={"troupe.io/gpu-ids": "0,1"})
        direct["spec"]["nodeName"] = "gpu-0000"
        self.assert_denied(self.as_token(self.intruder, "POST", self.pods_path(), direct),
                           "troupe.io/gpu-ids")
        # Not a question of RBAC: the admin is refused as well.
        self.assert_denied(self.c.request("POST", self.pods_path(), direct), "troupe.io/gpu-ids")
        self.assertIsNone(self.pod("direct"))
        self.assertIsNone(self.pod("forged"))
        # A forged gang plan (which a new leader would follow) is refused too.
        plan = pending_pod("planned", {"troupe.io/gang-plan": '{"v":1,"id":"x","quorum":1,"n":1}'})
        self.assert_denied(self.as_token(self.intruder, "POST", self.pods_path(), plan),
                           "troupe.io/gang-plan")
        self.assertIsNone(self.pod("planned"))
        # Other annotations, troupe's own inputs among them, are anyone's to set.
        ok = pending_pod("plain", {"example.com/owner": "me", "troupe.io/topology": "nvlink",
                                   "troupe.io/gpu": "not a gpu-* key"})
        self.assert_allowed(self.as_token(self.intruder, "POST", self.pods_path(), ok))

    def test_patch_denied(self):
        p = self.bound_gpu_pod("bound")
        ids = p["metadata"]["annotations"]["troupe.io/gpu-ids"]
        path = self.pods_path("bound")
        for key, value in (("troupe.io/gpu-ids", "7"),          # changed
                           ("troupe.io/gpu-ids", None),         # removed
                           ("troupe.io/gpu-devices", "3")):     # added
            patch = {"metadata": {"annotations": {key: value}}}
            self.assert_denied(self.as_token(self.intruder, "PATCH", path, patch, MERGE), key)
            self.assert_denied(self.c.request("PATCH", path, patch, MERGE), key)
        # A full update that drops every annotation is a removal too.
        whole = self.pod("bound")
        whole["metadata"]["annotations"] = {}
        self.assert_denied(self.as_token(self.intruder, "PUT", path, whole),
                           "troupe.io/gpu-ids")
        self.assertEqual(self.pod("bound")["metadata"]["annotations"]["troupe.io/gpu-ids"], ids)
        # What leaves the gpu-* annotations as they are goes through.
        out = self.assert_allowed(self.as_token(self.intruder, "PATCH", path, {"metadata": {
            "labels": {"team": "a"}, "annotations": {"example.com/note": "hello"}}}, MERGE))
        self.assertEqual(out["metadata"]["annotations"]["troupe.io/gpu-ids"], ids)
        self.assertEqual(out["metadata"]["annotations"]["example.com/note"], "hello")
        # Writing the same value again changes nothing, so it is allowed.
        self.assert_allowed(self.as_token(self.intruder, "PATCH", path, {"metadata": {
            "annotations": {"troupe.io/gpu-ids": ids}}}, MERGE))

    def test_binding_denied(self):
        for name in ("a", "b"):
            self.create(pending_pod(name))

        def binding(name, annotations=None):
            return {"apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": name, "annotations": annotations or {}},
                    "target": {"kind": "Node", "name": "gpu-0003"}}
        self.assert_denied(self.as_token(self.intruder, "POST", self.pods_path("a") + "/binding",
                                         binding("a", {"troupe.io/gpu-ids": "0"})),
                           "troupe.io/gpu-ids")
        self.assertFalse(self.pod("a")["spec"].get("nodeName"))
        self.assert_denied(self.as_token(self.intruder, "POST", self.pods_path("a") + "/binding",
                                         binding("a", {"troupe.io/gang-plan": "{}"})),
                           "troupe.io/gang-plan")
        self.assertFalse(self.pod("a")["spec"].get("nodeName"))
        # A Binding without them is kube-scheduler's everyday request.
        self.assert_allowed(self.as_token(self.intruder, "POST", self.pods_path("b") + "/binding",
                                          binding("b")))
        self.assertEqual(self.pod("b")["spec"].get("nodeName"), "gpu-0003")

    def test_troupe_allowed(self):
        # troupe's own path: kube-scheduler asks troupe to bind, troupe's
        # Binding carries troupe.io/gpu-ids (and gpu-link where it applies).
        self.bound_gpu_pod("scheduled")
        # troupe's token, on a request troupe's RBAC allows (it may only bind).
        # Kept out of the cache's way: a CPU pod, so no GPU is claimed.
        self.create(pending_pod("by-troupe"))
        self.assert_allowed(self.as_token(
            self.troupe, "POST", self.pods_path("by-troupe") + "/binding",
            {"apiVersion": "v1", "kind": "Binding",
             "metadata": {"name": "by-troupe", "annotations": {"troupe.io/gpu-link": "none"}},
             "target": {"kind": "Node", "name": "gpu-0003"}}))
        p = wait_until(lambda: (lambda q: q if q["spec"].get("nodeName") else None)(
            self.pod("by-troupe")), what="by-troupe bound")
        self.assertEqual(p["metadata"]["annotations"]["troupe.io/gpu-link"], "none")


# troupe-node's pod sits on OWN_NODE (index 0: an H100 board, the capture the
# fake NVML reads, so the rig's node stays truthful); OTHER_NODE is anyone else's.
OWN_NODE, OTHER_NODE = "gpu-0000", "gpu-0001"
NODE_TOPO = os.path.join(rig.ROOT, "tests", "data", "topo", "dgx-h100.txt")
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"


class NodeAdmissionPolicy(E2E):

    @classmethod
    def setUpClass(cls):
        c = cls.cluster
        apply_node_rbac(c)
        c.kubectl("apply", "-f", NODE_POLICY)
        unbound = c.kubectl("create", "token", "troupe-node", "-n", "kube-system").stdout.strip()

        def enforced():
            status, out = as_token(c, unbound, "PATCH", "/api/v1/nodes/%s?dryRun=All" % OWN_NODE,
                                   {"metadata": {"annotations": {NODE_KEYS[2]: "nvml"}}}, MERGE)
            return status == 403 and NOT_OWN_NODE in json.dumps(out)
        wait_until(enforced, timeout=60, what="the node admission policy to be enforced")

    def setUp(self):
        super().setUp()
        for n in (TROUPE_NODE_BIN, FAKE_NVML_LIB):
            self.assertTrue(os.path.exists(n), "%s is missing: build it (ninja -C build)" % n)
        # What the nodes say now, put back afterwards (as the admin), along with
        # whatever a refusal that failed to happen let through.
        for node in (OWN_NODE, OTHER_NODE):
            n = self.node(node)
            ann = n["metadata"].get("annotations") or {}
            self.addCleanup(self.c.request, "PATCH", "/api/v1/nodes/" + node, {
                "metadata": {"labels": {"example.com/x": None},
                             "annotations": dict({k: ann.get(k) for k in NODE_KEYS},
                                                 **{"example.com/x": None})},
                "spec": {"taints": n["spec"].get("taints"),
                         "unschedulable": n["spec"].get("unschedulable")}}, MERGE)
        # troupe-node's pod, bound to OWN_NODE as the scheduler would (it must be
        # in the service account's namespace for the token to be bound to it).
        name = "troupe-node-" + self.ns[len("e2e-"):][:30].strip("-")
        pod = pending_pod(name)
        pod["spec"]["serviceAccountName"] = "troupe-node"
        pod = self.create(pod, ns="kube-system")
        self.addCleanup(self.delete_pod, name, ns="kube-system")
        self.assert_ok(self.c.request(
            "POST", "/api/v1/namespaces/kube-system/pods/%s/binding" % name,
            {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
             "target": {"kind": "Node", "name": OWN_NODE}}))
        self.token = self.c.kubectl(
            "create", "token", "troupe-node", "-n", "kube-system", "--bound-object-kind", "Pod",
            "--bound-object-name", name, "--bound-object-uid", pod["metadata"]["uid"]
        ).stdout.strip()

    # ---- helpers ------------------------------------------------------------

    def node(self, name):
        return self.c.get("/api/v1/nodes/" + name)

    def assert_ok(self, answer):
        status, out = answer
        self.assertIn(status, (200, 201), out)
        return out

    def whoami(self, token):
        """The user the API server makes of <token> (SelfSubjectReview)."""
        out = self.assert_ok(as_token(self.c, token, "POST",
                                      "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                      {"apiVersion": "authentication.k8s.io/v1",
                                       "kind": "SelfSubjectReview"}))
        return out["status"]["userInfo"]

    def run_node(self, node, token):
        """The real troupe-node, once, as its DaemonSet would run it on <node>
        (NODE_NAME), with <token> in a kubeconfig for the rig's API server."""
        kc = os.path.join(self.c.dir, "config", "troupe-node-%s.kubeconfig" % self.ns)
        self.c.pki.kubeconfig(kc, self.c.api_url, "troupe-node", token=token)
        env = dict(os.environ, NODE_NAME=node, FAKE_NVML_TOPO=NODE_TOPO)
        return subprocess.run([TROUPE_NODE_BIN, "--once", "--kubeconfig", kc,
                               "--nvml", FAKE_NVML_LIB, "--nvidia-smi", "", "--no-read-back"],
                              env=env, capture_output=True, text=True, timeout=60)

    def patch_node(self, token, node, patch, sub=""):
        return as_token(self.c, token, "PATCH", "/api/v1/nodes/" + node + sub, patch, MERGE)

    def assert_refused(self, answer, *says):
        status, out = answer
        self.assertEqual(status, 403, out)
        text = out.get("message", "") if isinstance(out, dict) else out
        self.assertIn("ValidatingAdmissionPolicy 'troupe-node-annotations'", text)
        for s in says:
            self.assertIn(s, text)

    # ---- tests --------------------------------------------------------------

    def test_own_node_published(self):
        # The API server type-checked every expression against Node's schema:
        # a misspelt field would be a warning here (and an error at request time).
        policy = wait_until(lambda: (lambda p: p if p.get("status", {}).get(
            "observedGeneration") else None)(self.c.get(
                "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/"
                "troupe-node-annotations")), what="the node policy type-checked")
        self.assertFalse(policy["status"].get("typeChecking", {}).get("expressionWarnings"),
                         policy["status"])
        # The API server put the pod's node into the token, as the policy needs.
        user = self.whoami(self.token)
        self.assertEqual(user["username"], "system:serviceaccount:kube-system:troupe-node")
        self.assertEqual(user.get("extra", {}).get(NODE_NAME_KEY), [OWN_NODE], user)
        r = self.run_node(OWN_NODE, self.token)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("published the topology of 8 GPUs on node %s (from nvml)" % OWN_NODE,
                      r.stdout + r.stderr)
        ann = self.node(OWN_NODE)["metadata"]["annotations"]
        self.assertEqual(ann[NODE_KEYS[2]], "nvml")
        self.assertEqual(len(ann[NODE_KEYS[1]].split(",")), 8, ann[NODE_KEYS[1]])
        self.assertTrue(ann[NODE_KEYS[0]].lstrip().startswith("GPU0"), ann[NODE_KEYS[0]])
        self.assertIn("NV18", ann[NODE_KEYS[0]])
        # Again: nothing differs, nothing is written, still 0.
        r = self.run_node(OWN_NODE, self.token)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.node(OWN_NODE)["metadata"]["annotations"], ann)

    def test_other_node_denied(self):
        before = self.node(OTHER_NODE)["metadata"].get("annotations") or {}
        # The real binary, told it runs on another node: its patch is refused.
        r = self.run_node(OTHER_NODE, self.token)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("PATCH node %s: HTTP 403" % OTHER_NODE, r.stderr)
        self.assertIn("ValidatingAdmissionPolicy 'troupe-node-annotations'", r.stderr)
        # The same write by hand, with the policy's reason.
        self.assert_refused(self.patch_node(self.token, OTHER_NODE, {"metadata": {
            "annotations": {"troupe.io/gpu-topology": "forged"}}}), NOT_OWN_NODE,
            "its pod is on %s, not on %s" % (OWN_NODE, OTHER_NODE))
        self.assertEqual(self.node(OTHER_NODE)["metadata"].get("annotations") or {}, before)
        # No other write path: the status subresource is RBAC's no already.
        status, out = self.patch_node(self.token, OTHER_NODE, {"metadata": {
            "annotations": {"troupe.io/gpu-topology": "forged"}}}, "/status")
        self.assertEqual(status, 403, out)

    def test_other_fields_denied(self):
        node = self.node(OWN_NODE)
        for patch, says in (
                ({"metadata": {"labels": {"example.com/x": "y"}}}, "labels"),
                ({"metadata": {"annotations": {"example.com/x": "y"}}},
                 "annotation example.com/x"),
                ({"spec": {"taints": [{"key": "example.com/evil", "effect": "NoSchedule"}]}},
                 "spec.taints"),
                ({"spec": {"unschedulable": True}}, "spec"),
                # One forbidden key spoils the whole request, allowed keys and all.
                ({"metadata": {"annotations": {NODE_KEYS[2]: "nvidia-smi",
                                               "example.com/x": "y"}}},
                 "annotation example.com/x")):
            self.assert_refused(self.patch_node(self.token, OWN_NODE, patch), ONLY_TOPOLOGY,
                                "refused on Node %s: %s)" % (OWN_NODE, says))
        after = self.node(OWN_NODE)
        for part in ("labels", "annotations"):
            self.assertEqual(after["metadata"].get(part), node["metadata"].get(part), part)
        self.assertEqual(after["spec"], node["spec"])
        # The refusals are the policy's, not RBAC's: the three keys themselves pass.
        out = self.assert_ok(self.patch_node(self.token, OWN_NODE, {"metadata": {
            "annotations": {NODE_KEYS[2]: "nvidia-smi"}}}))
        self.assertEqual(out["metadata"]["annotations"][NODE_KEYS[2]], "nvidia-smi")

    def test_unbound_token_denied(self):
        token = self.c.kubectl("create", "token", "troupe-node", "-n", "kube-system"
                               ).stdout.strip()
        self.assertNotIn(NODE_NAME_KEY, self.whoami(token).get("extra", {}))
        self.assert_refused(self.patch_node(token, OWN_NODE, {"metadata": {
            "annotations": {NODE_KEYS[2]: "nvml"}}}), NOT_OWN_NODE, "this token names no node")
        r = self.run_node(OWN_NODE, token)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("HTTP 403", r.stderr)


if __name__ == "__main__":
    unittest.main()
