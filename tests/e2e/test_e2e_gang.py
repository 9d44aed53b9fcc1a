#!/usr/bin/env python3
"""End-to-end: gangs with the scheduling.x-k8s.io PodGroup, through the real
kube-scheduler calling troupe.

  test_competing_gangs_all_or_nothing   two gangs for one gang's room: never
                                        partly bound; the winner runs; the loser
                                        runs once the winner is deleted
  test_gang_missing_member              a gang short of its minMember binds
                                        nothing, and its pods' events say why
  test_high_gang_preempts_low_gangs_whole
                                        a gang of two 8-GPU members at high
                                        priority, two low-priority gangs of two
                                        4-GPU members filling its two nodes:
                                        kube-scheduler preempts through troupe's
                                        preempt verb (which keeps only nodes in
                                        the gang's plan after eviction); both
                                        low gangs are evicted whole, never left
                                        partly running, and the high gang binds
  test_member_pinned_beside_one_free_to_move
                                        a gang of two 4-GPU members, one pinned
                                        to gpu-0000 by its nodeSelector (as
                                        Kueue's topology assignment pins pods),
                                        the other free between gpu-0000 and
                                        gpu-0003, with 6 GPUs free on gpu-0000:
                                        troupe keeps gpu-0000's room for the
                                        pinned member and plans the other on
                                        gpu-0003; both bind there
  test_cpu_only_member                  a CPU-only member does not reach troupe
                                        (managedResources) and binds at once,
                                        alone; with nvidia.com/gpu: 0 it reaches
                                        troupe, which binds it at once too; the
                                        invariant checker reports exactly that

The gangs use the three H100 nodes gpu-0000, gpu-0003 and gpu-0006 (24 GPUs).
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import invariants  # noqa: E402
from e2e_common import E2E, gpu_pod, metric_samples, wait_until, module_cluster  # noqa: E402

HOSTS = ["gpu-0000", "gpu-0003", "gpu-0006"]
LABEL = "scheduling.x-k8s.io/pod-group"


setUpModule, tearDownModule = module_cluster("gang", nodes=20)


class Gangs(E2E):

    def gang_pods(self, group, n, gpus=8, **kw):
        return [gpu_pod("%s-%d" % (group, i), gpus, hosts=HOSTS, labels={LABEL: group}, **kw)
                for i in range(n)]

    def bound(self, group):
        return [p for p in self.pods(selector=LABEL + "=" + group) if p["spec"].get("nodeName")]

    def watch_all_or_nothing(self, seconds, groups):
        """For <seconds>, check both invariants from the API every half second; a
        gang may be seen partly bound only while its bindings are being posted."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            invariants.assert_holds(self.c, settle=10)
            if all(len(self.bound(g)) in (0, 3) for g in groups) and \
                    sum(len(self.bound(g)) == 3 for g in groups) == 1:
                return
            time.sleep(0.5)

    def test_competing_gangs_all_or_nothing(self):
        self.podgroup("alpha", 3)
        self.podgroup("beta", 3)
        a, b = self.gang_pods("alpha", 3), self.gang_pods("beta", 3)
        for pa, pb in zip(a, b):          # interleaved, as two controllers would
            self.create(pa)
            self.create(pb)
        wait_until(lambda: any(len(self.bound(g)) == 3 for g in ("alpha", "beta")), timeout=90,
                   what="one whole gang bound")
        self.watch_all_or_nothing(10, ("alpha", "beta"))
        winner = "alpha" if len(self.bound("alpha")) == 3 else "beta"
        loser = "beta" if winner == "alpha" else "alpha"
        self.assertEqual(len(self.bound(loser)), 0)
        for i in range(3):
            self.wait_running("%s-%d" % (winner, i))
        # The loser's members say why they wait.
        ev = self.wait_event("%s-0" % loser, "FailedScheduling", contains="troupe")
        self.assertTrue(ev["message"])
        # The winner ends (deleted, as a finished job's pods are): the loser runs.
        for i in range(3):
            self.delete_pod("%s-%d" % (winner, i), wait=False)
        wait_until(lambda: len(self.bound(loser)) == 3, timeout=120, what="the loser bound")
        nodes = sorted(p["spec"]["nodeName"] for p in self.bound(loser))
        self.assertEqual(nodes, HOSTS)

    def live(self, group):
        """The members of <group> that exist and are not being deleted."""
        return [p for p in self.pods(selector=LABEL + "=" + group)
                if not p["metadata"].get("deletionTimestamp")]

    def test_high_gang_preempts_low_gangs_whole(self):
        for name, value in (("e2e-low", 0), ("e2e-high", 1000000)):
            status, out = self.c.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                                         {"metadata": {"name": name}, "value": value})
            self.assertIn(status, (201, 409), out)
        lows = (("low-a", HOSTS[0]), ("low-b", HOSTS[1]))
        for group, host in lows:
            self.podgroup(group, 2)
            for i in range(2):
                self.create(gpu_pod("%s-%d" % (group, i), 4, hosts=[host], labels={LABEL: group},
                                    priority="e2e-low"))
        for group, _ in lows:
            for i in range(2):
                self.wait_running("%s-%d" % (group, i), timeout=90)
        before = metric_samples(self.c.metrics("troupe"), "troupe_requests_total")
        self.podgroup("high", 2)
        for i in range(2):
            self.create(gpu_pod("high-%d" % i, 8, hosts=HOSTS[:2], labels={LABEL: "high"},
                                priority="e2e-high"))
        # Until the high gang is bound: a low gang is whole or gone, but for
        # the moment its members' deletions take (one preemption evicts both:
        # they are one node's victims).
        partial_since = {}
        deadline = time.monotonic() + 180
        while len(self.bound("high")) < 2:
            self.assertLess(time.monotonic(), deadline, "the high gang was not bound in 180 s")
            now = time.monotonic()
            for group, _ in lows:
                if len(self.live(group)) == 1:
                    partial_since.setdefault(group, now)
                    self.assertLess(now - partial_since[group], 10,
                                    "gang %s left partly running" % group)
                else:
                    partial_since.pop(group, None)
            time.sleep(0.5)
        self.assertEqual(sorted(p["spec"]["nodeName"] for p in self.bound("high")),
                         sorted(HOSTS[:2]))
        for group, _ in lows:
            wait_until(lambda: not self.live(group), timeout=30,
                       what="low gang %s evicted whole" % group)
        after = metric_samples(self.c.metrics("troupe"), "troupe_requests_total")
        preempts = sum(v - before.get(k, 0) for k, v in after.items() if 'verb="preempt"' in k)
        self.assertGreaterEqual(preempts, 2, "kube-scheduler did not ask troupe's preempt "
                                "verb for each low gang's node")
        invariants.assert_holds(self.c, settle=10)

    def test_gang_missing_member(self):
        self.podgroup("short", 3)
        for p in self.gang_pods("short", 2):
            self.create(p)
        # The second member's attempt sees both (the first one's attempt may
        # have come before the second existed).
        ev = self.wait_event("short-1", "FailedScheduling", contains="waiting for its members: 2 of 3")
        self.assertIn("troupe: gang %s/short" % self.ns, ev["message"])
        self.assert_never_bound(["short-0", "short-1"], 8)
        # The third arrives: the gang binds whole.
        self.create(self.gang_pods("short", 3)[2])
        wait_until(lambda: len(self.bound("short")) == 3, timeout=90, what="gang bound")

    def test_member_pinned_beside_one_free_to_move(self):
        # gpu-0000 has 6 GPUs free: room for one 4-GPU member, not two.
        self.create(gpu_pod("pin-filler", 2, hosts=["gpu-0000"]))
        self.wait_bound("pin-filler")
        self.podgroup("pin", 2)
        free = gpu_pod("pin-free", 4, hosts=["gpu-0000", "gpu-0003"], labels={LABEL: "pin"})
        pinned = gpu_pod("pin-pinned", 4, labels={LABEL: "pin"})
        pinned["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "gpu-0000"}
        # The pinned member first, so kube-scheduler's queue (the older pod
        # first, its backoff over) tries it first once both exist.
        mark = len(self.c.log("troupe"))
        self.create(pinned)
        self.wait_event("pin-pinned", "FailedScheduling", contains="waiting for its members")
        time.sleep(2)
        self.create(free)
        # Offered gpu-0000 alone, which cannot hold both, the pinned member is
        # answered with an error kube-scheduler retries, not refused (a
        # refusal would wait for a cluster event that the other's plan is
        # not). The free member, offered both nodes, plans the pinned one on
        # gpu-0000 first and itself where room is left.
        wait_until(lambda: "pin-pinned is pinned to node gpu-0000 and other members are not"
                   in self.c.log("troupe")[mark:], timeout=60,
                   what="troupe retrying the pinned member")
        wait_until(lambda: len(self.bound("pin")) == 2, timeout=120,
                   what="the gang with a pinned member bound")
        self.assertEqual(self.pod("pin-pinned")["spec"]["nodeName"], "gpu-0000")
        self.assertEqual(self.pod("pin-free")["spec"]["nodeName"], "gpu-0003")
        self.assertEqual(invariants.violations(self.c), [])
        for n in ("pin-filler", "pin-pinned", "pin-free"):
            self.delete_pod(n, wait=False)

    def test_cpu_only_member(self):
        # Room for none of the GPU members: every H100 node is full.
        for i, h in enumerate(HOSTS):
            self.create(gpu_pod("filler-%d" % i, 8, hosts=[h]))
            self.wait_bound("filler-%d" % i)
        # A launcher asking no GPU at all is not sent to troupe: kube-scheduler's
        # DefaultBinder binds it at once, alone, although its gang cannot run.
        self.podgroup("job", 3)
        for p in self.gang_pods("job", 2):
            self.create(p)
        launcher = gpu_pod("job-launcher", None, hosts=HOSTS, labels={LABEL: "job"})
        self.create(launcher)
        self.wait_bound("job-launcher")
        self.assertEqual(len(self.bound("job")), 1)
        # The invariant checker sees exactly this.
        v = invariants.violations(self.c)
        self.assertEqual(len(v), 1, v)
        self.assertIn("gang %s/job" % self.ns, v[0])
        self.delete_pod("job-launcher")

        # Naming the managed resource with a zero request makes kube-scheduler
        # send the launcher to troupe (IsInterested looks at resource names, not
        # amounts), but troupe too binds a member asking no GPU at once: it takes
        # no place in the gang's plan. Neither way holds a CPU-only member with
        # its gang (docs/e2e.md says what to do instead).
        launcher = gpu_pod("job-launcher0", 0, hosts=HOSTS, labels={LABEL: "job"})
        self.create(launcher)
        self.wait_bound("job-launcher0")
        self.assertIsNone((self.pod("job-launcher0")["metadata"].get("annotations") or {})
                          .get("troupe.io/gpu-ids"))
        self.assertEqual(len(invariants.violations(self.c)), 1)
        # Room again: the GPU members join their launcher and the gang is whole.
        for i in range(3):
            self.delete_pod("filler-%d" % i, wait=False)
        wait_until(lambda: len(self.bound("job")) == 3, timeout=120, what="the gang bound whole")
        self.assertEqual(invariants.violations(self.c), [])


if __name__ == "__main__":
    unittest.main()
