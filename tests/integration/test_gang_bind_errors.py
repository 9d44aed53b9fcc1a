"""Gang admission when the API server rejects a Binding after quorum: 500 (d1),
403 (d2) and 429 three times (d3) are retried by troupe; one refused on every
post fails only that member, at the held request's deadline (d4).

The helpers and what troupe promises are in gang_common.py.
"""
import re
import unittest

from gang_common import HTTP_TIMEOUT, NS, CacheMonitor, GangCase
from live_common import assert_converges, assert_no_device_twice, wait_until


class GangTest(GangCase):
    # ---- d. the API server rejects a binding after quorum ----------------------------------

    def run_rejected_binding(self, status, count, path="/binding", deadline_s=30):
        """A gang of 4 x 8 GPUs on 6 nodes; the API server answers the next
        <count> matching Binding posts with <status>. The gang must end fully
        bound with no node double-booked; returns (scheduler, troupe)."""
        self.add_nodes(6)
        pods = self.create_gang("rej", 4, 8, min_member=4)
        t = self.start_troupe()
        self.wait_cache_sees(t, pods.values(), ["rej"])
        uids = {p["metadata"]["uid"] for p in pods.values()}
        self.srv.fail_next(count, status, path_contains=path)
        sched = self.scheduler(t, seed=2)
        for i in range(4):
            sched.add_pod(pods[i])
        with CacheMonitor(t, {"rej": uids}) as mon:
            try:
                sched.run(deadline_s=deadline_s)
            except TimeoutError:
                pass
        self.assertEqual(mon.double, [], "a device was held twice")
        self.assertGreaterEqual(mon.samples, 2, "the cache was watched during the run")
        rejected = [r for r in self.srv.requests if "/binding" in r[1] and r[2] == status]
        self.assertEqual(len(rejected), count, f"{count} Binding posts answered {status}")
        stuck = {o.pod: o.error for o in sched.outcomes if o.result != "bound"
                 and o.pod not in sched.bound()}
        self.assertEqual(len(sched.bound()), 4, f"not bound after {deadline_s} s: {stuck}")
        on = self.assert_gang_bound("rej", 4, 8)
        for uid, node_name in sched.bound().items():
            name = next(p["metadata"]["name"] for p in pods.values()
                        if p["metadata"]["uid"] == uid)
            self.assertEqual(self.server_pod(name)["spec"]["nodeName"], node_name)
        self.assertEqual(len(set(on.values())), 4)
        assert_converges(self, t, self.srv)
        assert_no_device_twice(self, t)
        self.assertEqual(self.reservations(t), [])
        return sched, t

    def test_d1_a_binding_failing_with_500_after_quorum(self):
        """At quorum every held bind posts its Binding. A 500 does not say
        whether the binding was committed, so troupe posts the same Binding
        again itself (the UID precondition makes that safe) and the member's
        bind succeeds without kube-scheduler seeing an error."""
        sched, t = self.run_rejected_binding(500, 1)
        failed = [o for o in sched.outcomes if o.result == "bind-error"]
        self.assertEqual(failed, [], "troupe re-posted the Binding itself")
        self.assertRegex(t.log(), r"gang member ml/rej-\d+ -> node \S+: posting again")

    def test_d2_a_binding_refused_403_after_quorum_is_retried_by_troupe(self):
        """A refusal (403, as an admission webhook denying the binding answers)
        after quorum: troupe keeps the member's devices and posts the Binding
        again after a backoff, so the gang is never left partly bound and
        kube-scheduler sees no error. (Before that was built, the member's
        bind failed, its devices were released and kube-scheduler retried it
        with a one-member plan; that fails this test.)"""
        sched, t = self.run_rejected_binding(403, 1)
        failed = [o for o in sched.outcomes if o.result == "bind-error"]
        self.assertEqual(failed, [], "troupe re-posted the refused Binding itself")
        self.assertRegex(t.log(), r"gang member ml/rej-\d+ -> node \S+: posting again in \d+ ms")
        self.assertNotRegex(t.log(), rf"gang {NS}/rej: 1 members x 8 GPUs planned")

    def test_d3_a_binding_throttled_429_three_times_is_retried_and_completes(self):
        """The API server throttles one member's Binding (429 Too Many
        Requests: the request was not processed) three times running; troupe
        posts it again after the Retry-After the server sends (1 s, longer than
        its own first backoffs) until it is accepted."""
        sched, t = self.run_rejected_binding(429, 3, path="/pods/rej-0/binding", deadline_s=15)
        self.assertGreaterEqual(len(re.findall(r"gang member ml/rej-0 -> node \S+: posting again "
                                               r"in 1000 ms as its Retry-After says",
                                               t.log())), 3, t.log()[-3000:])

    def test_d4_a_binding_refused_until_the_http_timeout_fails_that_member_only(self):
        """A member's Binding is refused on every post. troupe retries it until
        the held request must be answered (scheduler_http_timeout - margin =
        8 s), then fails that bind and releases its devices - never earlier,
        and never by troupe's choice while a retry could still succeed. Once
        the API server accepts it again, kube-scheduler's retry completes the
        gang."""
        self.add_nodes(6)
        pods = self.create_gang("ref", 4, 8, min_member=4, timeout_s=60)
        t = self.start_troupe()
        self.wait_cache_sees(t, pods.values(), ["ref"])
        uids = {p["metadata"]["uid"] for p in pods.values()}
        self.srv.fail_next(10000, 403, path_contains="/pods/ref-0/binding",
                           message="denied by webhook deny-ref-0")
        sched = self.scheduler(t, seed=5)
        for i in range(4):
            sched.add_pod(pods[i])
        with CacheMonitor(t, {"ref": uids}) as mon:
            self.drive_until(sched, lambda: any(o.result == "bind-error" for o in sched.outcomes),
                             HTTP_TIMEOUT + 5, "ref-0's bind to fail")
            first = next(o for o in sched.outcomes if o.result == "bind-error")
            self.assertEqual(first.pod, pods[0]["metadata"]["uid"])
            self.assertIn("403", first.error)
            self.assertIn("deny-ref-0", first.error)
            posts = [r for r in self.srv.requests if "/pods/ref-0/binding" in r[1]]
            self.assertGreaterEqual(len(posts), 4, "troupe retried before giving up")
            self.assertEqual(len(sched.bound()), 3, "the other members are bound")
            wait_until(lambda: not any(p["uid"] == pods[0]["metadata"]["uid"]
                                       and p["state"] == "assumed" for p in t.cache()["pods"]),
                       5, "ref-0's devices released after the final refusal")
            self.srv.clear_faults()
            sched.run(deadline_s=30)
        self.assertEqual(mon.double, [], "a device was held twice")
        self.assertGreaterEqual(mon.samples, 2, "the cache was watched during the run")
        self.assertEqual(len(sched.bound()), 4)
        self.assert_gang_bound("ref", 4, 8)
        assert_converges(self, t, self.srv)
        assert_no_device_twice(self, t)
        self.assertEqual(self.reservations(t), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
