"""Gang admission, the gangs that bind: a 256-member gang on 512 nodes binds
completely (a); of two gangs that cannot both fit one completes and the other
holds nothing until the first is gone (b); a gang whose members ask different
amounts, with a CPU-only launcher, binds completely (g).

The helpers and what troupe promises are in gang_common.py.
"""
import time
import unittest

from gang_common import (BIG_CONFIG, NS, CacheMonitor, GangCase, holds_devices, member_name,
                         reservation_of)
from live_common import assert_converges, assert_no_device_twice
from schedclient import ExtenderConfig, pod_group


class GangTest(GangCase):
    # ---- a. a big gang -----------------------------------------------------------

    def test_a_256_member_gang_binds_completely_on_512_nodes(self):
        nodes, members, gpus = 512, 256, 8
        self.add_nodes(nodes)
        # The PodGroup names a longer timeout than the 3 s default: 256 scheduling
        # cycles of the Python client take a few seconds (see BIG_CONFIG).
        pods = self.create_gang("big", members, gpus, min_member=members, timeout_s=30)
        t = self.start_troupe(BIG_CONFIG)
        self.wait_cache_sees(t, pods.values(), ["big"])
        sched = self.scheduler(t, ext=ExtenderConfig(http_timeout=30.0), seed=11)
        for i in range(members):
            sched.add_pod(pods[i])
        started = time.monotonic()
        with CacheMonitor(t, {"big": {p["metadata"]["uid"] for p in pods.values()}},
                          interval=0.1) as mon:
            sched.run(deadline_s=60)
        elapsed = time.monotonic() - started
        bound = sched.bound()
        failed = [o for o in sched.outcomes if o.result in ("error", "bind-error")]
        self.assertEqual(failed, [], "no bind or filter failed")
        self.assertEqual(len(bound), members, f"client bound {len(bound)} of {members} "
                         f"in {elapsed:.1f}s")
        on = self.assert_gang_bound("big", members, gpus)
        self.assertEqual(len(set(on.values())), members)
        for i in range(members):
            self.assertEqual(bound[pods[i]["metadata"]["uid"]], on[i])
        self.assertEqual(mon.double, [], "a device was held twice during the run")
        self.assertGreaterEqual(mon.samples, 2, "the cache was watched during the run")
        # Exactly one Binding per member: nothing was posted twice or early.
        self.assertEqual(len(self.bindings_for(member_name("big", i) for i in range(members))),
                         members)
        assert_converges(self, t, self.srv, timeout=30)
        assert_no_device_twice(self, t)
        self.assertEqual(self.reservations(t), [], "reservations left after the gang bound")
        print(f"\n  256-member gang on 512 nodes: bound in {elapsed:.1f}s "
              f"({len(sched.outcomes)} cycles)", flush=True)

    # ---- b. two gangs that cannot both fit -----------------------------------------------

    def test_b_two_gangs_that_cannot_both_fit_only_one_holds_anything(self):
        self.add_nodes(6)
        pods = {"ga": {}, "gb": {}}
        self.srv.create("podgroups", pod_group(NS, "ga", 4))
        self.srv.create("podgroups", pod_group(NS, "gb", 4))
        for i in range(4):                      # created interleaved: ga-0, gb-0, ga-1, ...
            for g in ("ga", "gb"):
                pods[g][i] = self.create_member(g, i, 8)
        t = self.start_troupe()
        everyone = [p for g in pods.values() for p in g.values()]
        self.wait_cache_sees(t, everyone, ["ga", "gb"])
        uids = {g: {p["metadata"]["uid"] for p in pods[g].values()} for g in pods}
        sched = self.scheduler(t, seed=5)
        for i in range(4):
            for g in ("ga", "gb"):
                sched.add_pod(pods[g][i])
        with CacheMonitor(t, uids) as mon:
            sched.run(deadline_s=30)
            mon.sample()
        self.assertEqual(mon.double, [])
        complete = [g for g in pods if all(self.server_nodes_of(g, 4).values())]
        self.assertEqual(len(complete), 1, f"exactly one gang completes: {complete}")
        winner = complete[0]            # which one is the fair order's business
        loser = "gb" if winner == "ga" else "ga"
        self.assert_gang_bound(winner, 4, 8)
        self.assert_nothing_bound(loser, 4)
        self.assertEqual(self.bindings_for(member_name(loser, i) for i in range(4)), [],
                         "no Binding was ever posted for the losing gang")
        # The losing gang never held anything: no reservation, no assumed member,
        # at any moment troupe was sampled.
        self.assertGreaterEqual(mon.samples, 2)
        self.assertEqual(mon.held[loser], [], f"gang {loser} held GPUs")
        self.assertNotRegex(t.log(), rf"gang {NS}/{loser}: .* planned",
                            f"gang {loser} was planned (and so reserved)")
        self.assertRegex(t.log(), rf"gang {NS}/{winner}: .* planned")
        self.assertTrue(mon.held[winner])
        cache = t.cache()
        self.assertEqual([p for p in cache["pods"] if reservation_of(p, loser)], [])
        self.assertEqual([p["name"] for p in cache["pods"]
                          if p["uid"] in uids[loser] and (holds_devices(p) or
                                                          p["state"] == "assumed")], [])
        # Its pods were refused with a reason naming the gang.
        for uid in uids[loser]:
            refusals = [o for o in self.outcomes_of(sched, uid) if o.result == "unschedulable"]
            self.assertTrue(refusals, uid)
            # (A refusal by the client's own filters never reached troupe.)
            by_troupe = [o for o in refusals if o.reasons]
            self.assertTrue(by_troupe, f"{uid}: troupe refused it at least once")
            for reason in by_troupe[-1].reasons.values():
                self.assertIn(f"gang {NS}/{loser}", reason)
            self.assertNotIn(uid, sched.bound())
        assert_converges(self, t, self.srv)
        # The first gang finishes: the second now fits and completes.
        for i in range(4):
            self.srv.delete("pods", NS, member_name(winner, i))
        assert_converges(self, t, self.srv)
        for uid in uids[winner]:
            sched.delete_pod(uid)
        with CacheMonitor(t, uids) as mon2:
            sched.run(deadline_s=30)
        self.assertEqual(mon2.double, [])
        self.assert_gang_bound(loser, 4, 8)
        assert_converges(self, t, self.srv)
        assert_no_device_twice(self, t)
        self.assertEqual(self.reservations(t), [])

    # ---- g. members asking different amounts ----------------------------------------------

    def test_g_a_mixed_gang_with_a_cpu_launcher_binds_completely(self):
        """One 8-GPU leader, four 4-GPU workers and a CPU-only launcher (not
        routed to troupe: managedResources lists only GPUs) on three 8-GPU
        nodes: exactly enough, but only if each member gets a place of its own
        size and the launcher takes none. Whichever member is filtered first,
        the plan holds 24 GPUs, everything binds, nothing is left reserved."""
        self.add_nodes(3)
        self.srv.create("podgroups", pod_group(NS, "mix", 6))
        pods = {0: self.create_member("mix", 0, 0, cpu="1")}         # the launcher
        for i in range(1, 5):
            pods[i] = self.create_member("mix", i, 4)
        pods[5] = self.create_member("mix", 5, 8)                     # the leader
        t = self.start_troupe()
        self.wait_cache_sees(t, pods.values(), ["mix"])
        sched = self.scheduler(t, seed=5, api_url=self.srv.url)
        for i in (1, 5, 0, 2, 3, 4):            # a 4-GPU worker is filtered first
            sched.add_pod(pods[i])
        with CacheMonitor(t, {"mix": {p["metadata"]["uid"] for p in pods.values()}}) as mon:
            self.drive_until(sched, lambda: len(sched.bound()) == 6, 30,
                             "every member of gang mix is bound")
        on = self.server_nodes_of("mix", 6)
        self.assertTrue(all(on.values()), f"members without a node: {on}")
        for i, want in ((1, 4), (2, 4), (3, 4), (4, 4), (5, 8)):
            ann = self.server_pod(member_name("mix", i))["metadata"].get("annotations", {})
            ids = [d for d in ann.get("troupe.io/gpu-ids", "").split(",") if d]
            self.assertEqual(len(ids), want, f"member {i}: troupe.io/gpu-ids={ids}")
        self.assertNotIn("troupe.io/gpu-ids",
                         self.server_pod(member_name("mix", 0))["metadata"].get("annotations", {}))
        failed = [o for o in sched.outcomes if o.result in ("error", "bind-error")]
        self.assertEqual(failed, [], "no bind or filter failed")
        self.assertEqual(mon.double, [], "a device was held twice during the run")
        self.assertGreaterEqual(mon.samples, 1, "the cache was watched during the run")
        assert_converges(self, t, self.srv, timeout=20)
        assert_no_device_twice(self, t)
        self.assertEqual(self.reservations(t), [], "reservations left after the gang bound")


if __name__ == "__main__":
    unittest.main(verbosity=2)
