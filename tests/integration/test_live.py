"""troupe against the test API server (tests/apiserver), as against a real
cluster: list and watch, faults on the way, bindings. After every fault the
cache must equal the server's objects again."""
import json
import os
import unittest

from live_common import (FAST_CONFIG, FakeAPIServer, assert_converges, assert_no_device_twice,
                         kubeconfig_for, live, load_fixture_cluster, tmpdir, wait_until)
from troupe_proc import Troupe
from schedclient import gpu_pod


def node(name, gpus=8, ready=True):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                       "allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def bound_pod(name, node_name, gpus, ns="ml"):
    p = gpu_pod(ns, name, None, gpus)
    del p["metadata"]["uid"]
    p["spec"]["nodeName"] = node_name
    p["status"]["phase"] = "Running"
    return p


def pending_pod(name, gpus, ns="ml"):
    p = gpu_pod(ns, name, None, gpus)
    del p["metadata"]["uid"]
    return p


class LiveTest(unittest.TestCase):
    def setUp(self):
        self.srv = FakeAPIServer()
        self.srv.start()
        self.addCleanup(self.srv.stop)

    def start(self, source=None, **kw):
        t = live(self.srv, **kw) if source is None else Troupe(source=source,
                                                               config_text=FAST_CONFIG, **kw)
        t.start()
        self.addCleanup(t.stop)
        return t

    def ready(self, t):
        wait_until(lambda: t.request("GET", "/readyz")[0] == 200, 20, "ready")

    def seen(self, t, *pods):
        """Wait until troupe's watch shows <pods>: kube-scheduler binds only pods
        its own watch has shown it, and troupe refuses to bind any other."""
        uids = {p["metadata"]["uid"] for p in pods}
        wait_until(lambda: uids <= {p["uid"] for p in t.cache()["pods"] if p["fromAPI"]},
                   20, "the pods in troupe's cache")

    def filter_bind(self, t, pod, nodes, seen=True):
        """kube-scheduler's view: filter, then bind to the first fitting node."""
        if seen:
            self.seen(t, pod)
        s, _, f = t.request("POST", "/filter", {"Pod": pod, "Nodes": None, "NodeNames": nodes})
        self.assertEqual(s, 200)
        if f["Error"] or not f["NodeNames"]:
            return None, f
        md = pod["metadata"]
        s, _, b = t.request("POST", "/bind", {"PodName": md["name"], "PodNamespace": md["namespace"],
                                               "PodUID": md["uid"], "Node": f["NodeNames"][0]})
        self.assertEqual(s, 200)
        return f["NodeNames"][0], b

    # ---- list, watch, convergence -----------------------------------------------

    def test_initial_list_and_watch_events_converge(self):
        load_fixture_cluster(self.srv)
        t = self.start()
        self.ready(t)
        assert_converges(self, t, self.srv)
        self.srv.create("nodes", node("late-node"))
        self.srv.create("pods", bound_pod("late-pod", "late-node", 3))
        n = self.srv.get("nodes", None, "gpu-a100-1")
        n["spec"] = {"unschedulable": True}
        self.srv.update("nodes", n)
        self.srv.delete("pods", "ml", "resnet-0")
        self.srv.create("podgroups", {"apiVersion": "scheduling.x-k8s.io/v1alpha1",
                                      "kind": "PodGroup",
                                      "metadata": {"name": "g2", "namespace": "ml"},
                                      "spec": {"minMember": 3}})
        assert_converges(self, t, self.srv)
        free = {n["name"]: n for n in t.state()["nodes"]}
        self.assertEqual(free["late-node"]["gpuFree"], 5)
        self.assertEqual(free["gpu-a100-0"]["gpuFree"], 8, "resnet-0's GPUs are released")
        self.assertTrue(free["gpu-a100-1"]["unschedulable"])

    def test_starts_with_api_server_down_then_syncs(self):
        load_fixture_cluster(self.srv)
        self.srv.refuse_connections(True)
        t = self.start()
        s, _, body = t.request("GET", "/readyz")
        self.assertEqual(s, 503)
        s, _, body = t.request("POST", "/filter", {"Pod": pending_pod("p", 1),
                                                   "Nodes": None, "NodeNames": ["gpu-a100-1"]})
        self.assertIn("still syncing", body["Error"])
        wait_until(lambda: "retrying in" in t.log(), 10, "a backoff")
        self.srv.refuse_connections(False)
        self.ready(t)
        assert_converges(self, t, self.srv)

    def test_stream_cut_mid_event_is_resumed_without_applying_the_fragment(self):
        load_fixture_cluster(self.srv)
        t = self.start()
        self.ready(t)
        for i in range(5):
            # Ready means listed; the watch may open a moment later (slowly in
            # a sanitizer build on a busy machine): cut an open stream only.
            self.assertTrue(self.srv.wait_for_watches("pods", timeout=20),
                            "troupe never opened its pods watch")
            self.srv.cut_watches("pods", mid_event=True)
            self.srv.create("pods", bound_pod(f"cut-{i}", "gpu-h100-1", 1))
        assert_converges(self, t, self.srv)
        st = t.state()["informer"]
        self.assertEqual(st["relists"], 0, "a cut stream resumes the watch; it never relists")
        self.assertGreaterEqual(st["watchRestarts"], 1)

    def check_410_with_missed_deletions(self, mode):
        load_fixture_cluster(self.srv)
        self.srv.watch_410_mode = mode
        t = self.start()
        self.ready(t)
        assert_converges(self, t, self.srv)
        # troupe loses its watches; meanwhile objects go away and history is compacted.
        self.srv.refuse_connections(True)
        self.srv.cut_watches(None, mid_event=False)
        self.srv.delete("pods", "ml", "resnet-0")         # held devices 0-3 on gpu-a100-0
        self.srv.delete("nodes", None, "gpu-v100-0")
        self.srv.delete("podgroups", "ml", "llm")
        self.srv.create("pods", bound_pod("while-away", "gpu-h100-1", 2))
        self.srv.compact()
        self.srv.refuse_connections(False)
        assert_converges(self, t, self.srv)
        st = t.state()
        self.assertGreaterEqual(st["informer"]["relists"], 1)
        nodes = {n["name"]: n for n in st["nodes"]}
        self.assertEqual(nodes["gpu-a100-0"]["gpuFree"], 8)
        self.assertNotIn("gpu-v100-0", nodes)
        self.assertEqual(nodes["gpu-h100-1"]["gpuFree"], 6)

    def test_410_event_on_resume_relists_and_drops_missed_deletions(self):
        self.check_410_with_missed_deletions("event")

    def test_410_status_on_resume_relists_and_drops_missed_deletions(self):
        self.check_410_with_missed_deletions("status")

    def test_slow_server_and_429_are_retried_with_backoff(self):
        load_fixture_cluster(self.srv)
        self.srv.fail_next(3, 429, path_contains="/api/v1/pods", retry_after=1)
        self.srv.delay(0.3, path_contains="/api/v1/nodes")
        t = self.start()
        self.ready(t)
        assert_converges(self, t, self.srv)
        self.assertIn("HTTP 429", t.log())
        self.srv.delay(0, path_contains="/api/v1/nodes")
        self.srv.fail_next(2, 500, path_contains="watch")
        self.srv.cut_watches(None, mid_event=False)
        self.srv.create("pods", bound_pod("after-500", "gpu-a100-1", 1))
        assert_converges(self, t, self.srv)
        self.assertEqual(t.state()["informer"]["relists"], 0)

    def test_podgroup_crd_absent_is_not_an_error(self):
        self.srv.stop()
        self.srv = FakeAPIServer(podgroups_crd=False)
        self.srv.start()
        self.srv.create("nodes", node("n1"))
        t = self.start()
        self.ready(t)
        self.assertEqual(t.log().count("scheduler-plugins PodGroups (scheduling.x-k8s.io/"
                                       "v1alpha1) are not served here"), 1)
        self.assertEqual(t.cache()["nodes"], ["n1"])

    # ---- binding -------------------------------------------------------------

    def test_bind_posts_a_binding_with_the_devices(self):
        load_fixture_cluster(self.srv)
        t = self.start()
        self.ready(t)
        pod = self.srv.create("pods", pending_pod("train", 4))
        node_name, b = self.filter_bind(t, pod, ["gpu-a100-0"])
        self.assertEqual(b["Error"], "")
        on_server = self.srv.get("pods", "ml", "train")
        self.assertEqual(on_server["spec"]["nodeName"], "gpu-a100-0")
        self.assertEqual(on_server["metadata"]["annotations"]["troupe.io/gpu-ids"], "4,5,6,7")
        binding = self.srv.bindings[-1]
        self.assertEqual(binding["metadata"]["uid"], pod["metadata"]["uid"])
        assert_converges(self, t, self.srv)
        # A repeated bind (lost reply) is success and changes nothing.
        md = pod["metadata"]
        s, _, b = t.request("POST", "/bind", {"PodName": "train", "PodNamespace": "ml",
                                               "PodUID": md["uid"], "Node": "gpu-a100-0"})
        self.assertEqual(b["Error"], "")
        assert_no_device_twice(self, t)

    def test_bind_conflict_and_server_error_roll_back(self):
        load_fixture_cluster(self.srv)
        t = self.start()
        self.ready(t)
        # 409: someone else bound the pod to another node after troupe's filter,
        # and troupe's watch has not shown it yet (new watches are held back).
        pod = self.srv.create("pods", pending_pod("raced", 8))
        # The pods bound below while watches are held back exist before: troupe
        # binds only pods its watch has shown.
        pod2 = self.srv.create("pods", pending_pod("unlucky", 8))
        pod5 = self.srv.create("pods", pending_pod("vanished", 8))
        pod6 = self.srv.create("pods", pending_pod("limbo", 2))
        self.seen(t, pod, pod2, pod5, pod6)
        s, _, f = t.request("POST", "/filter", {"Pod": pod, "Nodes": None,
                                                "NodeNames": ["gpu-h100-1"]})
        self.assertEqual(f["NodeNames"], ["gpu-h100-1"])
        self.srv.delay(3, path_contains="watch=")
        self.srv.cut_watches("pods", mid_event=False)
        other = self.srv.get("pods", "ml", "raced")
        other["spec"]["nodeName"] = "gpu-a100-1"
        self.srv.update("pods", other)
        s, _, b = t.request("POST", "/bind", {"PodName": "raced", "PodNamespace": "ml",
                                               "PodUID": pod["metadata"]["uid"],
                                               "Node": "gpu-h100-1"})
        self.assertIn('already assigned to node \\"gpu-a100-1\\"', json.dumps(b["Error"]))
        self.assertEqual(self.srv.get("pods", "ml", "raced")["spec"]["nodeName"], "gpu-a100-1")
        # Watches stay held back while the binds below rely on troupe not yet
        # knowing that raced took gpu-a100-1: its watch reconnects after a
        # backoff, and only a reconnect that comes while the delay is on waits.
        # One 500: the outcome is unknown, so troupe posts the same Binding
        # again (safe: UID precondition) and it goes through.
        self.srv.fail_next(1, 500, path_contains="/binding")
        node_name, b = self.filter_bind(t, pod2, ["gpu-h100-1"], seen=False)
        self.assertEqual(b["Error"], "")
        self.assertEqual(self.srv.get("pods", "ml", "unlucky")["spec"]["nodeName"], "gpu-h100-1")
        # A certain refusal (404: the pod is gone): the devices come back at once.
        self.srv.fail_next(1, 404, path_contains="/binding")
        node_name, b = self.filter_bind(t, pod5, ["gpu-a100-1"], seen=False)
        self.assertIn("HTTP 404", b["Error"])
        wait_until(lambda: {n["name"]: n for n in t.state()["nodes"]}["gpu-a100-1"]["gpuFree"]
                   == 8, 10, "gpu-a100-1 free again")
        # 500 every time: never known, so the devices stay held (not free while
        # the pod might run on them) and a retried bind is told to wait.
        self.srv.fail_next(3, 500, path_contains="/binding")
        node_name, b = self.filter_bind(t, pod6, ["gpu-a100-1"], seen=False)
        self.assertIn("did not confirm", b["Error"])
        held = {p["name"]: p for p in t.cache()["pods"]}["limbo"]
        self.assertEqual((held["state"], held["node"]), ("assumed", "gpu-a100-1"))
        s, _, b = t.request("POST", "/bind", {"PodName": "limbo", "PodNamespace": "ml",
                                               "PodUID": pod6["metadata"]["uid"],
                                               "Node": "gpu-a100-1"})
        self.assertIn("still in progress", b["Error"])
        self.srv.delay(0, path_contains="watch=")
        # When the cluster says what happened (here: the pod is deleted), the
        # devices are settled.
        self.srv.delete("pods", "ml", "limbo")
        # UID precondition: a re-created pod of the same name is never bound.
        pod3 = self.srv.create("pods", pending_pod("reborn", 1))
        s, _, f = t.request("POST", "/filter", {"Pod": pod3, "Nodes": None,
                                                "NodeNames": ["gpu-h100-1"]})
        self.srv.delete("pods", "ml", "reborn")
        self.srv.create("pods", pending_pod("reborn", 1))
        s, _, b = t.request("POST", "/bind", {"PodName": "reborn", "PodNamespace": "ml",
                                               "PodUID": pod3["metadata"]["uid"],
                                               "Node": "gpu-h100-1"})
        self.assertNotEqual(b["Error"], "")
        self.assertIsNone(self.srv.get("pods", "ml", "reborn")["spec"].get("nodeName"))
        # And 409 because the pod is already on this very node is success.
        pod4 = self.srv.create("pods", pending_pod("already", 1))
        s, _, f = t.request("POST", "/filter", {"Pod": pod4, "Nodes": None,
                                                "NodeNames": ["gpu-a100-1"]})
        on = self.srv.get("pods", "ml", "already")
        on["spec"]["nodeName"] = "gpu-a100-1"
        self.srv.update("pods", on)
        wait_until(lambda: any(p["name"] == "already" and p["state"] == "bound"
                               for p in t.cache()["pods"]), 10, "watch shows it bound")
        self.srv.update("pods", dict(on, spec=dict(on["spec"])))
        assert_converges(self, t, self.srv)
        assert_no_device_twice(self, t)

    def test_token_rotation_is_followed(self):
        with tmpdir() as d:
            token = os.path.join(d, "token")
            with open(token, "w") as f:
                f.write("first-token\n")
            self.srv.rotate_token("first-token")
            load_fixture_cluster(self.srv)
            t = self.start(source=["--kubeconfig", kubeconfig_for(self.srv, token, d)])
            self.ready(t)
            with open(token, "w") as f:
                f.write("second-token\n")
            self.srv.rotate_token("second-token")
            self.srv.cut_watches(None, mid_event=False)
            self.srv.create("pods", bound_pod("after-rotation", "gpu-h100-1", 1))
            assert_converges(self, t, self.srv)
            self.assertIn("bearer token reloaded", t.log())
            pod = self.srv.create("pods", pending_pod("bind-after-rotation", 1))
            _, b = self.filter_bind(t, pod, ["gpu-h100-1"])
            self.assertEqual(b["Error"], "")

    def test_restart_rebuilds_state_and_books_nothing_twice(self):
        load_fixture_cluster(self.srv)
        t = self.start()
        self.ready(t)
        placed = []
        for i in range(6):
            pod = self.srv.create("pods", pending_pod(f"r-{i}", 2))
            node_name, b = self.filter_bind(t, pod, ["gpu-h100-1", "gpu-a100-1"])
            self.assertEqual(b["Error"], "", b)
            placed.append(node_name)
        assert_converges(self, t, self.srv)
        before = {p["uid"]: (p["node"], p["devices"]) for p in t.cache()["pods"] if p["devices"]}
        t.stop()
        t2 = self.start()
        self.ready(t2)
        assert_converges(self, t2, self.srv)
        after = {p["uid"]: (p["node"], p["devices"]) for p in t2.cache()["pods"] if p["devices"]}
        self.assertEqual(after, before, "devices known exactly after a restart")
        # Fill what is left: nothing may land on a device already held.
        for i in range(8):
            pod = self.srv.create("pods", pending_pod(f"more-{i}", 1))
            self.filter_bind(t2, pod, ["gpu-h100-1", "gpu-a100-1"])
        assert_converges(self, t2, self.srv)
        assert_no_device_twice(self, t2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
