"""troupe driven by a scheduler-side client, as kube-scheduler drives it.

Every test starts the real daemon on the fixture cluster and checks behaviour
from both sides: what the client saw (filter answers, binds) and what troupe
reports in /debug/state. The invariant throughout: no node ever holds more GPUs
than it has allocatable.
"""
import json
import random
import threading
import unittest

from schedclient import ExtenderConfig, Scheduler, gpu_pod, load_cluster, parse_count
from troupe_proc import Troupe, fixture_cluster


def allocatable(node):
    return parse_count(node["status"]["allocatable"].get("nvidia.com/gpu"))


def node_usage(state):
    return {n["name"]: n for n in state["nodes"]}


class SchedulingTest(unittest.TestCase):
    def setUp(self):
        self.cluster = load_cluster(fixture_cluster())
        self.nodes = {i["metadata"]["name"]: i for i in self.cluster["items"] if i["kind"] == "Node"}

    def assert_never_overcommitted(self, troupe, sched):
        state = troupe.state()
        usage = node_usage(state)
        for name, node in self.nodes.items():
            held = sum(sched.on_node.get(name, {}).values())
            alloc = allocatable(node)
            self.assertLessEqual(held, alloc, f"client sees {name} over-committed")
            u = usage[name]
            self.assertLessEqual(u["gpuAllocatable"] - u["gpuFree"], alloc, name)
            # troupe and the scheduler agree on what each node holds.
            self.assertEqual(alloc - u["gpuFree"] if alloc else 0, min(held, alloc), name)
        return state

    def test_sequence_of_pods_fills_the_cluster_without_overcommit(self):
        rng = random.Random(7)
        with Troupe() as troupe:
            sched = Scheduler(troupe.host, troupe.port, self.cluster, seed=3, time_scale=0.001)
            for i in range(60):
                sched.add_pod(gpu_pod("ml", f"job-{i}", f"uid-job-{i}", rng.choice([1, 1, 2, 4, 8])))
            sched.run(deadline_s=120)
            sched.close()
            bound = sched.bound()
            self.assertGreater(len(bound), 5)
            state = self.assert_never_overcommitted(troupe, sched)
            # Nodes troupe refuses (cordoned, not Ready, no GPUs) never get a pod.
            for uid, node in bound.items():
                self.assertNotIn(node, ("gpu-l4-0", "gpu-t4-0", "cpu-0"), uid)
            # Pods left over were refused with reasons a person can act on.
            left = [o for o in sched.outcomes if o.result == "unschedulable" and o.reasons]
            self.assertTrue(left, "the cluster should fill up")
            for o in left:
                for reason in o.reasons.values():
                    self.assertTrue(reason.startswith("troupe: "), reason)
            self.assertEqual(state["stats"]["podsHoldingGPUs"], 3 + len(bound))

    def test_bin_packing_prefers_the_fuller_node(self):
        with Troupe() as troupe:
            sched = Scheduler(troupe.host, troupe.port, self.cluster, seed=1)
            sched.add_pod(gpu_pod("ml", "small", "uid-small", 4))
            sched.run(deadline_s=30)
            sched.close()
            # gpu-a100-0 already holds 4 of 8: a 4-GPU pod fills it exactly.
            self.assertEqual(sched.bound(), {"uid-small": "gpu-a100-0"})

    def test_full_nodes_mode_places_pods_like_names_mode(self):
        with Troupe() as troupe:
            ext = ExtenderConfig(node_cache_capable=False)
            sched = Scheduler(troupe.host, troupe.port, self.cluster, ext=ext, seed=5,
                              time_scale=0.001)
            for i in range(20):
                sched.add_pod(gpu_pod("ml", f"full-{i}", f"uid-full-{i}", 2))
            sched.run(deadline_s=60)
            sched.close()
            self.assertGreater(len(sched.bound()), 5)
            self.assert_never_overcommitted(troupe, sched)

    def test_invalid_gpu_request_is_unresolvable_with_the_reason(self):
        with Troupe() as troupe:
            sched = Scheduler(troupe.host, troupe.port, self.cluster, time_scale=0.001)
            pod = gpu_pod("ml", "bad", "uid-bad", 0)
            pod["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "2"}}
            sched.add_pod(pod)
            out = sched.schedule_one()
            sched.close()
            # The pod's own fault: unschedulable on every node (not a
            # scheduler error retried with backoff), the reason on each.
            self.assertEqual(out.result, "unschedulable")
            self.assertTrue(out.reasons)
            for why in out.reasons.values():
                self.assertIn("without a limit", why)
                self.assertIn("ml/bad", why)
            self.assertEqual(troupe.state()["stats"]["podsHoldingGPUs"], 3)

    def test_concurrent_binds_on_stale_filters_never_overcommit(self):
        """Many binders race on the same nodes with filter answers that are
        already stale; troupe must refuse every bind that no longer fits."""
        with Troupe() as troupe:
            names = [n for n in self.nodes if n.startswith("gpu-")]
            results, lock = [], threading.Lock()

            barrier = threading.Barrier(8)

            def worker(w):
                # Filter a batch first, bind it only after every worker has
                # filtered: every answer is stale by then, and together they
                # ask for far more than is free.
                rng = random.Random(w)
                conn = troupe.connect()
                planned = []
                for i in range(25):
                    uid = f"uid-race-{w}-{i}"
                    gpus = rng.choice([1, 2, 4])
                    pod = gpu_pod("race", f"race-{w}-{i}", uid, gpus)
                    conn.request("POST", "/filter", json.dumps(
                        {"Pod": pod, "Nodes": None, "NodeNames": names}))
                    fit = json.loads(conn.getresponse().read())["NodeNames"]
                    if fit:
                        planned.append((pod, uid, gpus, rng.choice(fit)))
                barrier.wait()
                for pod, uid, gpus, node in planned:
                    conn.request("POST", "/bind", json.dumps(
                        {"PodName": pod["metadata"]["name"], "PodNamespace": "race",
                         "PodUID": uid, "Node": node}))
                    err = json.loads(conn.getresponse().read())["Error"]
                    with lock:
                        results.append((node, gpus, err))
                conn.close()

            threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            state = node_usage(troupe.state())
            granted = {}
            for node, gpus, err in results:
                if not err:
                    granted[node] = granted.get(node, 0) + gpus
            self.assertTrue(any(err for _, _, err in results), "the race should refuse some binds")
            for node, n in granted.items():
                u = state[node]
                preheld = {"gpu-a100-0": 4, "gpu-h100-0": 2, "gpu-v100-0": 1}.get(node, 0)
                self.assertLessEqual(n + preheld, u["gpuAllocatable"], node)
                self.assertEqual(u["gpuAllocatable"] - u["gpuFree"], n + preheld, node)

    def test_bind_is_idempotent_and_refuses_a_second_node(self):
        with Troupe() as troupe:
            pod = gpu_pod("ml", "once", "uid-once", 2)
            s, _, body = troupe.request("POST", "/filter",
                                        {"Pod": pod, "Nodes": None, "NodeNames": ["gpu-a100-1"]})
            self.assertEqual((s, body["NodeNames"]), (200, ["gpu-a100-1"]))
            bind = {"PodName": "once", "PodNamespace": "ml", "PodUID": "uid-once",
                    "Node": "gpu-a100-1"}
            for _ in range(2):
                s, _, body = troupe.request("POST", "/bind", bind)
                self.assertEqual((s, body["Error"]), (200, ""))
            s, _, body = troupe.request("POST", "/bind", dict(bind, Node="gpu-h100-1"))
            self.assertIn("already bound to node gpu-a100-1", body["Error"])
            free = node_usage(troupe.state())
            self.assertEqual(free["gpu-a100-1"]["gpuFree"], 6)
            self.assertEqual(free["gpu-h100-1"]["gpuFree"], 8)

    def test_unknown_pod_bind_is_refused(self):
        with Troupe() as troupe:
            s, _, body = troupe.request("POST", "/bind", {
                "PodName": "ghost", "PodNamespace": "ml", "PodUID": "uid-ghost", "Node": "gpu-a100-1"})
            self.assertEqual(s, 200)
            self.assertIn("unknown to troupe", body["Error"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
