"""troupe_bind_top_choice_total through the real binary and a watch: a GPU pod
bound where troupe's last prioritize answered 10 counts "top"; one bound to a
node troupe ranked lower counts "other" and logs troupe's first choice and the
bound node's rank; one bound with no prioritize counts "unscored". This is the
metric that says whether kube-scheduler's extender weight lets troupe's
ranking decide (docs/configuration.md)."""
import unittest

from live_common import LiveCase, wait_until
from test_live import bound_pod, node, pending_pod

OUTCOMES = ("top", "other", "unscored")


class TopChoiceTest(LiveCase):
    def setUp(self):
        super().setUp()
        # Packing ranks "half" (4 of 8 used) above the empty nodes.
        for name in ("half", "empty-a", "empty-b"):
            self.srv.create("nodes", node(name, 8))
        self.srv.create("pods", bound_pod("resident", "half", 4))
        self.t = self.start_live()
        wait_until(lambda: self.t.request("GET", "/readyz")[0] == 200, 20, "ready")

    def counts(self):
        m = self.t.metrics()
        return {o: m['troupe_bind_top_choice_total{outcome="%s"}' % o] for o in OUTCOMES}

    def place(self, name, node_name, prioritize=True):
        pod = self.srv.create("pods", pending_pod(name, 1))
        self.t.wait_seen(pod)
        names = ["half", "empty-a", "empty-b"]
        s, _, f = self.t.request("POST", "/filter", {"Pod": pod, "Nodes": None, "NodeNames": names})
        self.assertEqual(s, 200)
        scores = {}
        if prioritize:
            s, _, p = self.t.request("POST", "/prioritize",
                                     {"Pod": pod, "Nodes": None, "NodeNames": f["NodeNames"]})
            self.assertEqual(s, 200)
            scores = {hp["Host"]: hp["Score"] for hp in p}
        md = pod["metadata"]
        s, _, b = self.t.request("POST", "/bind", {"PodName": md["name"], "PodNamespace": "ml",
                                                    "PodUID": md["uid"], "Node": node_name})
        self.assertEqual((s, b["Error"]), (200, ""))
        return scores

    def test_outcomes(self):
        self.assertEqual(self.counts(), {o: 0 for o in OUTCOMES})
        scores = self.place("first", "half")
        self.assertEqual(scores["half"], 10, scores)       # troupe's best, alone
        self.assertLess(scores["empty-a"], 10, scores)
        self.assertEqual(self.counts(), {"top": 1, "other": 0, "unscored": 0})
        scores = self.place("second", "empty-a")            # what LeastAllocated would do
        self.assertEqual(self.counts(), {"top": 1, "other": 1, "unscored": 0})
        wait_until(lambda: "not troupe's first choice" in self.t.log(), 10, "the log line")
        line = [x for x in self.t.log().splitlines() if "not troupe's first choice" in x][0]
        self.assertIn("ml/second -> node empty-a", line)
        self.assertIn("ranked node half first", line)
        self.assertIn("at rank %d (answer %d of 10)" % (11 - scores["empty-a"], scores["empty-a"]),
                      line)
        self.place("third", "empty-b", prioritize=False)     # no prioritize seen
        self.assertEqual(self.counts(), {"top": 1, "other": 1, "unscored": 1})


if __name__ == "__main__":
    unittest.main()
