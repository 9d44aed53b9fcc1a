"""A gang left partly bound by a troupe that died between two of its Bindings:
the next troupe finishes it from the plan its bound members carry (r1), or rolls
it back when it cannot (r2); a gang bound normally leaves the recovery nothing
to do (r3); a plan too long to list its members can only be rolled back, and
is (r4); a plan of a newer version is left alone (r5); a recovery Binding the
API server refuses for a moment is posted again until it is accepted (r6).

How a gang is left partly bound here: the API server refuses one member's
Binding on every post (as an admission webhook can), so the others are bound
and that one is not; then troupe is killed (SIGKILL: nothing is cleaned up)
before it gives up on that member. The scheduler-side client is stopped with
it, so nothing but the new troupe can bind the last member. On the real
control plane the same is done with a real leader failover (tests/e2e,
test_e2e_ha.py).

The helpers and what troupe promises are in gang_common.py; the recovery is
src/extender/recover.c, the plan record src/gang/record.c.
"""
import json
import unittest

from gang_common import GANG_CONFIG, NS, CacheMonitor, GangCase, member_name
from live_common import assert_converges, assert_no_device_twice, wait_until
from schedclient import gang_pod, pod_group

PLAN = "troupe.io/gang-plan"


def recover_config(rollback_s=0):
    """GANG_CONFIG (whose last section is gang:) with a fast recovery."""
    return GANG_CONFIG + f"""  recover_interval_seconds: 1
  recover_grace_seconds: 1
  partial_rollback_seconds: {rollback_s}
"""


