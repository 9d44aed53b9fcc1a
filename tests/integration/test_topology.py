"""Topology-aware placement end to end: nodes whose interconnect troupe learns
from the troupe.io/gpu-topology annotation or a built-in profile, pods with
troupe.io/topology policies, bindings that record the devices and the worst
link, and a restart that reads them back."""
import unittest

from live_common import FakeAPIServer, assert_converges, live, wait_until
from test_live import node, pending_pod

# Four consumer cards: NVLink bridges join 0-2 and 1-3; everything else goes
# through the host bridge. As `nvidia-smi topo -m` prints it (tab-separated).
BRIDGED = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tPHB\tNV4\tPHB\t0-15\t0\n"
    "GPU1\tPHB\t X \tPHB\tNV4\t0-15\t0\n"
    "GPU2\tNV4\tPHB\t X \tPHB\t0-15\t0\n"
    "GPU3\tPHB\tNV4\tPHB\t X \t0-15\t0\n"
    "\n"
    "Legend:\n\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n")


def annotated(name, text, gpus=4):
    n = node(name, gpus)
    n["metadata"]["annotations"] = {"troupe.io/gpu-topology": text}
    return n


def labelled(name, product, gpus=8):
    n = node(name, gpus)
    n["metadata"]["labels"] = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus)}
    return n


def with_policy(pod, policy):
    pod["metadata"]["annotations"] = {"troupe.io/topology": policy}
    return pod


