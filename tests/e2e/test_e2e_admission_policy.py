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
"""
import json
import os
import ssl
import sys
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as rig  # noqa: E402
from e2e_common import E2E, gpu_pod, gpu_ids, wait_until, module_cluster  # noqa: E402

POLICY = os.path.join(rig.ROOT, "config", "deploy", "admission-policy.yaml")
MESSAGE = "only troupe may set troupe.io/gpu-* and troupe.io/gang-plan annotations"
MERGE = "application/merge-patch+json"

setUpModule, tearDownModule = module_cluster("admission", nodes=4)


def pending_pod(name, annotations=None):
    """A CPU pod no scheduler takes (schedulerName names none): it stays
    unbound until the test posts its Binding."""
    p = gpu_pod(name, None, annotations=annotations)
    p["spec"]["schedulerName"] = "nobody"
    return p


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
        """One call to the API server with a bearer token: (status, parsed body)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.c.api_url + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + token)
        if data is not None:
            req.add_header("Content-Type", content_type)
        ctx = ssl.create_default_context(cafile=self.c.pki.path("ca.crt"))
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

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


if __name__ == "__main__":
    unittest.main()
