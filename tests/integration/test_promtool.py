"""`promtool check metrics` over a live troupe's /metrics: Prometheus' own
linter (Debian's package prometheus; scripts/lib/common.sh installs it) must
find nothing to say about what troupe exposes once every verb, a gang, the
ops paths and some wrong requests have been through it, so that every family
that shows up only after use (the gang manager's, the histograms' upper
buckets, the answers by status code) is linted too. promtool checks the
HELP and TYPE lines, counters ending in _total and only counters, base units
(seconds, bytes; no _milliseconds, no _kilobytes), names in snake_case and
histogram buckets. Any line it prints fails the test.

On the way, troupe_http_responses_total must count 404 and 405 answers from
both listeners, and the gang bound here must show in troupe_gangs{state="bound"}.
"""
import json
import re
import shutil
import subprocess
import threading
import unittest

from troupe_proc import Troupe, fixture_cluster

PROMTOOL = shutil.which("promtool")


def promtool_check(text):
    """promtool's verdict on exposition <text>: (exit code, what it printed)."""
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    return r.returncode, (r.stdout + r.stderr).strip()


def sample(text, name):
    """The value of sample <name> (with its labels, as written) in <text>."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} missing from /metrics")


class PromtoolTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not PROMTOOL:
            raise AssertionError("promtool not found: install Debian's package prometheus "
                                 "(./scripts/test installs it, from scripts/lib/common.sh)")

    def setUp(self):
        with open(fixture_cluster()) as f:
            items = json.load(f)["items"]
        self.pods = {o["metadata"]["name"]: o for o in items if o["kind"] == "Pod"}
        self.nodes = [o["metadata"]["name"] for o in items if o["kind"] == "Node"]
        self.t = Troupe()
        self.t.start()
        self.addCleanup(self.t.stop)

    def metrics(self):
        status, headers, body = self.t.ops_request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "text/plain; version=0.0.4")
        return body

    def verb(self, path, body):
        status, _, ans = self.t.request("POST", path, body)
        self.assertEqual(status, 200, (path, ans))
        return ans

    def bind(self, pod, node, out):
        md = pod["metadata"]
        out[md["name"]] = self.verb("/bind", {"PodName": md["name"],
                                              "PodNamespace": md["namespace"],
                                              "PodUID": md["uid"], "Node": node})

    def exercise(self):
        """Every verb, the gang ml/llm (minMember 2) planned and bound, and
        wrong requests on both listeners."""
        for name in ("llm-worker-0", "llm-worker-1"):
            pod = self.pods[name]
            ans = self.verb("/filter", {"Pod": pod, "NodeNames": self.nodes})
            self.assertTrue(ans["NodeNames"], ans)
            self.verb("/prioritize", {"Pod": pod, "NodeNames": ans["NodeNames"]})
        # The plan's slots are the gang's reservations; the first member's
        # bind waits at the gang's barrier for the second.
        slots = sorted(p["node"] for p in self.t.cache()["pods"]
                       if p["namespace"] == "troupe-reservation")
        self.assertEqual(len(slots), 2, self.t.cache()["pods"])
        binds, threads = {}, []
        for name, node in zip(("llm-worker-0", "llm-worker-1"), slots):
            th = threading.Thread(target=self.bind, args=(self.pods[name], node, binds))
            th.start()
            threads.append(th)
        for th in threads:
            th.join(60)
        self.assertEqual({n: a["Error"] for n, a in binds.items()},
                         {"llm-worker-0": "", "llm-worker-1": ""})
        self.verb("/preempt", {"Pod": self.pods["llm-worker-0"], "NodeNameToVictims": None,
                               "NodeNameToMetaVictims": {"gpu-a100-0": {
                                   "Pods": [{"UID": self.pods["resnet-0"]["metadata"]["uid"]}],
                                   "NumPDBViolations": 0}}})
        for path in ("/debug/state", "/debug/cache", "/readyz", "/healthz", "/version"):
            self.assertEqual(self.t.ops_request("GET", path)[0], 200, path)
        # 404 and 405 on each listener.
        self.assertEqual(self.t.request("GET", "/no-such-endpoint")[0], 404)
        self.assertEqual(self.t.request("GET", "/filter")[0], 405)
        self.assertEqual(self.t.ops_request("GET", "/no-such-page")[0], 404)
        self.assertEqual(self.t.ops_request("POST", "/metrics", "")[0], 405)
        # And a 400.
        self.assertEqual(self.t.request("POST", "/filter", "{")[0], 400)

    def test_promtool_finds_nothing_in_metrics(self):
        before = self.metrics()
        code, out = promtool_check(before)
        self.assertEqual((code, out), (0, ""), "promtool on a fresh troupe")
        self.exercise()
        after = self.metrics()
        code, out = promtool_check(after)
        self.assertEqual((code, out), (0, ""), "promtool after every verb:\n" + out)
        # Families that only a used troupe shows are there to be linted.
        for family in ("process_cpu_seconds_total", "process_resident_memory_bytes",
                       "process_virtual_memory_bytes", "process_start_time_seconds",
                       "process_open_fds", "process_max_fds", "troupe_threads",
                       "troupe_gangs", "troupe_queue_dominant_share",
                       "troupe_queue_gangs_waiting", "troupe_request_duration_seconds",
                       "troupe_gangs_planned_total", "troupe_http_responses_total"):
            self.assertRegex(after, r"(?m)^# TYPE %s " % re.escape(family))
        self.assertEqual(sample(after, 'troupe_gangs{state="bound"}'), 1)
        for verb in ("filter", "prioritize", "bind", "preempt"):
            self.assertGreater(sample(after, 'troupe_request_duration_seconds_count{verb="%s"}'
                                      % verb), 0, verb)

    def test_404_and_405_are_counted_on_both_listeners(self):
        def code(c):
            return self.t.metric('troupe_http_responses_total{code="%s"}' % c)
        n404, n405 = code(404), code(405)
        self.assertEqual(self.t.ops_request("POST", "/metrics", "")[0], 405)
        self.assertEqual(self.t.ops_request("DELETE", "/debug/state")[0], 405)
        self.assertEqual(self.t.ops_request("GET", "/no-such-page")[0], 404)
        self.assertEqual((code(404) - n404, code(405) - n405), (1, 2), "on the ops listener")
        n404, n405 = code(404), code(405)
        self.assertEqual(self.t.request("PUT", "/bind", "{}")[0], 405)
        self.assertEqual(self.t.request("GET", "/debug/state")[0], 404)
        self.assertEqual((code(404) - n404, code(405) - n405), (1, 1), "on the verbs listener")

    def test_promtool_is_strict(self):
        """The check can fail: promtool flags what troupe must not do."""
        bad = ("# HELP troupe_x_total A gauge named like a counter\n"
               "# TYPE troupe_x_total gauge\ntroupe_x_total 1\n"
               "# HELP troupe_y_milliseconds Not a base unit\n"
               "# TYPE troupe_y_milliseconds gauge\ntroupe_y_milliseconds 2\n"
               "# HELP troupe_z A counter without _total\n"
               "# TYPE troupe_z counter\ntroupe_z 3\n")
        code, out = promtool_check(bad)
        self.assertNotEqual(code, 0)
        for name in ("troupe_x_total", "troupe_y_milliseconds", "troupe_z"):
            self.assertIn(name, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
