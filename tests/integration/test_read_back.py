#!/usr/bin/env python3
"""troupe believes the node's read-back over its own choice.

A node agent (troupe-node, from the kubelet's PodResources API) writes the
devices a pod's containers really got as troupe.io/gpu-ids-actual. troupe's
cache, fed by its watch of the fake API server, must then count those devices
for the pod and free the ones it had chosen, say so in its log and /metrics,
and never count a device twice: another pod troupe places afterwards may get
the devices the first pod was meant to have.
"""
import unittest

from live_common import LiveCase, assert_converges, assert_no_device_twice, \
    load_fixture_cluster, wait_until


def cached(troupe, uid):
    for p in troupe.cache()["pods"]:
        if p["uid"] == uid:
            return p
    return None


class ReadBack(LiveCase):
    def test_read_back_replaces_troupes_choice(self):
        load_fixture_cluster(self.srv)
        t = self.start_live()
        assert_converges(self, t, self.srv)
        # resnet-0 (4 GPUs on gpu-a100-0, troupe.io/gpu-ids 0,1,2,3) really got 4-7.
        pod = self.srv.get("pods", "default", "resnet-0") or next(
            p for p in self.srv.list("pods") if p["metadata"]["name"] == "resnet-0")
        ns, uid = pod["metadata"]["namespace"], pod["metadata"]["uid"]
        self.assertEqual(cached(t, uid)["devices"], "0,1,2,3")
        self.assertEqual(t.metric("troupe_pods_devices_read_back_differ"), 0)
        self.srv.patch("pods", ns, "resnet-0",
                       {"metadata": {"annotations": {"troupe.io/gpu-ids-actual": "4,5,6,7"}}})
        wait_until(lambda: cached(t, uid)["devices"] == "4,5,6,7", what="the read-back counted")
        assert_converges(self, t, self.srv)
        assert_no_device_twice(self, t)
        self.assertEqual(t.metric("troupe_pods_devices_read_back"), 1)
        self.assertEqual(t.metric("troupe_pods_devices_read_back_differ"), 1)
        self.assertIn("pod %s/resnet-0 on gpu-a100-0: the node reports devices 4,5,6,7 "
                      "(troupe.io/gpu-ids-actual) where troupe held 0,1,2,3" % ns, t.log())
        # troupe's view of the node: 0-3 free now, 4-7 held.
        node = next(n for n in t.state()["nodes"] if n["name"] == "gpu-a100-0")
        self.assertEqual(node["gpuFree"], 4)
        # A read-back that agrees with troupe.io/gpu-ids changes nothing.
        self.srv.patch("pods", ns, "resnet-0",
                       {"metadata": {"annotations": {"troupe.io/gpu-ids": "4,5,6,7"}}})
        wait_until(lambda: t.metric("troupe_pods_devices_read_back_differ") == 0,
                   what="the agreeing read-back")
        self.assertEqual(cached(t, uid)["devices"], "4,5,6,7")
        # An invalid read-back (3 devices for a 4-GPU pod) is ignored:
        # troupe.io/gpu-ids counts.
        self.srv.patch("pods", ns, "resnet-0",
                       {"metadata": {"annotations": {"troupe.io/gpu-ids-actual": "0,1,2"}}})
        wait_until(lambda: t.metric("troupe_pods_devices_read_back") == 0,
                   what="the invalid read-back ignored")
        self.assertEqual(cached(t, uid)["devices"], "4,5,6,7")
        assert_converges(self, t, self.srv)


if __name__ == "__main__":
    unittest.main()