class TopologyTest(unittest.TestCase):
    def setUp(self):
        self.srv = FakeAPIServer()
        self.srv.start()
        self.addCleanup(self.srv.stop)
        bridged = annotated("bridged", BRIDGED)
        bridged["metadata"]["annotations"]["troupe.io/gpu-uuids"] = "GPU-aa,GPU-bb,GPU-cc,GPU-dd"
        self.srv.create("nodes", bridged)
        self.srv.create("nodes", labelled("dgx1", "Tesla-V100-SXM2-16GB"))
        self.srv.create("nodes", node("plain", 4))
        self.srv.create("nodes", annotated("garbled", "this is not nvidia-smi output"))
        self.t = live(self.srv)
        self.t.start()
        self.addCleanup(self.t.stop)
        wait_until(lambda: self.t.request("GET", "/readyz")[0] == 200, 20, "ready")

    def seen(self, t, pod):
        """Wait until troupe's watch shows <pod>: kube-scheduler binds only pods
        its own watch has shown it, and troupe refuses to bind any other."""
        uid = pod["metadata"]["uid"]
        wait_until(lambda: uid in {p["uid"] for p in t.cache()["pods"] if p["fromAPI"]},
                   20, "the pod in troupe's cache")

    def filter(self, pod, nodes):
        self.seen(self.t, pod)
        s, _, f = self.t.request("POST", "/filter", {"Pod": pod, "Nodes": None, "NodeNames": nodes})
        self.assertEqual(s, 200)
        return f

    def bind(self, pod, node_name):
        md = pod["metadata"]
        s, _, b = self.t.request("POST", "/bind", {"PodName": md["name"], "PodNamespace": "ml",
                                                    "PodUID": md["uid"], "Node": node_name})
        self.assertEqual(b["Error"], "")
        return self.srv.get("pods", "ml", md["name"])["metadata"]["annotations"]

    def test_required_pair_gets_a_bridge_and_records_it(self):
        pod = self.srv.create("pods", with_policy(pending_pod("pair", 2), "required"))
        f = self.filter(pod, ["bridged", "plain", "garbled"])
        self.assertEqual(f["NodeNames"], ["bridged"])
        self.assertIn("topology is unknown", f["FailedAndUnresolvableNodes"]["plain"])
        self.assertIn("topology is unknown", f["FailedAndUnresolvableNodes"]["garbled"])
        ann = self.bind(pod, "bridged")
        self.assertEqual((ann["troupe.io/gpu-ids"], ann["troupe.io/gpu-link"]), ("0,2", "NV4"))
        self.assertEqual(ann["troupe.io/gpu-uuids"], "GPU-aa,GPU-cc")
        # The other bridge is still free for the next pair; after that, none.
        pod2 = self.srv.create("pods", with_policy(pending_pod("pair2", 2), "required"))
        self.assertEqual(self.filter(pod2, ["bridged"])["NodeNames"], ["bridged"])
        self.assertEqual(self.bind(pod2, "bridged")["troupe.io/gpu-ids"], "1,3")
        assert_converges(self, self.t, self.srv)
        self.assertIn("is not nvidia-smi topo -m output", self.t.log())
        # ... and a metric says so.
        s, h, text = self.t.ops_request("GET", "/metrics")
        self.assertIn("troupe_topology_parse_errors_total 1\n", text)
        self.assertIn("troupe_topology_classes 2\n", text)    # bridged box, DGX-1 profile

    def test_required_set_that_no_node_can_offer_is_unresolvable(self):
        pod = self.srv.create("pods", with_policy(pending_pod("quad", 4), "required"))
        f = self.filter(pod, ["bridged"])
        self.assertEqual(f["NodeNames"], [])
        self.assertIn("all NVLinked", f["FailedAndUnresolvableNodes"]["bridged"])
        relaxed = self.srv.create("pods", with_policy(pending_pod("quad-pix", 4), "required:PHB"))
        self.assertEqual(self.filter(relaxed, ["bridged"])["NodeNames"], ["bridged"])

    def test_required_pair_waits_while_the_bridges_are_taken(self):
        for name in ("a", "b"):
            pod = self.srv.create("pods", with_policy(pending_pod(name, 2), "required"))
            self.filter(pod, ["bridged"])
            self.bind(pod, "bridged")
        # All four GPUs are taken now: count is the reason, not topology.
        pod = self.srv.create("pods", with_policy(pending_pod("c", 1), "required"))
        f = self.filter(pod, ["bridged"])
        self.assertIn("0 of 4", f["FailedNodes"]["bridged"])

    def test_preferred_quad_on_dgx1_stays_inside_one_nvlink_quad(self):
        pod = self.srv.create("pods", pending_pod("quad", 4))
        self.assertEqual(self.filter(pod, ["dgx1"])["NodeNames"], ["dgx1"])
        ann = self.bind(pod, "dgx1")
        ids = [int(i) for i in ann["troupe.io/gpu-ids"].split(",")]
        self.assertTrue(ids == [0, 1, 2, 3] or ids == [4, 5, 6, 7], ids)
        self.assertTrue(ann["troupe.io/gpu-link"].startswith("NV"), ann)

    def test_prioritize_prefers_the_node_with_an_nvlink_pair(self):
        pod = self.srv.create("pods", pending_pod("pref", 2))
        s, _, scores = self.t.request("POST", "/prioritize",
                                      {"Pod": pod, "Nodes": None, "NodeNames": ["bridged", "plain"]})
        by = {h["Host"]: h["Score"] for h in scores}
        self.assertGreater(by["bridged"], by["plain"])

    def test_invalid_policy_is_unresolvable_with_the_reason(self):
        pod = self.srv.create("pods", with_policy(pending_pod("typo", 2), "required:FAST"))
        f = self.filter(pod, ["bridged", "plain"])
        self.assertEqual(f["Error"], "")
        self.assertEqual(sorted(f["FailedAndUnresolvableNodes"]), ["bridged", "plain"])
        self.assertIn("troupe.io/topology", f["FailedAndUnresolvableNodes"]["bridged"])

    def test_restart_reads_devices_and_links_back(self):
        pod = self.srv.create("pods", with_policy(pending_pod("keep", 2), "required"))
        self.filter(pod, ["bridged"])
        self.bind(pod, "bridged")
        assert_converges(self, self.t, self.srv)
        self.t.stop()
        t2 = live(self.srv)
        t2.start()
        self.addCleanup(t2.stop)
        wait_until(lambda: t2.request("GET", "/readyz")[0] == 200, 20, "ready")
        assert_converges(self, t2, self.srv)
        held = {p["name"]: p["devices"] for p in t2.cache()["pods"] if p["devices"]}
        self.assertEqual(held["keep"], "0,2")
        # The next required pair gets the other bridge, never a held device.
        nxt = self.srv.create("pods", with_policy(pending_pod("next", 2), "required"))
        self.seen(t2, nxt)
        s, _, f = t2.request("POST", "/filter", {"Pod": nxt, "Nodes": None, "NodeNames": ["bridged"]})
        md = nxt["metadata"]
        s, _, b = t2.request("POST", "/bind", {"PodName": "next", "PodNamespace": "ml",
                                                "PodUID": md["uid"], "Node": "bridged"})
        self.assertEqual(b["Error"], "")
        ann = self.srv.get("pods", "ml", "next")["metadata"]["annotations"]
        self.assertEqual(ann["troupe.io/gpu-ids"], "1,3")


if __name__ == "__main__":
    unittest.main(verbosity=2)
