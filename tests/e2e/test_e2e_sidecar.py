#!/usr/bin/env python3
"""End-to-end: deployment model (a), the sidecar. A second kube-scheduler,
which pods choose with schedulerName: troupe, runs with troupe beside it on
127.0.0.1 (nothing exposed); two such pairs run at once, as two replicas of
that Deployment would, and the second kube-scheduler's own leader election
(a Lease of its own, not the default scheduler's) makes one of them active.
Every replica's troupe keeps a warm cache, so a failover needs no resync.

  test_pods_choose_the_troupe_scheduler   a GPU pod with schedulerName troupe
                                          is bound through troupe (gpu-ids);
                                          one without is left to the default
                                          scheduler, which knows no extender
  test_failover_to_the_other_pair         SIGKILL of the active kube-scheduler:
                                          the standby takes the Lease and
                                          binds through its own troupe; the
                                          failover time is printed

Extenders are shared by every profile of one kube-scheduler, which is why
this is a second scheduler and not a profile of the default one.
"""
import os
import re
import signal
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import E2E, gpu_pod, gpu_ids, wait_until, module_cluster  # noqa: E402
from rig_procs import free_port  # noqa: E402
from rig_releases import ROOT  # noqa: E402

LEASE = "troupe-scheduler"


def http_get(port, path):
    """(status, text) of GET http://127.0.0.1:<port><path>; (0, error) when down."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)
LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_PERIOD_S = 15, 10, 2

setUpModule, tearDownModule = module_cluster("sidecar", nodes=20, with_troupe=False)

# kube-scheduler's own identity may take only the Lease named kube-scheduler
# (system:kube-scheduler); this one it needs for the second scheduler.
LEASE_RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: troupe-scheduler-lease, namespace: kube-system}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [troupe-scheduler]
  verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: troupe-scheduler-lease, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: troupe-scheduler-lease}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: system:kube-scheduler}
"""


def pair_config(c, troupe_port, kubeconfig):
    """The shipped scheduler-config.yaml turned into the sidecar's: one profile
    named troupe, the extender on 127.0.0.1, and a Lease of its own."""
    with open(os.path.join(ROOT, "config", "scheduler-config.yaml")) as f:
        text = f.read()
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("kubeconfig:"):
            line = line[:line.index("kubeconfig:")] + "kubeconfig: " + kubeconfig
        elif s.startswith("- schedulerName:"):
            line = line[:line.index("- schedulerName:")] + "- schedulerName: troupe"
        elif s.lstrip("- ").startswith("urlPrefix:"):
            line = line[:line.index("urlPrefix:")] + 'urlPrefix: "http://127.0.0.1:%d"' % troupe_port
        out.append(line)
    out += ["leaderElection:", "  leaderElect: true", "  resourceName: " + LEASE,
            "  resourceNamespace: kube-system", "  resourceLock: leases",
            "  leaseDuration: %ds" % LEASE_DURATION_S, "  renewDeadline: %ds" % RENEW_DEADLINE_S,
            "  retryPeriod: %ds" % RETRY_PERIOD_S]
    return "\n".join(out) + "\n"


