"""Gang admission, the plans that expire: a gang missing a member binds nothing
(c1); a member no node can take expires the plan at the group timeout (c2) or
before the scheduler's httpTimeout (c3), releasing everything; a bind arriving
after its plan expired is not bound alone (f).

The helpers and what troupe promises are in gang_common.py.
"""
import time
import unittest

from gang_common import HTTP_TIMEOUT, NS, GangCase, member_name, reservation_of
from live_common import assert_converges, wait_until


class GangTest(GangCase):
    # ---- c. incomplete gangs ---------------------------------------------------------------

    def test_c1_a_gang_missing_a_member_binds_nothing(self):
        self.add_nodes(4)
        pods = self.create_gang("short", 3, 8, min_member=3, members=[0, 1])
        t = self.start_troupe()
        self.wait_cache_sees(t, pods.values(), ["short"])
        free_before = self.free_gpus(t)
        sched = self.scheduler(t)
        for p in pods.values():
            sched.add_pod(p)
        sched.run(deadline_s=10)
        self.assertEqual(sched.bound(), {})
        for p in pods.values():
            outs = self.outcomes_of(sched, p["metadata"]["uid"])
            self.assertEqual([o.result for o in outs], ["unschedulable"])
            self.assertEqual(len(outs[0].reasons), 4, "every node refused")
            for reason in outs[0].reasons.values():
                self.assertIn(f"gang {NS}/short waiting for its members: 2 of 3 exist", reason)
        self.assert_nothing_bound("short", 3)
        self.assertEqual(self.bindings_for(member_name("short", i) for i in range(3)), [])
        self.assertEqual(self.reservations(t), [], "a waiting gang reserves nothing")
        self.assertEqual(self.free_gpus(t), free_before)
        assert_converges(self, t, self.srv)

    def check_unschedulable_member_expires(self, timeout_s, expect_lo, expect_hi, why,
                                           reason_check=None):
        """Members 0 and 1 are held; member 2 exists but the client's in-tree
        filters (NodeAffinity) drop every node, so troupe never sees it. The
        held binds must be answered with an error between expect_lo and
        expect_hi seconds after they were held, and everything released."""
        self.add_nodes(4)
        pods = self.create_gang("stuck", 3, 8, min_member=3, timeout_s=timeout_s, members=[0, 1])
        pods[2] = self.create_member("stuck", 2, 8, node_selector={"troupe.test/pool": "none"})
        t = self.start_troupe()
        self.wait_cache_sees(t, pods.values(), ["stuck"])
        free_before = self.free_gpus(t)
        metrics_before = self.metrics(t)
        sched = self.scheduler(t)
        for i in range(3):
            sched.add_pod(pods[i])
        uids = [pods[i]["metadata"]["uid"] for i in range(3)]
        # Drive cycles until both schedulable members' binds are in flight;
        # member 2 is unschedulable without ever reaching troupe.
        self.drive_until(sched, lambda: sum(
            1 for o in sched.outcomes if o.pod in uids[:2] and o.result == "binding") == 2
            and self.outcomes_of(sched, uids[2]), 10, "both binds are in flight")
        held_at = time.monotonic()
        third = self.outcomes_of(sched, uids[2])
        self.assertEqual([o.result for o in third], ["unschedulable"])
        self.assertEqual(third[0].reasons, {}, "member 2 never reached troupe")
        # While held: the reservation of the third slot and two assumed members.
        def held_state():
            cache = t.cache()
            return (len([p for p in cache["pods"] if reservation_of(p, "stuck")]),
                    sorted(p["state"] for p in cache["pods"] if p["uid"] in uids))
        wait_until(lambda: held_state() == (1, ["assumed", "assumed", "not-accounted"]), 2,
                   "two members held, one slot reserved")
        self.assertEqual(sum(free_before.values()) - sum(self.free_gpus(t).values()), 24)
        self.assertTrue(sched.wait_binds(timeout=HTTP_TIMEOUT + 5), "binds still held")
        answered = time.monotonic() - held_at
        outs = [self.outcomes_of(sched, u)[-1] for u in uids[:2]]
        for o in outs:
            self.assertEqual(o.result, "bind-error", o)
            self.assertIn("expired", o.error, "troupe answered, not the client's timeout")
            self.assertIn(f"gang {NS}/stuck", o.error)
        self.assertGreaterEqual(answered, expect_lo, why)
        self.assertLess(answered, expect_hi, why)
        # Everything released: nothing on the server, no reservation, every GPU free.
        self.assert_nothing_bound("stuck", 3)
        self.assertEqual(self.bindings_for(member_name("stuck", i) for i in range(3)), [])
        self.assertEqual(self.reservations(t), [])
        self.assertEqual(self.free_gpus(t), free_before)
        cache = t.cache()
        for p in cache["pods"]:
            if p["uid"] in uids:
                self.assertEqual((p["state"], p["devices"]), ("not-accounted", ""), p)
        m = self.metrics(t)
        self.assertEqual(m["troupe_gpus_held"], metrics_before["troupe_gpus_held"])
        self.assertGreaterEqual(m["troupe_gangs_expired_total"], 1)
        self.assertEqual(m["troupe_gangs_planned"], 0)
        assert_converges(self, t, self.srv)
        if reason_check:
            reason_check(outs)

    def test_c2_an_unschedulable_member_expires_the_plan_at_the_group_timeout(self):
        # No scheduleTimeoutSeconds: troupe's default (3 s) from the plan.
        self.check_unschedulable_member_expires(None, 2.0, 5.0, "gang.default_timeout_seconds")

    def test_c3_held_binds_are_answered_before_the_scheduler_http_timeout(self):
        # The PodGroup allows 30 s, but kube-scheduler gives up on a bind after
        # 10 s: held binds are answered 10 - 2 = 8 s after the first was held.
        def reason_names_the_limit_that_fired(outs):
            # The reason is what a person reads on the pod. The plan was cut
            # after 8 s by the scheduler's httpTimeout, not by the PodGroup's
            # 30 s: naming "(30s)" sends them to raise scheduleTimeoutSeconds,
            # which cannot help.
            for o in outs:
                self.assertNotIn("(30s)", o.error, "the reason names the PodGroup's timeout, "
                                 "but the httpTimeout limit (8 s) expired the held binds")

        self.check_unschedulable_member_expires(30, 6.5, HTTP_TIMEOUT - 0.5,
                                                "scheduler_http_timeout - margin",
                                                reason_names_the_limit_that_fired)

    # ---- f. all-or-nothing at the edges ------------------------------------------------------

    def test_f_a_bind_arriving_after_the_plan_expired_is_not_bound_alone(self):
        """kube-scheduler filters a member (the plan is made and reserved), and
        its bind arrives after the plan expired (a slow binding cycle). The
        member must not be bound on its own: design.md section 6, invariant 2
        ("troupe never leaves a gang partly bound ... at expiry none")."""
        self.add_nodes(2)
        pods = self.create_gang("late", 2, 8, min_member=2)
        t = self.start_troupe()
        self.wait_cache_sees(t, pods.values(), ["late"])
        p0 = pods[0]
        s, _, f = t.request("POST", "/filter", {"Pod": p0, "Nodes": None,
                                                "NodeNames": ["gpu-000", "gpu-001"]})
        self.assertEqual(s, 200)
        self.assertEqual(f["Error"], "")
        self.assertTrue(f["NodeNames"], f)
        self.assertEqual(len(self.reservations(t, "late")), 2)
        wait_until(lambda: not self.reservations(t, "late"), 10, "the plan to expire")
        md = p0["metadata"]
        s, _, b = t.request("POST", "/bind", {"PodName": md["name"], "PodNamespace": NS,
                                               "PodUID": md["uid"], "Node": f["NodeNames"][0]})
        self.assertEqual(s, 200)
        time.sleep(0.5)
        on = self.server_nodes_of("late", 2)
        self.assertEqual(on, {0: None, 1: None},
                         f"member late-0 was bound alone after its gang's plan expired "
                         f"(bind answered {b!r})")
        self.assertNotEqual(b["Error"], "")


if __name__ == "__main__":
    unittest.main(verbosity=2)
