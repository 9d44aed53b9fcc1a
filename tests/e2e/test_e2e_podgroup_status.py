#!/usr/bin/env python3
"""End-to-end: troupe keeps PodGroup status (src/cache/podgroup_status.c) on the
real kube-apiserver, through the status subresource of our CRD
(config/crds/podgroups.scheduling.x-k8s.io.yaml), with the RBAC the rig applies
from config/deploy/rbac.yaml (the ClusterRole troupe-podgroup-status).

  test_status_follows_the_gang     a gang of 3 bound by kube-scheduler through
                                   troupe: `kubectl get podgroup -o json` shows
                                   scheduled 3 and phase Running once the pods
                                   run, then Finished with succeeded 3 once they
                                   end; the table `kubectl get podgroup` prints
                                   shows the phase
  test_upstream_group_not_written  a gang of the upstream scheduling.k8s.io
                                   PodGroup (GenericWorkload gate) binds, and
                                   troupe writes nothing to it: its status holds
                                   only what kube-scheduler writes

The cluster runs with the release's workload gates so that both PodGroup APIs
are served at once.
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as rig  # noqa: E402
from e2e_common import E2E, gpu_pod, module_cluster, wait_until  # noqa: E402

HOSTS = ["gpu-0000", "gpu-0003", "gpu-0006"]
LABEL = "scheduling.x-k8s.io/pod-group"

setUpModule, tearDownModule = module_cluster(
    "pgstatus", nodes=10,
    feature_gates=rig.workload_gates(rig.release_version(os.environ.get("TROUPE_E2E_RELEASE"))))


class PodGroupStatus(E2E):

    def kubectl_podgroup(self, name):
        r = self.c.kubectl("get", "podgroups.scheduling.x-k8s.io", name, "-n", self.ns,
                           "-o", "json")
        return json.loads(r.stdout)

    def status(self, name):
        return self.kubectl_podgroup(name).get("status") or {}

    def wait_status(self, name, what, timeout=120, **want):
        return wait_until(lambda: (lambda st: st if all(st.get(k) == v for k, v in want.items())
                                   else None)(self.status(name)),
                          timeout=timeout, what="PodGroup %s %s (status %s)"
                          % (name, what, self.status(name)))

    def test_status_follows_the_gang(self):
        self.podgroup("job", 3)
        for i in range(3):
            self.create(gpu_pod("job-%d" % i, 8, hosts=HOSTS, labels={LABEL: "job"},
                                run_seconds=15))
        for i in range(3):
            self.wait_bound("job-%d" % i, timeout=90)
        st = self.wait_status("job", "Running with 3 scheduled", phase="Running", scheduled=3,
                              running=3, failed=0)
        self.assertTrue(st.get("scheduleStartTime"), st)
        table = self.c.kubectl("get", "podgroups.scheduling.x-k8s.io", "job", "-n", self.ns).stdout
        self.assertRegex(table, r"(?m)^job\s+3\s+Running\s+3\s", table)
        st = self.wait_status("job", "Finished once the pods end", phase="Finished",
                              succeeded=3, running=0)
        self.assertEqual(self.status("job").get("scheduleStartTime"),
                         st.get("scheduleStartTime"))

    def test_upstream_group_not_written(self):
        api = self.c.workload_api
        path = "/apis/%s/namespaces/%s/podgroups" % (api, self.ns)
        self.create({"apiVersion": api, "kind": "PodGroup", "metadata": {"name": "up"},
                     "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}, path=path)
        for i in range(3):
            self.create(gpu_pod("up-%d" % i, 8, hosts=HOSTS, scheduling_group="up"))
        for i in range(3):
            self.wait_running("up-%d" % i, timeout=90)
        status, pg = self.c.request("GET", path + "/up")
        self.assertEqual(status, 200, pg)
        st = pg.get("status") or {}
        # Only kube-scheduler's conditions: nothing of the scheduler-plugins status.
        self.assertEqual(set(st) - {"conditions"}, set(), st)
        fields = {f.get("manager") for f in pg["metadata"].get("managedFields") or []}
        self.assertFalse(any("troupe" in (m or "") for m in fields), fields)
        with open(os.path.join(self.c.logs, "troupe.log"), errors="replace") as f:
            self.assertNotIn("pod group %s/up: status" % self.ns, f.read())


if __name__ == "__main__":
    unittest.main()
