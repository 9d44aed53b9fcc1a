#!/usr/bin/env python3
"""End-to-end: Kueue beside troupe. Kueue's own controller manager, built from
its module (sigs.k8s.io/kueue, tests/tools/kueue), admits jobs by quota with
topology-aware scheduling (TAS) on the rig; kube-scheduler with troupe as its
extender places the pods; troupe gangs the job's pods by their pod-group label.

  test_admitted_gang_job_runs_where_kueue_assigned
        a batch Job of two 8-GPU pods, a troupe gang, queued in Kueue with a
        required topology: Kueue admits it (quota), gates its pods and lifts
        the gates with its topology assignment (a node per pod); troupe waits
        while the pods are gated (they are no members yet), then binds both,
        each on the node Kueue assigned. Neither waits on the other: no
        deadlock, and no gate but Kueue's
  test_second_job_waits_in_kueue_not_in_troupe
        a second gang Job that the ClusterQueue's GPU quota cannot hold stays
        suspended in Kueue (troupe never sees a pod of it, so holds nothing
        for it); when the first job is deleted Kueue admits it and troupe
        places it whole

The cluster: 8 simulated nodes of 8 GPUs (one rack), Kueue's batch/job and pod
integrations, a ClusterQueue of 16 nvidia.com/gpu over a ResourceFlavor with a
Topology of rack (network.topology.nvidia.com/block) and host.
"""
import json
import os
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import E2E, start_module_cluster, wait_until  # noqa: E402
from rig_kueue import start_kueue  # noqa: E402


def setUpModule():
    E2E.cluster = start_module_cluster("kueue", nodes=8)
    try:
        start_kueue(E2E.cluster)
    except Exception:
        E2E.cluster.down()      # unittest skips tearDownModule after a failed set-up
        raise
    c = E2E.cluster
    objs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
         "metadata": {"name": "rack-host"},
         "spec": {"levels": [{"nodeLabel": "network.topology.nvidia.com/block"},
                             {"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": "gpu"},
         "spec": {"nodeLabels": {"nvidia.com/gpu.present": "true"}, "topologyName": "rack-host"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
         "metadata": {"name": "gpus"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
             "flavors": [{"name": "gpu", "resources": [
                 {"name": "cpu", "nominalQuota": "64"},
                 {"name": "memory", "nominalQuota": "64Gi"},
                 {"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]}]}},
    ]
    for o in objs:
        c.apply(json.dumps(o))


def tearDownModule():
    if E2E.cluster:
        E2E.cluster.down()      # Kueue too


class Kueue(E2E):

    def setUp(self):
        super().setUp()
        self.c.apply(json.dumps({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": self.ns},
            "spec": {"clusterQueue": "gpus"}}))

    def gang_job(self, name, pods=2, gpus=8):
        """A Job of <pods> pods of <gpus> GPUs in Kueue's queue "lq", its pods a
        troupe gang (the pod-group label, the quorum on the pods), requiring
        one rack through Kueue's TAS."""
        tmpl = {"metadata": {
            "labels": {"scheduling.x-k8s.io/pod-group": name},
            "annotations": {"pod-group.scheduling.sigs.k8s.io/min-available": str(pods),
                            "kueue.x-k8s.io/podset-required-topology":
                                "network.topology.nvidia.com/block",
                            "rig.troupe.io/run-seconds": "3600"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "work", "image": "registry.invalid/e2e:1",
                                     "resources": {
                                         "requests": {"cpu": "100m", "memory": "64Mi",
                                                      "nvidia.com/gpu": str(gpus)},
                                         "limits": {"nvidia.com/gpu": str(gpus)}}}]}}
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
               "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                        "template": tmpl}}
        return self.create(job, path="/apis/batch/v1/namespaces/%s/jobs" % self.ns)

    def job_pods(self, name):
        return self.pods(selector="batch.kubernetes.io/job-name=" + name)

    def job(self, name):
        return self.c.get("/apis/batch/v1/namespaces/%s/jobs/%s" % (self.ns, name))

    def wait_job_bound(self, name, pods, timeout=120):
        def bound():
            ps = self.job_pods(name)
            return ps if len(ps) == pods and all(p["spec"].get("nodeName") for p in ps) else None
        return wait_until(bound, timeout=timeout, what="job %s's %d pods bound" % (name, pods))

    def test_admitted_gang_job_runs_where_kueue_assigned(self):
        job = self.gang_job("train")
        # Kueue's job webhook suspended it; its workload is admitted by quota.
        self.assertTrue(job["spec"].get("suspend"), "Kueue did not suspend the job")
        pods = self.wait_job_bound("train", 2)
        for p in pods:
            sel = p["spec"].get("nodeSelector") or {}
            host = sel.get("kubernetes.io/hostname")
            self.assertTrue(host, "Kueue's topology assignment is not on %s: %s"
                            % (p["metadata"]["name"], sel))
            self.assertEqual(p["spec"]["nodeName"], host, "troupe ignored Kueue's assignment")
            self.assertEqual(p["spec"].get("schedulingGates") or [], [])
            ids = (p["metadata"].get("annotations") or {}).get("troupe.io/gpu-ids", "")
            self.assertEqual(len(ids.split(",")), 8, "not placed through troupe: %r" % ids)
        self.assertEqual(len({p["spec"]["nodeName"] for p in pods}), 2)
        wl = self.c.get("/apis/kueue.x-k8s.io/v1beta2/namespaces/%s/workloads" % self.ns)["items"]
        self.assertEqual(len(wl), 1)
        admitted = [c for c in wl[0]["status"].get("conditions", []) if c["type"] == "Admitted"]
        self.assertEqual(admitted[0]["status"], "True")
        # troupe's gang: both members, the quorum the pods name, both bound.
        url = "%s/debug/explain?podgroup=%s/train" % (self.c.troupe_ops_url, self.ns)
        with urllib.request.urlopen(url, timeout=10) as r:
            gang = json.loads(r.read())["gang"]
        self.assertEqual((gang["members"], gang["bound"], gang["quorum"], gang["quorumFrom"]),
                         (2, 2, 2, "pod"), gang)

    def test_second_job_waits_in_kueue_not_in_troupe(self):
        self.gang_job("first")
        self.wait_job_bound("first", 2)
        self.gang_job("second")
        # The quota (16 GPUs) is used: Kueue keeps the job suspended, its
        # workload pending, and makes no pod of it.
        def pending():
            wls = self.c.get("/apis/kueue.x-k8s.io/v1beta2/namespaces/%s/workloads"
                             % self.ns)["items"]
            return any(c["type"] == "QuotaReserved" and c["status"] == "False"
                       for w in wls if w["metadata"]["name"].startswith("job-second")
                       for c in w.get("status", {}).get("conditions", []))
        wait_until(pending, timeout=60, what="the second job's workload pending in Kueue")
        self.assertTrue(self.job("second")["spec"].get("suspend"))
        self.assertEqual(self.job_pods("second"), [])
        # The first deleted: Kueue admits the second, troupe places it whole.
        self.c.request("DELETE", "/apis/batch/v1/namespaces/%s/jobs/first" % self.ns,
                       {"propagationPolicy": "Foreground"})
        pods = self.wait_job_bound("second", 2, timeout=180)
        for p in pods:
            self.assertEqual(p["spec"]["nodeName"],
                             p["spec"]["nodeSelector"]["kubernetes.io/hostname"])


if __name__ == "__main__":
    unittest.main()
