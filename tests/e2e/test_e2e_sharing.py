#!/usr/bin/env python3
"""End-to-end: shared GPUs that need troupe.yaml's settings, through the real
kube-scheduler and API server. (Time-slicing, MPS and MIG single as the shipped
configuration reads them from the labels: test_e2e_scheduling.py,
test_shared_gpus_from_the_labels.)

  test_mig_mixed_profiles_packed     a MIG mixed node (mig-parted's
                                        all-balanced on 8 H100s): pods of three
                                        profiles each get a device of theirs,
                                        packed onto one GPU, and when a
                                        profile is used up the next pod waits
                                        with troupe's reason
  test_fail_requests_greater_than_one_from_troupe_yaml
                                     a time-sliced resource whose device
                                        plugin refuses requests above 1 (said
                                        in troupe.yaml): such a pod is refused
                                        with the reason, one of 1 placed, and
                                        packed (troupe.yaml) on one GPU

The cluster: troupe.yaml manages three MIG profiles and configures
nvidia.com/gpu.shared; kube-scheduler's managedResources gets the profiles too.
Its nodes are made here, tainted so only these tests' pods land on them.
"""
import os
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import (E2E, FAST_TROUPE, create_node, gpu_pod, wait_until,  # noqa: E402
                        module_cluster)

PROFILES = ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"]
TROUPE = FAST_TROUPE + """\
resources:
  gpu: [nvidia.com/gpu, nvidia.com/gpu.shared, %s]
sharing:
  nvidia.com/gpu.shared:
    packing: packed
    fail_requests_greater_than_one: true
""" % ", ".join(PROFILES)

setUpModule, tearDownModule = module_cluster("sharing", nodes=2, troupe_config=TROUPE,
                                             managed_resources=PROFILES)

TAINT = {"key": "rig.troupe.io/shared", "value": "yes", "effect": "NoSchedule"}


class Sharing(E2E):

    def node(self, name, resources, labels):
        create_node(self.c, name, resources, labels=dict(labels, **{"rig.troupe.io/kind": "shared"}),
                    taints=[TAINT])
        self.addCleanup(self.c.request, "DELETE", "/api/v1/nodes/" + name)
        wait_until(lambda: name in urllib.request.urlopen(
            self.c.troupe_ops_url + "/debug/cache", timeout=10).read().decode(), timeout=30,
            what="troupe's cache showing " + name)

    def shared_pod(self, name, resource, count, host):
        p = gpu_pod(name, None, hosts=[host])
        res = p["spec"]["containers"][0]["resources"]
        res["limits"][resource] = res["requests"][resource] = str(count)
        p["spec"]["tolerations"] = [{"key": TAINT["key"], "operator": "Exists"}]
        return self.create(p)

    def slots(self, name):
        ann = self.wait_bound(name)["metadata"]["annotations"]
        return [tuple(int(x) for x in s.split(":")) for s in ann["troupe.io/gpu-ids"].split(",")]

    def test_mig_mixed_profiles_packed(self):
        # all-balanced: every GPU two 1g.10gb, one 2g.20gb, one 3g.40gb; troupe
        # lays each GPU out in resources.gpu's order: slots 0-1 1g, 2 2g, 3 3g.
        counts = {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8,
                  "nvidia.com/mig-3g.40gb": 8}
        labels = {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "8",
                  "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        labels.update({r + ".count": str(n) for r, n in counts.items()})
        self.node("mig-0", {r: str(n) for r, n in counts.items()}, labels)
        slot_of = {"nvidia.com/mig-1g.10gb": (0, 1), "nvidia.com/mig-2g.20gb": (2,),
                   "nvidia.com/mig-3g.40gb": (3,)}
        got = {}
        for i, r in enumerate(PROFILES):
            self.shared_pod("p-%d" % i, r, 1, "mig-0")
            (g, s), = self.slots("p-%d" % i)
            self.assertIn(s, slot_of[r], "%s got slot %d of GPU %d" % (r, s, g))
            got[r] = g
        # Packed: the three share one GPU, the other seven stay whole.
        self.assertEqual(len(set(got.values())), 1, got)
        # The 2g.20gb profile used up: troupe and kube-scheduler agree the
        # ninth waits; troupe's reason names the profile.
        for i in range(7):
            self.shared_pod("two-%d" % i, "nvidia.com/mig-2g.20gb", 1, "mig-0")
        two = {self.slots("two-%d" % i)[0] for i in range(7)} | {(got[PROFILES[1]], 2)}
        self.assertEqual(two, {(g, 2) for g in range(8)})
        self.shared_pod("two-more", "nvidia.com/mig-2g.20gb", 1, "mig-0")
        self.assert_never_bound(["two-more"], 3)
        # Freed: the waiting pod gets the freed device.
        self.delete_pod("two-0")
        (g, s), = self.slots("two-more")
        self.assertEqual(s, 2)

    def test_fail_requests_greater_than_one_from_troupe_yaml(self):
        # renameByDefault: nvidia.com/gpu.shared, labelled as nvidia.com/gpu.
        self.node("ts-0", {"nvidia.com/gpu.shared": "16"},
                  {"nvidia.com/gpu.sharing-strategy": "time-slicing",
                   "nvidia.com/gpu.replicas": "4"})
        self.shared_pod("two", "nvidia.com/gpu.shared", 2, "ts-0")
        ev = self.wait_event("two", "FailedScheduling", contains="troupe: ")
        self.assertIn("failRequestsGreaterThanOne", ev["message"])
        # Packed: single replicas fill GPU 0 before GPU 1 is touched.
        gpus = []
        for i in range(5):
            self.shared_pod("one-%d" % i, "nvidia.com/gpu.shared", 1, "ts-0")
            gpus.append(self.slots("one-%d" % i)[0][0])
        self.assertEqual(gpus, [0, 0, 0, 0, 1], gpus)
        self.assert_never_bound(["two"], 2)


if __name__ == "__main__":
    unittest.main()
