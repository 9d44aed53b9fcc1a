#!/usr/bin/env python3
"""Self-tests of the fake API server's writes: pod Bindings with BindingREST's
checks, messages and status codes (already assigned, preconditions, missing pod,
name mismatch, untyped validation errors, terminating and gated pods, the legacy
bindings path), and merge patch, PUT and create with optimistic concurrency.

Run alone: python3 tests/apiserver/test_fake_writes.py -v
(meson's apiserver-selftest runs every test_fake_*.py).
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from selftest_common import Base, pod, podgroup, PG  # noqa: E402


class BindingTests(Base):
    def setUp(self):
        super().setUp()
        p = pod("p1")
        p["metadata"]["annotations"] = {"keep": "me"}
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                      "reason": "Unschedulable"}]
        self.pod = self.s.create("pods", p)
        self.uid = self.pod["metadata"]["uid"]

    def test_success(self):
        w = self.watch("/api/v1/pods?watch=1&timeoutSeconds=2&resourceVersion="
                       + self.s.resource_version)
        st, _, body = self.bind("p1", "gpu-a", uid=self.uid,
                                annotations={"troupe.io/placement": "rack-1"})
        self.assertEqual(st, 201)
        self.assertEqual(body, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Success", "code": 201})
        p = self.s.get("pods", "ml", "p1")
        self.assertEqual(p["spec"]["nodeName"], "gpu-a")
        self.assertEqual(p["metadata"]["annotations"],
                         {"keep": "me", "troupe.io/placement": "rack-1"})
        conds = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
        self.assertEqual(len(conds), 1)
        self.assertEqual(conds[0]["status"], "True")
        self.assertNotIn("reason", conds[0])
        ev = w.next()
        self.assertEqual(ev["type"], "MODIFIED")
        self.assertEqual(ev["object"]["spec"]["nodeName"], "gpu-a")
        self.assertEqual(ev["object"]["metadata"]["resourceVersion"],
                         p["metadata"]["resourceVersion"])
        self.assertEqual(self.s.bindings[-1]["target"]["name"], "gpu-a")

    def test_already_assigned(self):
        self.assertEqual(self.bind("p1", "gpu-a")[0], 201)
        st, _, body = self.bind("p1", "gpu-b")
        self.assertEqual(st, 409)
        self.assertEqual(body["reason"], "Conflict")
        self.assertEqual(body["message"], 'Operation cannot be fulfilled on pods/binding "p1": '
                                          'pod p1 is already assigned to node "gpu-a"')
        self.assertEqual(body["details"], {"name": "p1", "kind": "pods/binding"})

    def test_uid_precondition(self):
        st, _, body = self.bind("p1", "gpu-a", uid="not-the-uid")
        self.assertEqual((st, body["reason"]), (409, "Conflict"))
        self.assertTrue(body["message"].startswith('Operation cannot be fulfilled on pods "p1": '))
        self.assertIn("Precondition failed: UID in precondition: not-the-uid, UID in object "
                      "meta: " + self.uid, body["message"])
        self.assertNotIn("nodeName", self.s.get("pods", "ml", "p1")["spec"])

    def test_missing_pod(self):
        st, _, body = self.bind("ghost", "gpu-a")
        self.assertEqual((st, body["reason"], body["message"]),
                         (404, "NotFound", 'pods "ghost" not found'))

    def test_name_mismatch(self):
        b = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "other"},
             "target": {"kind": "Node", "name": "gpu-a"}}
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/p1/binding", b)
        self.assertEqual((st, body["reason"], body["message"]),
                         (400, "BadRequest", "name in URL does not match name in Binding object"))

    def test_target_validation_is_untyped_500(self):
        b = {"metadata": {"name": "p1"}, "target": {"kind": "Pod", "name": "gpu-a"}}
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/p1/binding", b)
        self.assertEqual(st, 500)
        self.assertNotIn("reason", body)          # StatusReasonUnknown is ""
        self.assertEqual(body["message"], 'target.kind: Unsupported value: "Pod": supported '
                                          'values: "Node", "<empty>"')
        b = {"metadata": {"name": "p1"}, "target": {}}
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/p1/binding", b)
        self.assertEqual((st, body["message"]), (500, "target.name: Required value"))

    def test_not_json(self):
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/p1/binding", b"{nope",
                                headers={"Content-Type": "application/json"})
        self.assertEqual((st, body["reason"]), (400, "BadRequest"))
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/p1/binding", b"[1]",
                                headers={"Content-Type": "application/json"})
        self.assertEqual(st, 400)

    def test_terminating_and_gated(self):
        self.s.begin_delete("pods", "ml", "p1")
        st, _, body = self.bind("p1", "gpu-a")
        self.assertEqual(st, 409)
        self.assertIn("pod p1 is being deleted, cannot be assigned to a host", body["message"])
        self.s.create("pods", pod("gated", schedulingGates=[{"name": "wait"}]))
        st, _, body = self.bind("gated", "gpu-a")
        self.assertEqual(st, 409)
        self.assertIn("pod gated has non-empty .spec.schedulingGates", body["message"])

    def test_legacy_bindings_path(self):
        b = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"},
             "target": {"name": "gpu-c"}}
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/bindings", b)
        self.assertEqual(st, 201)
        self.assertEqual(self.s.get("pods", "ml", "p1")["spec"]["nodeName"], "gpu-c")


# ---------------------------------------------------------------------------

class WriteTests(Base):
    MP = {"Content-Type": "application/merge-patch+json"}

    def test_merge_patch(self):
        p = pod("p1", labels={"a": "1"})
        p["metadata"]["annotations"] = {"gone": "x", "kept": "y"}
        self.s.create("pods", p)
        rv = self.s.resource_version
        w = self.watch("/api/v1/pods?watch=1&timeoutSeconds=2&resourceVersion=" + rv)
        patch = {"metadata": {"labels": {"b": "2"}, "annotations": {"gone": None}},
                 "status": {"phase": "Running"}}
        st, _, body = self.call("PATCH", "/api/v1/namespaces/ml/pods/p1", json.dumps(patch),
                                headers=self.MP)
        self.assertEqual(st, 200)
        self.assertEqual(body["kind"], "Pod")
        self.assertEqual(body["metadata"]["labels"], {"a": "1", "b": "2"})
        self.assertEqual(body["metadata"]["annotations"], {"kept": "y"})
        self.assertEqual(body["status"]["phase"], "Pending")    # status only via /status
        self.assertGreater(int(body["metadata"]["resourceVersion"]), int(rv))
        ev = w.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["labels"]["b"]), ("MODIFIED", "2"))
        # /status changes only status.
        st, _, body = self.call("PATCH", "/api/v1/namespaces/ml/pods/p1/status",
                                json.dumps(patch), headers=self.MP)
        self.assertEqual((st, body["status"]["phase"]), (200, "Running"))
        # A no-op patch does not bump the version.
        st, _, again = self.call("PATCH", "/api/v1/namespaces/ml/pods/p1",
                                 json.dumps({"metadata": {"labels": {"b": "2"}}}), headers=self.MP)
        self.assertEqual(again["metadata"]["resourceVersion"], body["metadata"]["resourceVersion"])
        # Stale resourceVersion: optimistic-concurrency conflict.
        st, _, err = self.call("PATCH", "/api/v1/namespaces/ml/pods/p1",
                               json.dumps({"metadata": {"resourceVersion": rv}}), headers=self.MP)
        self.assertEqual((st, err["reason"]), (409, "Conflict"))
        self.assertIn("the object has been modified", err["message"])
        st, _, err = self.call("PATCH", "/api/v1/namespaces/ml/pods/p1", "{}",
                               headers={"Content-Type": "application/json"})
        self.assertEqual(st, 415)
        st, _, err = self.call("PATCH", "/api/v1/namespaces/ml/pods/nope", "{}", headers=self.MP)
        self.assertEqual(st, 404)

    def test_put_and_create(self):
        st, _, created = self.call("POST", "/api/v1/namespaces/ml/pods", pod("p1"))
        self.assertEqual((st, created["status"]), (201, {"phase": "Pending"}))
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods", pod("p1"))
        self.assertEqual((st, body["reason"]), (409, "AlreadyExists"))
        created["metadata"]["labels"] = {"x": "y"}
        st, _, body = self.call("PUT", "/api/v1/namespaces/ml/pods/p1", created)
        self.assertEqual((st, body["metadata"]["labels"]), (200, {"x": "y"}))
        st, _, body = self.call("PUT", "/api/v1/namespaces/ml/pods/p1", created)   # stale rv
        self.assertEqual(st, 409)
        self.s.create("podgroups", podgroup("g"))
        pg = self.s.get("podgroups", "ml", "g")
        del pg["metadata"]["resourceVersion"]
        st, _, body = self.call("PUT", PG + "/namespaces/ml/podgroups/g", pg)
        self.assertEqual((st, body["reason"]), (422, "Invalid"))   # CRs need a resourceVersion


# ---------------------------------------------------------------------------


if __name__ == "__main__":
    unittest.main()
