"""The two tables a filter call can grow, capped by configuration, end to end:
the real troupe against the test API server, the caps set small in its
config file, and more unique pods and pod groups sent than the caps hold.

  cache.max_filter_only_pods  pods troupe knows only from filter calls (not
                              from the watch) and that occupy nothing; at the
                              cap the oldest are dropped (src/cache/pods.c)
  gang.max_entries            pod groups the gang manager keeps state for; at
                              the cap the idle ones unseen longest are
                              forgotten, never one waiting, planned or binding
                              (src/gang/manager.c)

Anyone who can reach the verbs port can name made-up pods and groups; these
tests check that the config keys really reach the daemon (the counts on the
ops listener's /metrics stop at the caps given here, not at the built-in
defaults), that the right entries go, and that every filter keeps getting its
ordinary answer meanwhile. What happens when nothing can go is in
test_filter_enospc.py.
"""
import unittest

from gang_common import NS, GangCase, member_name, reservation_of
from live_common import FAST_CONFIG
from schedclient import gang_pod, gpu_pod

FILTER_ONLY_CAP = 50
GANG_CAP = 20
# A plan lives 300 s here: the in-flight gang must not expire during a test.
CONFIG = FAST_CONFIG + f"""
cache:
  max_filter_only_pods: {FILTER_ONLY_CAP}
gang:
  max_entries: {GANG_CAP}
  default_timeout_seconds: 300
  scheduler_http_timeout_seconds: 30
  margin_seconds: 2
"""
NODES = 4


