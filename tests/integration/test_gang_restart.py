"""Gang admission across troupe restarts: killed (e1) or stopped (e2, e3) while
members are held, the held binds are answered and a new troupe rebuilds from
the API server; a restart after a gang bound rebuilds its holdings (e4).

The helpers and what troupe promises are in gang_common.py.
"""
import signal
import unittest

from gang_common import GANG_CONFIG, HTTP_TIMEOUT, NS, CacheMonitor, GangCase, member_name
from live_common import assert_converges, assert_no_device_twice, wait_until


class GangTest(GangCase):
    # ---- e. troupe restarts while members are held ----------------------------------------

    def check_restart_mid_gang(self, sig):
        self.add_nodes(6)
        # A long group timeout: only the restart ends the held binds.
        pods = self.create_gang("rs", 4, 8, min_member=4, timeout_s=60)
        t = self.start_troupe()
        self.wait_cache_sees(t, pods.values(), ["rs"])
        uids = [pods[i]["metadata"]["uid"] for i in range(4)]
        sched = self.scheduler(t, seed=4)
        for i in range(3):                      # the fourth is not queued yet
            sched.add_pod(pods[i])
        self.drive_until(sched, lambda: sched.binds_in_flight() == 3, 10, "3 binds in flight")
        wait_until(lambda: sorted(p["state"] for p in t.cache()["pods"] if p["uid"] in uids)
                   == ["assumed"] * 3 + ["not-accounted"], 5, "three members held")
        self.assertEqual(len(self.reservations(t, "rs")), 1)
        # troupe goes away while the three binds are held.
        if sig == signal.SIGKILL:
            t.proc.kill()
            t.proc.wait()
            t.stop(check=False)
        else:
            t.stop(check=True)          # SIGTERM: a clean exit
        self.assertTrue(sched.wait_binds(timeout=HTTP_TIMEOUT + 5))
        errors = [self.outcomes_of(sched, u)[-1] for u in uids[:3]]
        for o in errors:
            # SIGTERM: troupe's answer "troupe is stopping", or a closed
            # connection (test_e3); SIGKILL: a closed connection. Either way a
            # bind failure kube-scheduler retries.
            self.assertEqual(o.result, "bind-error", o)
        self.assert_nothing_bound("rs", 4)
        self.assertEqual(self.bindings_for(member_name("rs", i) for i in range(4)), [])
        # A new troupe rebuilds from the API server; the client retries there.
        t2 = self.start_troupe()
        assert_converges(self, t2, self.srv)
        self.assertEqual(self.reservations(t2), [])
        sched.retarget(t2.host, t2.port)
        sched.add_pod(pods[3])
        with CacheMonitor(t2, {"rs": set(uids)}) as mon:
            sched.run(deadline_s=30)
        self.assertEqual(mon.double, [])
        self.assertGreaterEqual(mon.samples, 2, "the cache was watched during the run")
        self.assertEqual(len(sched.bound()), 4)
        self.assert_gang_bound("rs", 4, 8)
        assert_converges(self, t2, self.srv)
        assert_no_device_twice(self, t2)
        self.assertEqual(self.reservations(t2), [])
        return errors

    def test_e1_troupe_killed_with_held_binds(self):
        errors = self.check_restart_mid_gang(signal.SIGKILL)
        for o in errors:    # the connection broke: no answer at all
            self.assertRegex(o.error, r"(?i)closed|reset|refused|broken|aborted")

    def test_e2_troupe_stopped_with_held_binds_answers_them(self):
        self.check_restart_mid_gang(signal.SIGTERM)

    def test_e3_every_held_bind_is_answered_on_a_clean_stop(self):
        """On SIGTERM troupe answers every held bind ("troupe is stopping")
        before it closes its server (src/extender/main.c: "they answer every
        bind still waiting, which resumes their connections, so the server can
        then close cleanly"). Many held binds and one HTTP thread make a lost
        answer likely; three rounds."""
        members = 40
        self.add_nodes(members + 2)
        lost = []
        for rnd in range(3):
            group = f"sd{rnd}"
            # One member more than is scheduled: the quorum is never reached.
            pods = self.create_gang(group, members + 1, 8, min_member=members + 1,
                                    timeout_s=60)
            t = self.start_troupe(GANG_CONFIG + "http:\n  threads: 1\n")
            self.wait_cache_sees(t, pods.values(), [group])
            sched = self.scheduler(t, seed=rnd)
            uids = [pods[i]["metadata"]["uid"] for i in range(members)]
            for i in range(members):
                sched.add_pod(pods[i])
            self.drive_until(sched, lambda: sched.binds_in_flight() == members and
                             len(sched.outcomes) >= members, 20, f"{members} binds in flight")
            wait_until(lambda: sum(1 for p in t.cache()["pods"]
                                   if p["uid"] in uids and p["state"] == "assumed") == members,
                       10, f"{members} members held")
            t.stop(check=True)
            self.assertTrue(sched.wait_binds(timeout=HTTP_TIMEOUT + 5))
            errors = [self.outcomes_of(sched, u)[-1] for u in uids]
            self.assertEqual({o.result for o in errors}, {"bind-error"})
            lost += [(rnd, o.pod, o.error) for o in errors if "troupe is stopping" not in o.error]
            self.assert_nothing_bound(group, members + 1)
            # The next round starts clean: this gang would wait ahead of it.
            for i in range(members + 1):
                self.srv.delete("pods", NS, member_name(group, i))
            self.srv.delete("podgroups", NS, group)
        self.assertEqual(lost[:3], [], f"{len(lost)} of {3 * members} held binds got no answer "
                         "when troupe stopped (the connection was closed instead)")

    def test_e4_a_restart_after_a_gang_bound_rebuilds_its_holdings(self):
        """A bound gang survives troupe's restart: the new troupe rebuilds each
        member's node and devices from the API server (spec.nodeName and
        troupe.io/gpu-ids, design.md: no lost state), holds no reservation for
        it, and places the next gang only on what the first left free."""
        self.add_nodes(6)
        t = self.start_troupe()
        pods, on = self.schedule_whole_gang(t, "rb", 4, seed=6)
        uids = {pods[i]["metadata"]["uid"]: i for i in range(4)}
        wait_until(lambda: sum(1 for p in t.cache()["pods"]
                               if p["uid"] in uids and p["state"] == "bound") == 4,
                   10, "troupe saw the four members bound")
        before = {p["uid"]: (p["node"], p["devices"]) for p in t.cache()["pods"]
                  if p["uid"] in uids}
        # troupe dies (no clean stop) and comes back.
        t.proc.kill()
        t.proc.wait()
        t.stop(check=False)
        t2 = self.start_troupe()
        assert_converges(self, t2, self.srv)
        members = {p["uid"]: p for p in t2.cache()["pods"] if p["uid"] in uids}
        self.assertEqual(sorted(members), sorted(uids), "every member known after restart")
        for uid, p in members.items():
            self.assertEqual(p["state"], "bound", p)
            self.assertEqual(p["node"], on[uids[uid]], p)
            self.assertEqual((p["node"], p["devices"]), before[uid],
                             "the same devices as before the restart")
            self.assertEqual(len(p["devices"].split(",")), 8, p)
        self.assertEqual(self.reservations(t2), [])
        free = self.free_gpus(t2)
        self.assertEqual({n for n, f in free.items() if f == 8},
                         set(free) - set(on.values()), "only the gang's nodes are full")
        # The next gang fits only on the two nodes left.
        _, on2 = self.schedule_whole_gang(t2, "rc", 2, seed=7)
        self.assertEqual(set(on2.values()) & set(on.values()), set(),
                         "the second gang landed on the first one's nodes")
        assert_converges(self, t2, self.srv)
        assert_no_device_twice(self, t2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
