#!/usr/bin/env python3
"""troupe's ops listener with ops.auth on, against the real kube-apiserver:
a service account's token reaches /metrics and /debug/* only once RBAC grants
it "get" on those nonResourceURLs, exactly as it would reach kube-scheduler's
own /metrics; no token or a made-up one is 401; the probes stay open.

troupe's service account is bound here to the bootstrap ClusterRole
system:auth-delegator (create tokenreviews and subjectaccessreviews), which is
what the chart and config/deploy/rbac.yaml grant it for ops.auth.
"""
import json
import os
import sys
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from e2e_common import E2E, FAST_TROUPE, module_cluster, wait_until  # noqa: E402

# Answers are kept one second, so a granted role is seen within a second or two.
OPS_AUTH_TROUPE = FAST_TROUPE + "ops:\n  auth: true\n  auth_cache_seconds: 1\n"

setUpModule_, tearDownModule = module_cluster("ops-auth", nodes=4, troupe_config=OPS_AUTH_TROUPE)

DELEGATOR = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: troupe-auth-delegator
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:auth-delegator
subjects:
- kind: ServiceAccount
  name: troupe
  namespace: kube-system
"""

READER = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {name}
rules:
- nonResourceURLs: ["/debug/*", "/metrics"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {name}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {name}
subjects:
- kind: ServiceAccount
  name: scraper
  namespace: {ns}
"""


def setUpModule():
    setUpModule_()
    E2E.cluster.apply(DELEGATOR)


class OpsAuth(E2E):

    def get(self, path, token=None):
        """(status, body text) of GET <path> on troupe's ops listener."""
        headers = {"Authorization": "Bearer " + token} if token else {}
        req = urllib.request.Request(self.c.troupe_ops_url + path, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=15) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def test_rbac_on_nonresource_urls_decides(self):
        c = self.c
        c.kubectl("create", "serviceaccount", "scraper", "-n", self.ns)
        token = c.kubectl("create", "token", "scraper", "-n", self.ns,
                          "--duration=1h").stdout.strip()
        user = "system:serviceaccount:%s:scraper" % self.ns
        for path in ("/healthz", "/readyz", "/version"):
            self.assertEqual(self.get(path)[0], 200, path)
        # No token, a made-up one: 401 before any role is consulted.
        status, body = self.get("/metrics")
        self.assertEqual((status, json.loads(body)["reason"]), (401, "Unauthorized"))
        self.assertEqual(self.get("/metrics", "not-a-token")[0], 401)
        # A real token, no role: 403 naming the service account, logged so.
        for path in ("/metrics", "/debug/state", "/debug/cache"):
            status, body = self.get(path, token)
            self.assertEqual(status, 403, (path, body))
            self.assertEqual(json.loads(body)["message"],
                             'forbidden: User "%s" cannot get path "%s"' % (user, path))
        self.assertIn('GET /metrics from 127.0.0.1', c.log("troupe"))
        self.assertIn('by user "%s" refused (403 Forbidden)' % user, c.log("troupe"))
        # Granted: the same token now reads both.
        name = "troupe-reader-" + self.ns
        c.apply(READER.format(name=name, ns=self.ns))
        self.addCleanup(c.kubectl, "delete", "clusterrolebinding,clusterrole", name,
                        check=False)
        wait_until(lambda: self.get("/metrics", token)[0] == 200, 30, "/metrics allowed")
        status, text = self.get("/metrics", token)
        self.assertIn("troupe_nodes 4", text)
        status, body = self.get("/debug/state", token)
        self.assertEqual((status, json.loads(body)["stats"]["nodes"]), (200, 4))
        # Revoked: refused again once the kept answer expires.
        c.kubectl("delete", "clusterrolebinding", name)
        wait_until(lambda: self.get("/metrics", token)[0] == 403, 30, "/metrics refused again")

    def test_verbs_port_serves_neither(self):
        for path in ("/metrics", "/debug/state"):
            req = urllib.request.Request(self.c.troupe_url + path)
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=10)
            self.assertEqual(e.exception.code, 404, path)


if __name__ == "__main__":
    unittest.main()
