"""Stress: thousands of nodes, tens of thousands of pod events from the API
server, and concurrent filters and binds through troupe, all at once. At the
end no GPU may be promised twice and troupe's cache must equal the server.
scripts/test also runs this against the ThreadSanitizer build."""
import os
import random
import threading
import unittest

from live_common import (FakeAPIServer, assert_converges, assert_no_device_twice, live,
                         wait_until)
from test_live import bound_pod, node, pending_pod

NODES = int(os.environ.get("TROUPE_STRESS_NODES", "2000"))
EVENTS = int(os.environ.get("TROUPE_STRESS_EVENTS", "20000"))
BINDERS = 4


class StressTest(unittest.TestCase):
    def test_events_filters_and_binds_at_once(self):
        srv = FakeAPIServer()
        srv.start()
        self.addCleanup(srv.stop)
        # Nodes of the first half are used by "other schedulers" (pods bound
        # directly on the server); troupe binds into the second half.
        other = [f"other-{i:05d}" for i in range(NODES // 2)]
        ours = [f"gpu-{i:05d}" for i in range(NODES - NODES // 2)]
        for name in other + ours:
            srv.create("nodes", node(name))
        t = live(srv)
        t.start()
        self.addCleanup(t.stop)
        wait_until(lambda: t.request("GET", "/readyz")[0] == 200, 60, "ready")

        stop = threading.Event()
        errors = []

        def churn():
            """Pod events on the other nodes: create, update, delete."""
            rng = random.Random(1)
            live_pods = []
            try:
                for i in range(EVENTS):
                    r = rng.random()
                    if r < 0.5 or not live_pods:
                        name = f"churn-{i}"
                        srv.create("pods", bound_pod(name, rng.choice(other), rng.choice([1, 2])))
                        live_pods.append(name)
                    elif r < 0.8:
                        name = rng.choice(live_pods)
                        p = srv.get("pods", "ml", name)
                        p.setdefault("metadata", {}).setdefault("labels", {})["tick"] = str(i)
                        srv.update("pods", p)
                    else:
                        name = live_pods.pop(rng.randrange(len(live_pods)))
                        srv.delete("pods", "ml", name)
            except Exception as e:  # surfaced by the assertion below
                errors.append(e)
            finally:
                stop.set()

        results = []
        lock = threading.Lock()

        def binder(w):
            rng = random.Random(100 + w)
            conn = None
            i = 0
            while not stop.is_set() or i < 20:
                i += 1
                pod = srv.create("pods", pending_pod(f"bind-{w}-{i}", rng.choice([1, 2, 4, 8])))
                sample = rng.sample(ours, min(100, len(ours)))
                s, _, f = t.request("POST", "/filter",
                                    {"Pod": pod, "Nodes": None, "NodeNames": sample})
                if f.get("Error") or not f["NodeNames"]:
                    continue
                target = rng.choice(f["NodeNames"])
                md = pod["metadata"]
                s, _, b = t.request("POST", "/bind", {"PodName": md["name"], "PodNamespace": "ml",
                                                       "PodUID": md["uid"], "Node": target})
                with lock:
                    results.append((md["name"], target, b["Error"]))
            del conn

        threads = [threading.Thread(target=churn)] + [
            threading.Thread(target=binder, args=(w,)) for w in range(BINDERS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=600)
        self.assertFalse(errors, errors)
        self.assertTrue(any(not e for _, _, e in results), "some binds must succeed")
        assert_converges(self, t, srv, timeout=120)
        assert_no_device_twice(self, t)
        # Server side: devices troupe recorded never overlap on a node, and no
        # node of ours holds more than it has.
        held = {}
        for p in srv.list("pods"):
            n = p["spec"].get("nodeName")
            ids = p["metadata"].get("annotations", {}).get("troupe.io/gpu-ids")
            if n in ours and ids:
                for d in ids.split(","):
                    self.assertNotIn((n, d), held, f"device {d} of {n} bound twice")
                    held[(n, d)] = p["metadata"]["name"]
        for name in ours:
            self.assertLessEqual(sum(1 for (n, _) in held if n == name), 8)
        ev = t.state()["informer"]["events"]
        self.assertGreaterEqual(ev, EVENTS)


if __name__ == "__main__":
    unittest.main(verbosity=2)