class Sidecar(E2E):
    pairs = {}

    @classmethod
    def setUpClass(cls):
        c = cls.cluster
        c.apply(LEASE_RBAC)
        for name in ("a", "b"):
            cls.start_pair(c, name)

    @classmethod
    def tearDownClass(cls):
        for name in list(cls.pairs):
            for proc in ("sched-" + name, "troupe-" + name):
                cls.cluster.stop(proc)

    @classmethod
    def start_pair(cls, c, name):
        cfgdir = os.path.join(c.dir, "config")
        troupe_port, ops_port, sched_port = free_port(), free_port(), free_port()
        tkc = os.path.join(cfgdir, "troupe-%s.kubeconfig" % name)
        c.pki.kubeconfig(tkc, c.api_url, "troupe", token=c.troupe_token())
        cmd = [c.bin("troupe"), "--kubeconfig", tkc, "--listen", "127.0.0.1:%d" % troupe_port,
               "--ops-address", "127.0.0.1:%d" % ops_port]
        if c.troupe_config:
            path = os.path.join(cfgdir, "troupe-%s.yaml" % name)
            with open(path, "w") as f:
                f.write(c.troupe_config)
            cmd += ["--config", path]
        c._spawn("troupe-" + name, cmd)
        c._wait("troupe-%s /readyz" % name, lambda: http_get(ops_port, "/readyz")[0] == 200,
                timeout=60, proc="troupe-" + name)
        skc = os.path.join(cfgdir, "scheduler.kubeconfig")
        path = os.path.join(cfgdir, "scheduler-%s.yaml" % name)
        with open(path, "w") as f:
            f.write(pair_config(c, troupe_port, skc))
        c._spawn("sched-" + name, [
            c.bin("kube-scheduler"), "--config=" + path,
            "--authentication-kubeconfig=" + skc, "--authorization-kubeconfig=" + skc,
            "--bind-address=127.0.0.1", "--secure-port=%d" % sched_port,
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics", "--v=2"])
        cls.pairs[name] = {"troupe": troupe_port, "ops": ops_port, "scheduler": sched_port,
                           "troupe_pid": c.pid("troupe-" + name)}

    def leader(self):
        """The pair whose kube-scheduler holds the Lease now, or None."""
        for name in self.pairs:
            proc = "sched-" + name
            if not self.c.alive(proc):
                continue
            log = self.c.log(proc).rpartition("==== %s started" % proc)[2]
            # "Successfully acquired lease" lock="kube-system/troupe-scheduler"
            # (structured logs; older releases: "successfully acquired lease
            # kube-system/troupe-scheduler").
            if re.search(r'(?i)successfully acquired lease\W+(lock=")?kube-system/' + LEASE, log):
                return name
        return None

    def troupe_pod(self, name, gpus):
        p = gpu_pod(name, gpus)
        p["spec"]["schedulerName"] = "troupe"
        return p

    def test_pods_choose_the_troupe_scheduler(self):
        wait_until(self.leader, timeout=60, what="a troupe-scheduler leader")
        self.create(self.troupe_pod("through-troupe", 2))
        p = self.wait_bound("through-troupe", timeout=90)
        self.assertEqual(len(gpu_ids(p)), 2, p["metadata"].get("annotations"))
        placed = p
        # The default scheduler has no extender here: its pods get no gpu-ids.
        self.create(gpu_pod("default-one", 1))
        p = self.wait_bound("default-one", timeout=90)
        self.assertNotIn("troupe.io/gpu-ids", p["metadata"].get("annotations") or {})
        # Both troupes know the pod troupe placed (warm caches), whichever bound it.
        uid = placed["metadata"]["uid"]
        for name, ports in self.pairs.items():
            wait_until(lambda: uid in http_get(ports["ops"], "/debug/cache")[1], timeout=30,
                       what="troupe-%s knows the pod" % name)

    def test_failover_to_the_other_pair(self):
        first = wait_until(self.leader, timeout=60, what="a troupe-scheduler leader")
        self.create(self.troupe_pod("before", 1))
        self.wait_bound("before", timeout=90)
        killed = time.monotonic()
        self.c.signal("sched-" + first, signal.SIGKILL)
        self.create(self.troupe_pod("after", 1))
        p = self.wait_bound("after", timeout=LEASE_DURATION_S + RENEW_DEADLINE_S + 60)
        bound_s = time.monotonic() - killed
        self.assertEqual(len(gpu_ids(p)), 1)
        second = self.leader()
        self.assertIsNotNone(second)
        self.assertNotEqual(second, first)
        # The new leader bound through its own troupe, which was ready (warm)
        # before the kill and was not restarted since.
        self.assertTrue(self.c.alive("troupe-" + second))
        self.assertEqual(self.c.pid("troupe-" + second), self.pairs[second]["troupe_pid"])
        tlog = self.c.log("troupe-" + second).rpartition("==== troupe-%s started" % second)[2]
        self.assertIn("troupe is ready", tlog)
        self.assertIn("/after", tlog)
        print("\nsidecar failover: the standby kube-scheduler bound a pod %.1f s after the "
              "leader was killed (lease %ds, renew deadline %ds, retry %ds)"
              % (bound_s, LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_PERIOD_S))


if __name__ == "__main__":
    unittest.main()
