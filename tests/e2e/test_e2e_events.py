#!/usr/bin/env python3
"""End-to-end: troupe's Kubernetes Events (events.k8s.io/v1, reporting
controller troupe) on the real control plane, read the way people read them:
`kubectl describe pod` and `kubectl describe podgroup`.

  test_pending_gang_says_why   a gang short of its minMember: describe of its
                               PodGroup and of a member pod show troupe's
                               GangWaitingForMembers with "2 of 3", the
                               repeats counted in one Event (a series)
  test_bound_pod_says_devices  a pod troupe binds: describe shows
                               DevicesChosen with its GPU devices

The pods use the H100 nodes gpu-0000, gpu-0003 and gpu-0006.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import E2E, FAST_TROUPE, gpu_pod, module_cluster, wait_until  # noqa: E402

HOSTS = ["gpu-0000", "gpu-0003", "gpu-0006"]
LABEL = "scheduling.x-k8s.io/pod-group"

setUpModule, tearDownModule = module_cluster("events", nodes=8, troupe_config=FAST_TROUPE + """
events:
  series_flush_seconds: 1
""")


class Events(E2E):

    def describe(self, kind, name):
        return self.c.kubectl("describe", kind, name, "-n", self.ns).stdout

    def troupe_events(self, name, reason):
        """events.k8s.io Events troupe wrote regarding <name>."""
        out = self.c.get("/apis/events.k8s.io/v1/namespaces/%s/events" % self.ns)["items"]
        return [e for e in out if e["regarding"].get("name") == name and
                e.get("reason") == reason and e.get("reportingController") == "troupe"]

    def test_pending_gang_says_why(self):
        pg = self.podgroup("short", 3)
        for i in range(2):
            self.create(gpu_pod("short-%d" % i, 8, hosts=HOSTS, labels={LABEL: "short"}))
        # kube-scheduler retries the members; each try is one more occurrence.
        ev = wait_until(lambda: [e for e in self.troupe_events("short", "GangWaitingForMembers")
                                 if "2 of 3" in e.get("note", "")],
                        timeout=90, what="GangWaitingForMembers on the PodGroup")[0]
        self.assertEqual(ev["regarding"]["uid"], pg["metadata"]["uid"])
        self.assertEqual(ev["regarding"]["kind"], "PodGroup")
        self.assertEqual(ev["type"], "Normal")
        out = wait_until(lambda: (lambda d: d if "GangWaitingForMembers" in d else None)(
            self.describe("podgroup", "short")), timeout=60,
            what="kubectl describe podgroup shows troupe's reason")
        self.assertIn("waiting for its members: 2 of 3 exist", out)
        self.assertIn("troupe", out)
        # A member pod says the same, in troupe's words (beside kube-scheduler's
        # FailedScheduling summary).
        pod_out = wait_until(lambda: (lambda d: d if "GangWaitingForMembers" in d else None)(
            self.describe("pod", "short-1")), timeout=60,
            what="kubectl describe pod shows troupe's reason")
        self.assertIn("gang short: waiting for its members: 2 of 3 exist", pod_out)
        # Repeats are one Event whose count grows, not one Event each.
        def two_of_three():
            return [e for e in self.troupe_events("short-1", "GangWaitingForMembers")
                    if "2 of 3" in e.get("note", "")]
        wait_until(lambda: any((e.get("series") or {}).get("count", 1) >= 2
                               for e in two_of_three()),
                   timeout=90, what="the pod's Event counted as a series")
        self.assertEqual(len(two_of_three()), 1)
        self.assert_never_bound(["short-0", "short-1"], 2)

    def test_bound_pod_says_devices(self):
        self.create(gpu_pod("single", 2, hosts=HOSTS))
        self.wait_bound("single")
        out = wait_until(lambda: (lambda d: d if "DevicesChosen" in d else None)(
            self.describe("pod", "single")), timeout=60,
            what="kubectl describe pod shows DevicesChosen")
        self.assertIn("GPU devices [", out)
        (ev,) = self.troupe_events("single", "DevicesChosen")
        self.assertEqual(ev["regarding"]["uid"], self.pod("single")["metadata"]["uid"])
        self.assertIn(self.pod("single")["spec"]["nodeName"], ev["note"])


if __name__ == "__main__":
    unittest.main()