class GangRecoverTest(GangCase):
    def plan_of(self, name):
        ann = self.server_pod(name)["metadata"].get("annotations", {})
        self.assertIn(PLAN, ann, f"{name} carries its gang's plan")
        return json.loads(ann[PLAN])

    def leave_partly_bound(self, group, n=4, config=None):
        """Gang <group> of n x 8 GPUs with n-1 members bound and member n-1's
        Binding refused, then its troupe killed. Returns (pods, plan)."""
        self.add_nodes(n + 2)
        pods = self.create_gang(group, n, 8, min_member=n, timeout_s=60)
        t = self.start_troupe(config or recover_config())
        self.wait_cache_sees(t, pods.values(), [group])
        last = member_name(group, n - 1)
        self.srv.fail_next(100000, 403, path_contains=f"/pods/{last}/binding",
                           message=f"denied by webhook deny-{last}")
        sched = self.scheduler(t, seed=3)
        for i in range(n):
            sched.add_pod(pods[i])
        self.drive_until(sched, lambda: len(sched.bound()) == n - 1, 20,
                         f"{n - 1} members bound")
        wait_until(lambda: len([r for r in self.srv.requests
                                if f"/pods/{last}/binding" in r[1]]) >= 2, 10,
                   f"{last}'s Binding refused and posted again")
        t.proc.kill()
        t.proc.wait()
        t.stop(check=False)
        sched.close()
        on = self.server_nodes_of(group, n)
        self.assertEqual(sum(1 for v in on.values() if v), n - 1, on)
        self.assertIsNone(on[n - 1])
        self.srv.clear_faults()
        plan = self.plan_of(member_name(group, 0))
        self.assertEqual(plan["v"], 1)
        self.assertEqual(plan["n"], n)
        self.assertEqual(plan["quorum"], n)
        self.assertEqual(sorted(m["pod"] for m in plan["members"]),
                         sorted(member_name(group, i) for i in range(n)))
        for i in range(n - 1):
            self.assertEqual(self.plan_of(member_name(group, i)), plan,
                             "every bound member carries the same plan")
        for m in plan["members"]:
            if m["pod"] != last:
                pod = self.server_pod(m["pod"])
                self.assertEqual(pod["spec"]["nodeName"], m["node"])
                self.assertEqual(pod["metadata"]["annotations"]["troupe.io/gpu-ids"], m["gpus"])
        return pods, plan

    def test_r1_the_next_troupe_completes_a_gang_left_partly_bound(self):
        """The last member is bound by the new troupe alone, exactly where the
        plan put it (node and devices), with the same plan on its Binding; no
        device is held twice at any time."""
        pods, plan = self.leave_partly_bound("rc")
        last = next(m for m in plan["members"] if m["pod"] == member_name("rc", 3))
        t2 = self.start_troupe(recover_config())
        uids = {p["metadata"]["uid"] for p in pods.values()}
        with CacheMonitor(t2, {"rc": uids}) as mon:
            wait_until(lambda: (self.server_pod(last["pod"])["spec"].get("nodeName")), 20,
                       "the new troupe to bind the last member")
        self.assertEqual(mon.double, [], "a device was held twice")
        pod = self.server_pod(last["pod"])
        self.assertEqual(pod["spec"]["nodeName"], last["node"])
        self.assertEqual(pod["metadata"]["annotations"]["troupe.io/gpu-ids"], last["gpus"])
        self.assertEqual(json.loads(pod["metadata"]["annotations"][PLAN]), plan)
        self.assert_gang_bound("rc", 4, 8)
        self.assertRegex(t2.log(), r"\[recover\] gang ml/rc: bound pod ml/rc-3 -> node \S+, GPU "
                         r"devices \[[0-9,]+\], as its plan said")
        wait_until(lambda: self.metrics(t2).get("troupe_gang_recovered_total") == 1, 10,
                   "the gang counted as recovered")
        m = self.metrics(t2)
        self.assertEqual(m["troupe_gang_recovery_bindings_total"], 1)
        self.assertEqual(m["troupe_gang_rolled_back_total"], 0)
        self.assertEqual(self.srv.deletions, [])
        assert_converges(self, t2, self.srv)
        assert_no_device_twice(self, t2)

    def test_r2_a_gang_that_cannot_be_completed_is_rolled_back(self):
        """The last member's planned node is cordoned before the new troupe
        starts: its plan cannot be followed. After
        gang.partial_rollback_seconds the bound members are deleted (each
        with its UID as a precondition), so their controller can start the
        gang again whole; the unbound member is left for kube-scheduler."""
        pods, plan = self.leave_partly_bound("rb")
        last = next(m for m in plan["members"] if m["pod"] == member_name("rb", 3))
        self.srv.patch("nodes", None, last["node"], {"spec": {"unschedulable": True}})
        t2 = self.start_troupe(recover_config(rollback_s=3))
        wait_until(lambda: len(self.srv.deletions) == 3, 30, "the bound members deleted")
        bound = {m["pod"]: m for m in plan["members"] if m["pod"] != last["pod"]}
        uid_of = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods.values()}
        self.assertEqual(sorted(self.srv.deletions),
                         sorted(("pods", NS, name, uid_of[name]) for name in bound))
        for name in bound:
            self.assertIsNone(self.server_pod(name), f"{name} deleted")
        self.assertIsNone(self.server_pod(last["pod"])["spec"].get("nodeName"))
        self.assertRegex(t2.log(), r"\[recover\] gang ml/rb: partly bound \(3 of 4 members of "
                         r"plan \S+\) and cannot be completed now: pod ml/rb-3: .*cordoned")
        self.assertRegex(t2.log(), r"gang ml/rb: rolling back its plan")
        wait_until(lambda: self.metrics(t2).get("troupe_gang_rolled_back_total") == 1, 10,
                   "the rollback counted")
        m = self.metrics(t2)
        self.assertEqual(m["troupe_gang_rollback_pods_deleted_total"], 3)
        self.assertEqual(m["troupe_gang_recovery_bindings_total"], 0)
        # kubectl describe podgroup says so, in troupe's words (events.c).
        wait_until(lambda: self.srv.events_list(reason="GangRolledBack"), 15,
                   "a GangRolledBack Event")
        (ev,) = self.srv.events_list(reason="GangRolledBack")
        self.assertEqual((ev["reportingController"], ev["type"], ev["regarding"]["kind"],
                          ev["regarding"]["name"]), ("troupe", "Warning", "PodGroup", "rb"))
        self.assertIn("deleted 3 bound members", ev["note"])
        assert_converges(self, t2, self.srv)
        assert_no_device_twice(self, t2)

    def test_r3_a_gang_bound_normally_leaves_nothing_to_recover(self):
        """Every member of a normally bound gang carries the plan, and the
        recovery passes find nothing to post or delete."""
        self.add_nodes(6)
        pods = self.create_gang("ok", 4, 8, min_member=4)
        t = self.start_troupe(recover_config(rollback_s=2))
        self.wait_cache_sees(t, pods.values(), ["ok"])
        sched = self.scheduler(t, seed=1)
        for i in range(4):
            sched.add_pod(pods[i])
        sched.run(deadline_s=20)
        self.assert_gang_bound("ok", 4, 8)
        plans = [self.plan_of(member_name("ok", i)) for i in range(4)]
        self.assertTrue(all(p == plans[0] for p in plans), "one plan for the gang")
        passes = self.metrics(t)["troupe_gang_recovery_passes_total"]
        wait_until(lambda: self.metrics(t)["troupe_gang_recovery_passes_total"] >= passes + 4,
                   15, "four more recovery passes")
        m = self.metrics(t)
        self.assertEqual(m["troupe_gang_recovery_bindings_total"], 0)
        self.assertEqual(m["troupe_gang_recovered_total"], 0)
        self.assertEqual(m["troupe_gang_rolled_back_total"], 0)
        self.assertEqual(self.srv.deletions, [])
        self.assertNotRegex(t.log(), r"\[recover\]")


    def test_r6_a_refused_recovery_binding_is_posted_again(self):
        """The API server refuses the new troupe's Binding twice (a webhook
        still in place): the recovery keeps the member's devices and posts it
        again after a backoff, so the gang is completed from its plan and no
        other plan is made for the member meanwhile."""
        pods, plan = self.leave_partly_bound("rr")
        last = next(m for m in plan["members"] if m["pod"] == member_name("rr", 3))
        self.srv.fail_next(2, 403, path_contains="/pods/%s/binding" % last["pod"],
                           message="denied by webhook still-there")
        t2 = self.start_troupe(recover_config())
        wait_until(lambda: self.server_pod(last["pod"])["spec"].get("nodeName"), 30,
                   "the last member bound after the refusals")
        self.assertEqual(self.server_pod(last["pod"])["spec"]["nodeName"], last["node"])
        self.assertGreaterEqual(t2.log().count("gang ml/rr: binding pod ml/rr-3 -> node %s "
                                               "refused" % last["node"]), 2, t2.log())
        m = self.metrics(t2)
        self.assertEqual(m["troupe_gang_recovery_bindings_total"], 1)
        self.assertEqual(m["troupe_gang_recovery_refused_total"], 0)
        assert_no_device_twice(self, t2)

    def bound_members_with(self, group, plan_text, n_bound, n_pending):
        """Gang <group> of 1-GPU members as the API would show it after a
        partial bind: n_bound bound (each with troupe.io/gpu-ids and the plan
        <plan_text>), n_pending unbound. Returns the bound ones' (name, uid)."""
        nodes = self.add_nodes(n_bound + n_pending)
        self.srv.create("podgroups", pod_group(NS, group, n_bound + n_pending, 60))
        bound = []
        for i in range(n_bound + n_pending):
            p = gang_pod(NS, member_name(group, i), None, 1, group)
            del p["metadata"]["uid"]
            if i < n_bound:
                p["spec"]["nodeName"] = nodes[i]
                p["metadata"].setdefault("annotations", {}).update(
                    {"troupe.io/gpu-ids": "0", PLAN: plan_text})
            out = self.srv.create("pods", p)
            if i < n_bound:
                bound.append((out["metadata"]["name"], out["metadata"]["uid"]))
        return bound

    def test_r4_a_plan_too_long_to_list_is_rolled_back_whole(self):
        """A plan written without its members (over 16 KiB) still tells the
        gang is partly bound; it cannot be completed, so every bound member
        of the group is deleted after gang.partial_rollback_seconds."""
        bound = self.bound_members_with("big", '{"v":1,"id":"unlisted-1","quorum":3,"n":3}',
                                        2, 1)
        t = self.start_troupe(recover_config(rollback_s=3))
        wait_until(lambda: len(self.srv.deletions) == 2, 30, "the bound members deleted")
        self.assertEqual(sorted(self.srv.deletions),
                         sorted(("pods", NS, name, uid) for name, uid in bound))
        self.assertRegex(t.log(), r"gang ml/big: partly bound \(0 of 3 members of plan "
                         r"unlisted-1\) and cannot be completed now: its plan was too long")
        self.assertRegex(t.log(), r"rolling back its plan unlisted-1, .*deleting its 2 bound "
                         r"members")
        wait_until(lambda: self.metrics(t).get("troupe_gang_rolled_back_total") == 1, 10,
                   "the rollback counted")

    def test_r5_a_plan_of_a_newer_version_is_left_alone(self):
        """A release that does not know a plan's version neither completes nor
        rolls back the gang: it says so once, and leaves it to the release that
        wrote it."""
        self.bound_members_with("new", '{"v":2,"id":"n-1","quorum":2,"n":2,"layout":"?"}', 1, 1)
        t = self.start_troupe(recover_config(rollback_s=2))
        passes = self.metrics(t)["troupe_gang_recovery_passes_total"]
        wait_until(lambda: self.metrics(t)["troupe_gang_recovery_passes_total"] >= passes + 4,
                   15, "four more recovery passes")
        self.assertEqual(self.srv.deletions, [])
        self.assertEqual(t.log().count("gang ml/new: its members carry a plan troupe cannot use "
                                       "(the plan is version 2, newer than this release reads "
                                       "(1))"), 1, t.log())
        self.assertIsNone(self.server_pod(member_name("new", 1))["spec"].get("nodeName"))
        self.assertEqual(self.metrics(t)["troupe_gang_recovery_bindings_total"], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
