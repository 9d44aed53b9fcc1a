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
  test_z_standby_writes_nothing_until_it_leads
                                   a second replica standing by writes no status
                                   while the rig's troupe leads; once the leader
                                   stops (releasing the Lease) it leads and
                                   writes (last: it restarts the rig's troupe)

The cluster runs with the release's workload gates so that both PodGroup APIs
are served at once, and the rig's troupe with leader election.
"""
import json
import os
import sys
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as rig  # noqa: E402
from e2e_common import FAST_TROUPE, E2E, gpu_pod, module_cluster, wait_until  # noqa: E402

HOSTS = ["gpu-0000", "gpu-0003", "gpu-0006"]
LABEL = "scheduling.x-k8s.io/pod-group"

# Leader election on (its Lease in kube-system, config/deploy/rbac.yaml's Role):
# the rig's troupe leads alone until test_z starts a second replica.
TROUPE = FAST_TROUPE + """\
leader_election:
  enabled: true
  namespace: kube-system
"""

setUpModule, tearDownModule = module_cluster(
    "pgstatus", nodes=10, troupe_config=TROUPE,
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
        mark = self.log_size("troupe")
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
        self.assertNotIn("pod group %s/up: status" % self.ns, self.log("troupe", mark))

    def log_size(self, name):
        try:
            return os.path.getsize(os.path.join(self.c.logs, name + ".log"))
        except OSError:
            return 0

    def log(self, name, since=0):
        """A component's log from byte <since> on (the rig keeps earlier runs' logs)."""
        with open(os.path.join(self.c.logs, name + ".log"), "rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace")

    def test_z_standby_writes_nothing_until_it_leads(self):
        port = rig.free_port()
        mark, standby_mark = self.log_size("troupe"), self.log_size("troupe-standby")
        self.c._spawn("troupe-standby", [
            self.c.bin("troupe"), "--kubeconfig",
            os.path.join(self.c.dir, "config", "troupe.kubeconfig"),
            "--config", os.path.join(self.c.dir, "config", "troupe.yaml"),
            "--listen", "127.0.0.1:%d" % port, "--ops-address", "127.0.0.1:0",
            "--leader-elect-identity", "standby"])
        try:
            wait_until(lambda: readyz(port)[0] == 503 and
                       readyz(port)[1].get("status") == "standby",
                       timeout=60, what="the second replica standing by")
            self.podgroup("seen-by-leader", 2)
            self.wait_status("seen-by-leader", "Pending, written by the leader",
                             phase="Pending")
            self.assertIn("pod group %s/seen-by-leader: status" % self.ns,
                          self.log("troupe", mark))
            self.assertNotIn("[pgstatus] pod group", self.log("troupe-standby", standby_mark))
            # The leader stops cleanly and releases the Lease: the standby leads.
            self.c.stop("troupe")
            wait_until(lambda: readyz(port)[0] == 200, timeout=60, what="the standby leading")
            self.podgroup("seen-by-new-leader", 2)
            self.wait_status("seen-by-new-leader", "Pending, written by the new leader",
                             phase="Pending")
            self.assertIn("pod group %s/seen-by-new-leader: status" % self.ns,
                          self.log("troupe-standby", standby_mark))
        finally:
            self.c.stop("troupe-standby")
            if not self.c.alive("troupe"):
                self.c.start_troupe()


def readyz(port):
    """(status, parsed body) of a replica's /readyz; (0, {}) if it does not answer."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port, timeout=2) as r:
            return r.status, json.loads(r.read().decode() or "{}")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read().decode() or "{}")
        except ValueError:
            return e.code, {}
    except (OSError, ValueError):
        return 0, {}


if __name__ == "__main__":
    unittest.main()
