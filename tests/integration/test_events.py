"""Kubernetes Events from troupe (src/cache/events.c), against the test API
server, which keeps the events.k8s.io/v1 Events it is sent
(tests/apiserver/fake_events.py):

- a bind refused 1,000 times makes one Event on the pod, whose series count
  reaches 1,000, with far fewer writes than refusals;
- a gang waiting for members and a gang whose plan times out make Events on
  their PodGroup (regarding it by uid, so `kubectl describe podgroup` finds
  them) and, where a member asked, on that pod;
- without create on events, troupe warns once, stays ready, and its writes
  fail (and are counted) without touching scheduling.
"""
import unittest

from gang_common import GANG_CONFIG, NS, GangCase
from live_common import load_fixture_cluster, wait_until
from schedclient import gpu_pod
from fake_events import series_count

# Series written every second, so the test sees the count arrive in test time.
EVENTS_CONFIG = GANG_CONFIG + """
events:
  series_flush_seconds: 1
"""
REFUSALS = 1000


class EventsTest(GangCase):
    def start_events(self, config=EVENTS_CONFIG):
        t = self.start_troupe(config)
        return t

    def events(self, **kw):
        return self.srv.events_list(**kw)

    def pending_pod(self, name, gpus=0):
        p = gpu_pod(NS, name, None, gpus, cpu="1")
        del p["metadata"]["uid"]
        return self.srv.create("pods", p)

    def bind(self, t, pod, node):
        md = pod["metadata"]
        s, _, body = t.request("POST", "/bind", {"PodName": md["name"], "PodNamespace": NS,
                                                 "PodUID": md["uid"], "Node": node})
        self.assertEqual(s, 200)
        return body["Error"]

    def assert_troupe_event(self, ev, reason, kind, name, uid, type_="Warning"):
        self.assertEqual(ev["reportingController"], "troupe")
        self.assertTrue(ev["reportingInstance"], ev)
        self.assertEqual(ev["reason"], reason)
        self.assertEqual(ev["type"], type_)
        self.assertEqual(ev["regarding"]["kind"], kind)
        self.assertEqual(ev["regarding"]["name"], name)
        self.assertEqual(ev["regarding"]["uid"], uid)
        self.assertEqual(ev["metadata"]["namespace"], NS)

    def test_a_bind_refused_1000_times_is_one_event_with_a_count(self):
        # gpu-l4-0 of the fixture cluster is cordoned: every bind there is refused.
        load_fixture_cluster(self.srv)
        pod = self.pending_pod("cpu-p")
        t = self.start_events()
        uid = pod["metadata"]["uid"]
        wait_until(lambda: uid in {p["uid"] for p in t.cache()["pods"] if p["fromAPI"]}, 20,
                   "the pod in troupe's cache")
        for _ in range(REFUSALS):
            self.assertIn("node is cordoned", self.bind(t, pod, "gpu-l4-0"))
        self.assertEqual(self.srv.bindings, [], "a refused bind posts no Binding")

        def one_series():
            evs = self.events(reason="BindRefused", regarding_name="cpu-p")
            return len(evs) == 1 and series_count(evs[0]) == REFUSALS
        wait_until(one_series, 20, "one BindRefused Event whose count reaches %d" % REFUSALS)
        (ev,) = self.events(reason="BindRefused")
        self.assert_troupe_event(ev, "BindRefused", "Pod", "cpu-p", uid)
        self.assertEqual(ev["regarding"]["apiVersion"], "v1")
        self.assertEqual(ev["action"], "Binding")
        self.assertIn("node is cordoned", ev["note"])
        self.assertTrue(ev["series"]["lastObservedTime"].endswith("Z"), ev)
        # One POST, then a PATCH now and then: nowhere near one write a refusal.
        writes = [w for w in self.srv.event_writes if w[2] == ev["metadata"]["name"]]
        self.assertEqual(writes[0][0], "POST")
        self.assertTrue(all(w[0] == "PATCH" for w in writes[1:]), writes)
        self.assertLess(len(writes), 30, "the series is rate-limited, not a write per refusal")

    def test_a_gang_waiting_then_timing_out_gives_events_on_its_podgroup(self):
        self.nodes = self.add_nodes(2)
        pods = self.create_gang("late", 2, 8, min_member=2)
        pg = self.srv.get("podgroups", NS, "late")
        pg_uid = pg["metadata"]["uid"]
        t = self.start_events()
        self.wait_cache_sees(t, pods.values(), ["late"])
        # One member filtered: the gang is planned and reserved; no bind comes,
        # so the plan times out (gang.default_timeout_seconds: 3).
        self.filter(t, pods[0])
        wait_until(lambda: self.events(reason="GangTimedOut"), 15, "a GangTimedOut Event")
        (ev,) = self.events(reason="GangTimedOut")
        self.assert_troupe_event(ev, "GangTimedOut", "PodGroup", "late", pg_uid)
        self.assertEqual(ev["regarding"]["apiVersion"], "scheduling.x-k8s.io/v1alpha1")
        self.assertIn("gang %s/late" % NS, ev["note"])
        self.assertIn("expired", ev["note"])
        # The plan itself, on the PodGroup and on the member that asked.
        planned = self.events(reason="GangPlanned")
        self.assertEqual(sorted(e["regarding"]["kind"] for e in planned), ["Pod", "PodGroup"])
        for e in planned:
            self.assertEqual(e["type"], "Normal")
            self.assertIn("planned on", e["note"])
            self.assertIn("gpu-00", e["note"], "the note names the nodes")
        pod_ev = [e for e in planned if e["regarding"]["kind"] == "Pod"][0]
        self.assertEqual(pod_ev["regarding"]["uid"], pods[0]["metadata"]["uid"])

    def test_a_gang_waiting_for_members_says_how_many(self):
        self.nodes = self.add_nodes(2)
        pods = self.create_gang("short", 3, 8, min_member=3, members=[0, 1])
        t = self.start_events()
        self.wait_cache_sees(t, pods.values(), ["short"])
        # kube-scheduler retries a waiting member again and again: one series.
        for _ in range(20):
            self.filter(t, pods[0])
        wait_until(lambda: len(self.events(reason="GangWaitingForMembers")) == 2 and all(
            series_count(e) == 20 for e in self.events(reason="GangWaitingForMembers")), 15,
            "GangWaitingForMembers on the PodGroup and the pod, 20 times each")
        for e in self.events(reason="GangWaitingForMembers"):
            self.assertIn("2 of 3 exist", e["note"])
            self.assertEqual(e["type"], "Normal")

    def test_without_permission_troupe_warns_and_stays_ready(self):
        self.srv.deny("create", "events", group="events.k8s.io")
        load_fixture_cluster(self.srv)
        pod = self.pending_pod("cpu-p")
        t = self.start_events()
        wait_until(lambda: "missing permission: create events" in t.log(), 20,
                   "the warning about the missing permission")
        self.assertEqual(t.request("GET", "/readyz")[0], 200, "Events are optional")
        uid = pod["metadata"]["uid"]
        wait_until(lambda: uid in {p["uid"] for p in t.cache()["pods"] if p["fromAPI"]}, 20,
                   "the pod in troupe's cache")
        self.assertIn("node is cordoned", self.bind(t, pod, "gpu-l4-0"))
        wait_until(lambda: "cannot create Event" in t.log(), 20, "the failed write logged")
        self.assertEqual(self.events(), [])
        self.assertEqual(t.request("GET", "/readyz")[0], 200)

    def test_events_enabled_false_writes_none(self):
        load_fixture_cluster(self.srv)
        pod = self.pending_pod("cpu-p")
        t = self.start_events(EVENTS_CONFIG + "  enabled: false\n")
        uid = pod["metadata"]["uid"]
        wait_until(lambda: uid in {p["uid"] for p in t.cache()["pods"] if p["fromAPI"]}, 20,
                   "the pod in troupe's cache")
        self.assertIn("node is cordoned", self.bind(t, pod, "gpu-l4-0"))
        # A bind that succeeds, to be sure nothing at all is written.
        self.assertEqual(self.bind(t, pod, "cpu-0"), "")
        wait_until(lambda: self.srv.bindings, 10, "the Binding posted")
        self.assertEqual(self.srv.event_writes, [])


if __name__ == "__main__":
    unittest.main()
