"""Fair sharing between queues and protection from starvation, end to end:
the real troupe against the test API server, driven by schedclient.Scheduler.

- Two queues with equal demand and weights 1:1, then 2:1: at steady state the
  gangs running per queue match the weights within one gang.
- A 32-GPU gang against a steady stream of 1-GPU pods is admitted within a
  bounded time, because the head of the fair order gets capacity held for it.
"""
import itertools
import os
import random
import threading
import time
import unittest

from live_common import FAST_CONFIG, FakeAPIServer, assert_no_device_twice, live, wait_until
from schedclient import ExtenderConfig, Scheduler, gang_pod, gpu_pod, pod_group


def node(name, gpus=8):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                       "allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def config(weights, starvation=30):
    q = "".join(f"  {name}: {w}\n" for name, w in weights.items())
    return FAST_CONFIG + f"""
gang:
  default_timeout_seconds: 20
  scheduler_http_timeout_seconds: 30
  margin_seconds: 2
  starvation_holds: true
  starvation_seconds: {starvation}
queues:
{q}"""


class Cluster:
    """The API server, troupe and a scheduler-side client over n 8-GPU nodes."""

    def __init__(self, test, nodes, troupe_config):
        self.srv = FakeAPIServer()
        self.srv.start()
        test.addCleanup(self.srv.stop)
        names = [f"n{i:02d}" for i in range(nodes)]
        for n in names:
            self.srv.create("nodes", node(n))
        self.t = live(self.srv, config=troupe_config)
        self.t.start()
        test.addCleanup(self.t.stop)
        wait_until(lambda: self.t.request("GET", "/readyz")[0] == 200, 20, "ready")
        cluster = {"items": [node(n) for n in names]}
        self.sched = Scheduler(self.t.host, self.t.port, cluster, seed=1, time_scale=0.05,
                               percentage_of_nodes_to_score=100,
                               ext=ExtenderConfig(http_timeout=30.0))
        test.addCleanup(self.sched.close)
        self.stop = threading.Event()
        self.loop = threading.Thread(target=self._run)
        self.loop.start()
        test.addCleanup(self._join)

    def _run(self):
        while not self.stop.is_set():
            if self.sched.schedule_one() is None:
                time.sleep(0.01)

    def _join(self):
        self.stop.set()
        self.loop.join(timeout=30)

    def submit(self, pod):
        pod["metadata"].pop("uid", None)        # the API server assigns it
        created = self.srv.create("pods", pod)
        self.sched.add_pod(created)
        return created

    def finish(self, pod):
        """A pod completed: gone from the server and the scheduler's cache."""
        md = pod["metadata"]
        self.srv.delete("pods", md["namespace"], md["name"])
        self.sched.delete_pod(md["uid"])

    def bound(self, pod):
        p = self.srv.get("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        return bool(p and p["spec"].get("nodeName"))


class FairnessTest(unittest.TestCase):
    def run_queues(self, weights, expect_a):
        """Queues a and b each keep three 2 x 8-GPU gangs waiting; the cluster
        holds three gangs. Each gang runs 1.5 s once bound, then finishes and
        its queue submits another. Returns the mean share of running gangs that
        belong to queue a over the second half of the run."""
        c = Cluster(self, 6, config(weights))
        counter = itertools.count()
        running = {}            # group -> (queue, members, bound_at)
        pending = {"a": [], "b": []}

        def submit_gang(queue):
            g = f"{queue}-{next(counter)}"
            c.srv.create("podgroups", pod_group(queue, g, 2, timeout_s=20))
            # troupe must know the PodGroup (its quorum) before the members come.
            wait_until(lambda: any(x["name"] == g for x in c.t.cache()["podGroups"]), 10,
                       "the PodGroup in troupe's cache")
            members = [c.submit(gang_pod(queue, f"{g}-{i}", None, 8, g,
                                         labels={"troupe.io/queue": queue})) for i in range(2)]
            pending[queue].append((g, members))

        for q in ("a", "b"):
            for _ in range(3):
                submit_gang(q)
        samples = []
        end = time.monotonic() + 50
        while time.monotonic() < end:
            for q in ("a", "b"):
                for g, members in list(pending[q]):
                    if all(c.bound(m) for m in members):
                        pending[q].remove((g, members))
                        running[g] = (q, members, time.monotonic())
            for g, (q, members, at) in list(running.items()):
                if time.monotonic() - at > 3.0:
                    for m in members:
                        c.finish(m)
                    del running[g]
                    submit_gang(q)
            if running:
                samples.append(sum(1 for q, _, _ in running.values() if q == "a") / len(running))
            time.sleep(0.05)
        assert_no_device_twice(self, c.t)
        tail = samples[len(samples) // 2:]
        self.assertTrue(tail, "no gang ever ran")
        share = sum(tail) / len(tail)
        print(f"queue a ran {share:.3f} of the running gangs (target {expect_a:.3f})")
        if os.environ.get("TROUPE_FAIRNESS_DEBUG"):
            print("\n".join(l for l in c.t.log().splitlines() if "[gang]" in l or "behind" in l))
        # Within one gang of the target: three gangs run at a time.
        self.assertLess(abs(share - expect_a), 1 / 3,
                        f"queue a ran {share:.2f} of the gangs, expected {expect_a:.2f}")
        return share

    def test_equal_weights_share_equally(self):
        share = self.run_queues({"a": 1, "b": 1}, 0.5)
        self.assertLess(abs(share - 0.5), 0.1)

    def test_weights_two_to_one_give_two_thirds(self):
        share = self.run_queues({"a": 2, "b": 1}, 2 / 3)
        # Measured 0.666-0.667 here since a plan's reservations count towards
        # its queue's share (before: 0.56-0.61, as a queue looked poorer than
        # it was while its plan was reserved but not yet bound).
        # 0.05: the old 0.61 would fail it.
        self.assertLess(abs(share - 2 / 3), 0.05)

    def test_big_gang_is_not_starved_by_small_pods(self):
        """Four 8-GPU nodes kept busy by 1-GPU pods that come and go; a 4 x 8
        gang needs four whole nodes. Capacity held for the starving head lets
        it in within a bounded time."""
        c = Cluster(self, 4, config({"big": 1, "small": 1}, starvation=2))
        stop = threading.Event()
        small = []

        rng = random.Random(5)

        def stream():
            # Keep 28 of the 32 GPUs asked for by small pods, each living
            # 1-3 s, so the nodes never drain on their own.
            i = 0
            while not stop.is_set():
                while len(small) < 28:
                    small.append((c.submit(gpu_pod("small", f"s-{i}", None, 1,
                                                   {"troupe.io/queue": "small"})),
                                  time.monotonic() + rng.uniform(1.0, 3.0)))
                    i += 1
                for p, until in list(small):
                    if time.monotonic() > until and c.bound(p):
                        c.finish(p)
                        small.remove((p, until))
                time.sleep(0.05)

        feeder = threading.Thread(target=stream)
        feeder.start()
        self.addCleanup(feeder.join)
        self.addCleanup(stop.set)
        time.sleep(2)
        c.srv.create("podgroups", pod_group("big", "train", 4, timeout_s=20))
        wait_until(lambda: any(x["name"] == "train" for x in c.t.cache()["podGroups"]), 10,
                   "the PodGroup in troupe's cache")
        gang = [c.submit(gang_pod("big", f"train-{i}", None, 8, "train",
                                  labels={"troupe.io/queue": "big"})) for i in range(4)]
        start = time.monotonic()
        try:
            wait_until(lambda: all(c.bound(m) for m in gang), 45, "the big gang bound")
        except AssertionError:
            stop.set()
            held = {n: [(u, c.sched.pods.get(u, {}).get("metadata", {}).get("name"),
                         [p["spec"].get("nodeName") for p in c.srv.list("pods")
                          if p["metadata"]["uid"] == u][:1],
                         [str(until - time.monotonic())[:5] for p, until in small
                          if p["metadata"]["uid"] == u][:1])
                        for u in v] for n, v in c.sched.on_node.items()}
            gang_out = [(o.pod, o.result, o.error, list(o.reasons.values())[:1])
                        for o in c.sched.outcomes
                        if o.pod in {m["metadata"]["uid"] for m in gang}][-8:]
            self.fail(f"the big gang was starved; scheduler sees {held}; gang outcomes "
                      f"{gang_out}; troupe's log ends:\n" +
                      "\n".join(l for l in c.t.log().splitlines()
                                if "gang" in l or "train" in l)[-6000:])
        waited = time.monotonic() - start
        stop.set()
        assert_no_device_twice(self, c.t)
        nodes = {c.srv.get("pods", "big", m["metadata"]["name"])["spec"]["nodeName"] for m in gang}
        self.assertEqual(len(nodes), 4)
        self.assertIn("gang big/train has waited", c.t.log())
        print(f"big gang admitted after {waited:.1f} s")


if __name__ == "__main__":
    unittest.main(verbosity=2)
