"""What /bind checks before troupe posts a Binding with its own permission,
against the test API server: a caller that can reach troupe's port but is not
kube-scheduler asks it to bind a pod nobody scheduled - one troupe never saw,
one only a filter call named, a CPU pod onto a cordoned, a NotReady or an
unknown node, a pod already bound elsewhere, a uid that names another pod.
Each is refused with a reason, troupe logs it, and the API server receives no
Binding; a normal bind still posts one.

The test cluster (tests/data/cluster.json): gpu-l4-0 is cordoned, gpu-t4-0 is
Ready=Unknown, cpu-0 has no GPU; ml/resnet-0 is bound to gpu-a100-0 and the CPU
pod kube-system/coredns-5d78c9869d-abcde (uid ...005) to cpu-0."""
import unittest

from live_common import (LiveCase, assert_no_device_twice, load_fixture_cluster, wait_until)
from schedclient import gpu_pod

RESNET_UID = "6f1c2a3e-0000-4000-8000-000000000001"
CPU_BOUND_UID = "6f1c2a3e-0000-4000-8000-000000000005"


def pending(name, gpus):
    p = gpu_pod("ml", name, None, gpus, cpu="1")
    del p["metadata"]["uid"]
    return p


class BindChecksTest(LiveCase):
    def setUp(self):
        super().setUp()
        load_fixture_cluster(self.srv)
        self.cpu = self.srv.create("pods", pending("cpu-p", 0))
        self.gpu = self.srv.create("pods", pending("gpu-p", 2))
        self.t = self.start_live()
        wait_until(lambda: self.t.request("GET", "/readyz")[0] == 200, 20, "ready")
        # kube-scheduler binds only pods its own watch has shown; so does this
        # test, once troupe's watch has them too.
        uids = {self.cpu["metadata"]["uid"], self.gpu["metadata"]["uid"]}
        wait_until(lambda: uids <= {p["uid"] for p in self.t.cache()["pods"] if p["fromAPI"]},
                   20, "the pods in troupe's cache")

    def bind(self, name, uid, node, ns="ml"):
        s, _, body = self.t.request("POST", "/bind", {"PodName": name, "PodNamespace": ns,
                                                      "PodUID": uid, "Node": node})
        self.assertEqual(s, 200)
        return body["Error"]

    def assert_refused(self, name, uid, node, why, ns="ml"):
        before = len(self.srv.bindings)
        err = self.bind(name, uid, node, ns)
        self.assertIn(why, err, f"bind {ns}/{name} ({uid}) to {node}")
        self.assertEqual(len(self.srv.bindings), before,
                         f"bind {ns}/{name} to {node} was refused but a Binding was posted")
        # The log names who asked: the client's address and port.
        self.assertRegex(self.t.log(), r"bind: refused pod %s/%s \(uid %s\) -> node %s, asked by "
                         r"127\.0\.0\.1:\d+: " % (ns, name, uid, node))

    def test_hostile_binds_are_refused_and_post_nothing(self):
        cpu_uid, gpu_uid = self.cpu["metadata"]["uid"], self.gpu["metadata"]["uid"]
        # Never seen anywhere.
        self.assert_refused("nobody", "uid-nobody", "gpu-a100-1", "unknown to troupe")
        # Named only by a filter call: troupe takes the filter's word (its
        # watch often lags kube-scheduler's by tens of milliseconds) and posts;
        # the API server refuses the Binding of a pod that does not exist, and
        # troupe releases its GPUs at once.
        made_up = gpu_pod("ml", "made-up", "uid-made-up", 1)
        s, _, f = self.t.request("POST", "/filter", {"Pod": made_up, "Nodes": None,
                                                     "NodeNames": ["gpu-a100-1"]})
        self.assertEqual((s, f["NodeNames"]), (200, ["gpu-a100-1"]))
        self.assertIn('pods "made-up" not found', self.bind("made-up", "uid-made-up",
                                                             "gpu-a100-1", "ml"))
        # A CPU pod to a cordoned node, a NotReady one, an unknown one.
        self.assert_refused("cpu-p", cpu_uid, "gpu-l4-0", "node is cordoned")
        self.assert_refused("cpu-p", cpu_uid, "gpu-t4-0", "node is not Ready")
        self.assert_refused("cpu-p", cpu_uid, "ghost-0", "node ghost-0 is unknown")
        # The same for a GPU pod.
        self.assert_refused("gpu-p", gpu_uid, "gpu-l4-0", "node is cordoned")
        # Already bound elsewhere: a GPU pod, and a CPU pod.
        self.assert_refused("resnet-0", RESNET_UID, "gpu-a100-1",
                            "already bound to node gpu-a100-0")
        self.assert_refused("coredns-5d78c9869d-abcde", CPU_BOUND_UID, "gpu-h100-1",
                            "already bound to node cpu-0", ns="kube-system")
        # The uid names another pod; another namespace; none.
        self.assert_refused("gpu-p", cpu_uid, "gpu-a100-1", "belongs to pod ml/cpu-p")
        self.assert_refused("gpu-p", gpu_uid, "gpu-a100-1", "belongs to pod ml/gpu-p",
                            ns="default")
        self.assert_refused("gpu-p", gpu_uid, "gpu-a100-1", "belongs to pod ml/gpu-p", ns="")
        # The only Binding posted is the made-up pod's, which the server refused.
        self.assertEqual([b["metadata"]["name"] for b in self.srv.bindings], ["made-up"])
        for name in ("cpu-p", "gpu-p"):
            self.assertNotIn("nodeName", self.srv.get("pods", "ml", name)["spec"])
        # Each refusal is logged with its reason.
        log = self.t.log()
        self.assertIn("bind: refused pod ml/cpu-p", log)
        self.assertIn("node is cordoned", log)

    def test_normal_binds_still_post(self):
        self.assertEqual(self.bind("cpu-p", self.cpu["metadata"]["uid"], "cpu-0"), "")
        self.assertEqual(self.srv.get("pods", "ml", "cpu-p")["spec"]["nodeName"], "cpu-0")
        s, _, f = self.t.request("POST", "/filter", {"Pod": self.gpu, "Nodes": None,
                                                     "NodeNames": ["gpu-a100-1"]})
        self.assertEqual(f["NodeNames"], ["gpu-a100-1"])
        self.assertEqual(self.bind("gpu-p", self.gpu["metadata"]["uid"], "gpu-a100-1"), "")
        on_server = self.srv.get("pods", "ml", "gpu-p")
        self.assertEqual(on_server["spec"]["nodeName"], "gpu-a100-1")
        self.assertEqual(on_server["metadata"]["annotations"]["troupe.io/gpu-ids"], "0,1")
        self.assertEqual(len(self.srv.bindings), 2)
        # Once the watch shows the CPU pod bound, a retry (a lost reply) is
        # done already and posts nothing.
        wait_until(lambda: any(p["uid"] == self.cpu["metadata"]["uid"] and p["node"] == "cpu-0"
                               for p in self.t.cache()["pods"]), 20, "the CPU pod bound")
        self.assertEqual(self.bind("cpu-p", self.cpu["metadata"]["uid"], "cpu-0"), "")
        self.assertEqual(len(self.srv.bindings), 2)
        assert_no_device_twice(self, self.t)


if __name__ == "__main__":
    unittest.main(verbosity=2)