class CapsTest(GangCase):
    def setUp(self):
        super().setUp()
        self.nodes = self.add_nodes(NODES)

    # ---- helpers --------------------------------------------------------------

    def filter_only_uids(self, t):
        return {p["uid"] for p in t.cache()["pods"] if not p["fromAPI"]}

    def solo_member(self, i):
        """Member 0 of a two-member gang solo-<i> whose other member never
        comes: the gang stays idle (waiting for its members), so the cap may
        forget it."""
        p = gang_pod(NS, member_name(f"solo-{i}", 0), None, 1, f"solo-{i}")
        p["metadata"]["annotations"] = {"troupe.io/min-member": "2"}
        del p["metadata"]["uid"]
        return self.srv.create("pods", p)

    # ---- cache.max_filter_only_pods --------------------------------------------

    def test_filter_only_pods_stop_at_the_cap_oldest_dropped_first(self):
        t = self.start_troupe(CONFIG)
        # Pods the watch shows are the cluster's, not the cap's: filtered
        # among the flood, they stay.
        real = [self.srv.create("pods", gpu_pod(NS, f"real-{i}", f"real-{i}", 1))
                for i in range(5)]
        t.wait_seen(*real)
        sent = 3 * FILTER_ONLY_CAP
        uids = [f"made-up-{i:04d}" for i in range(sent)]
        for i, uid in enumerate(uids):
            ans = self.filter(t, gpu_pod(NS, uid, uid, 1))
            # 1 GPU on empty 8-GPU nodes: every node passes, cap or not.
            self.assertEqual(sorted(ans["NodeNames"]), sorted(self.nodes), uid)
            if i % 30 == 0:
                self.filter(t, real[i // 30 % len(real)])
        m = self.metrics(t)
        # One filter at a time: the cap drops one (cap / 64, at least 1) each
        # time it is reached, so the table holds exactly the cap.
        self.assertEqual(m["troupe_filter_only_pods"], FILTER_ONLY_CAP, m)
        self.assertEqual(m["troupe_filter_only_pods_dropped_total"], sent - FILTER_ONLY_CAP)
        self.assertEqual(m["troupe_filter_only_pods_refused_total"], 0)
        # The oldest went: what is left is the newest <cap> sent.
        self.assertEqual(self.filter_only_uids(t), set(uids[-FILTER_ONLY_CAP:]))
        cached = {p["uid"]: p for p in t.cache()["pods"]}
        for p in real:
            self.assertTrue(cached.get(p["metadata"]["uid"], {}).get("fromAPI"),
                            f"watched pod {p['metadata']['name']} dropped by the cap")
        self.assertIn(f"{FILTER_ONLY_CAP} pods are known only from filter calls, the cap "
                      "(cache.max_filter_only_pods): dropped the 1 oldest", t.log())
        # A pod that was dropped is remembered afresh when it is filtered again.
        self.filter(t, gpu_pod(NS, uids[0], uids[0], 1))
        self.assertIn(uids[0], self.filter_only_uids(t))
        self.assertNotIn(uids[-FILTER_ONLY_CAP], self.filter_only_uids(t))
        self.assertEqual(self.metrics(t)["troupe_filter_only_pods"], FILTER_ONLY_CAP)

    # ---- gang.max_entries --------------------------------------------------------

    def test_gang_entries_stop_at_the_cap_and_gangs_in_flight_are_kept(self):
        inflight = self.create_gang("inflight", 2, 1, min_member=2, timeout_s=300)
        # Five whole nodes' worth on four nodes: refused for capacity, it
        # waits (in flight too: it keeps its place in the fair order).
        big = self.create_gang("big", NODES + 1, 8, min_member=NODES + 1, timeout_s=300)
        solos = [self.solo_member(i) for i in range(2 * GANG_CAP)]
        t = self.start_troupe(CONFIG)
        self.wait_cache_sees(t, list(inflight.values()) + list(big.values()) + solos,
                             ["inflight", "big"])
        # The first member's filter plans and reserves the whole gang.
        ans = self.filter(t, inflight[0])
        self.assertTrue(ans["NodeNames"], ans)
        self.assertEqual(self.metrics(t)["troupe_gangs_planned"], 1)
        self.assertEqual(self.filter(t, big[0]).get("NodeNames") or [], [])
        self.assertEqual(self.metrics(t)["troupe_gangs_waiting"], 1)
        planned = sorted(p["node"] for p in t.cache()["pods"] if reservation_of(p, "inflight"))
        self.assertEqual(len(planned), 2, "a reservation for each member")
        # Twice the cap of gangs that wait for a member that never comes.
        for i, p in enumerate(solos):
            ans = self.filter(t, p)
            self.assertEqual(ans.get("NodeNames") or [], [], ans)
            for why in ans["FailedNodes"].values():
                self.assertIn(f"gang {NS}/solo-{i} waiting for its members: 1 of 2 exist", why)
            self.assertLessEqual(self.metrics(t)["troupe_gang_entries"], GANG_CAP)
        m = self.metrics(t)
        self.assertEqual(m["troupe_gang_entries"], GANG_CAP, m)
        # 2 + 2 * cap gangs, cap kept: one forgotten (cap / 64, at least 1)
        # each time the table was full.
        self.assertEqual(m["troupe_gang_entries_dropped_total"], 2 + 2 * GANG_CAP - GANG_CAP)
        self.assertEqual(m["troupe_gang_entries_refused_total"], 0)
        self.assertIn(f"{GANG_CAP} pod groups known, the cap (gang.max_entries): forgot the 1 "
                      "idle the longest", t.log())
        # The gangs in flight were never forgotten: the waiting one still
        # waits; the planned one's plan and reservations stand, and its
        # second member finds its slot.
        self.assertEqual(m["troupe_gangs_waiting"], 1)
        self.assertEqual(m["troupe_gangs_planned"], 1)
        self.assertEqual(sorted(p["node"] for p in t.cache()["pods"]
                                if reservation_of(p, "inflight")), planned)
        ans = self.filter(t, inflight[1])
        self.assertTrue(set(ans["NodeNames"]) <= set(planned) and ans["NodeNames"], ans)
        # A forgotten gang comes back afresh: filtered again, it is known again
        # (and another idle one goes).
        before = m["troupe_gang_entries_dropped_total"]
        ans = self.filter(t, solos[0])
        for why in ans["FailedNodes"].values():
            self.assertIn(f"gang {NS}/solo-0 waiting for its members: 1 of 2 exist", why)
        m = self.metrics(t)
        self.assertEqual(m["troupe_gang_entries"], GANG_CAP)
        self.assertEqual(m["troupe_gang_entries_dropped_total"], before + 1)

    def test_the_caps_are_each_the_tables_own(self):
        """Filling one table leaves the other alone: made-up single pods do
        not cost gang entries, and gangs' members, known from the watch, do
        not count against the filter-only cap."""
        solos = [self.solo_member(i) for i in range(GANG_CAP // 2)]
        t = self.start_troupe(CONFIG)
        self.wait_cache_sees(t, solos)
        for p in solos:
            self.filter(t, p)
        for i in range(2 * FILTER_ONLY_CAP):
            self.filter(t, gpu_pod(NS, f"single-{i}", f"single-{i}", 1))
        m = self.metrics(t)
        self.assertEqual(m["troupe_gang_entries"], GANG_CAP // 2)
        self.assertEqual(m["troupe_gang_entries_dropped_total"], 0)
        self.assertEqual(m["troupe_filter_only_pods"], FILTER_ONLY_CAP)
        cached = {p["uid"]: p for p in t.cache()["pods"]}
        for p in solos:
            self.assertTrue(cached.get(p["metadata"]["uid"], {}).get("fromAPI"),
                            f"watched member {p['metadata']['name']} dropped by the cap")

if __name__ == "__main__":
    unittest.main()
