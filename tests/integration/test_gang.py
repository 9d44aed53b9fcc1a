"""Gang admission end to end: the real troupe against the test API server,
driven by schedclient.Scheduler as kube-scheduler drives it (one scheduling
cycle at a time, every bind in its own thread, backoff and requeue after
errors).

What troupe promises (docs/architecture.md, design.md section 6): the first
member's filter plans and reserves the whole gang; members' binds are held
until the quorum is held or bound, then every binding is posted; a plan not
complete by the PodGroup's scheduleTimeoutSeconds (else
gang.default_timeout_seconds), or whose held binds would outlive
kube-scheduler's httpTimeout less gang.margin_seconds, is rolled back: the
held binds answered with an error and every reservation freed. A gang is
never left partly bound by troupe's choice.

Every case checks both sides: what the client saw and the API server's
objects, and that troupe's cache converges to the server.

  a   a 256-member gang of 8-GPU pods on 512 nodes binds completely
  b   two gangs that cannot both fit: one completes, the other holds nothing
      until the first is gone, then completes
  c   a gang missing a member waits; a member no node can take (NodeAffinity in
      the client) expires the plan at the group timeout (c2) or before the
      scheduler's httpTimeout (c3), releasing everything
  d   a Binding the API server rejects after quorum: 500 (d1), 403 (d2), 429
      three times (d3) are retried by troupe; one refused on every post fails
      only that member, at the held request's deadline (d4)
  e   troupe killed (e1) or stopped (e2, e3) while members are held
  f   a bind arriving after its plan expired
  g   a gang whose members ask different amounts (an 8-GPU leader, 4-GPU
      workers) and a CPU-only launcher kube-scheduler binds without troupe

Queue fairness (DRF) and starvation protection are not tested here.
"""
import re
import signal
import threading
import time
import unittest

from live_common import (FAST_CONFIG, LiveCase, assert_converges, assert_no_device_twice,
                         wait_until)
from schedclient import ExtenderConfig, Scheduler, gang_pod, pod_group

# Short gang timeouts: a plan lives 3 s unless its PodGroup names another
# timeout; held binds are answered 10 - 2 = 8 s after the first was held.
GANG_CONFIG = FAST_CONFIG + """
gang:
  default_timeout_seconds: 3
  scheduler_http_timeout_seconds: 10
  margin_seconds: 2
"""
HTTP_TIMEOUT = 10.0             # the client's extender httpTimeout, as troupe is told
# For the 256-member gang: 256 scheduling cycles of the Python client take 2-3 s
# (6 s under ThreadSanitizer), too close to the 8 s held-bind limit above; this
# case is about scale, so kube-scheduler's httpTimeout is 30 s there.
BIG_CONFIG = FAST_CONFIG + """
gang:
  default_timeout_seconds: 3
  scheduler_http_timeout_seconds: 30
  margin_seconds: 2
"""
NS = "ml"
RESERVATION_NS = "troupe-reservation"   # how /debug/cache shows a gang's reservations


def node(name, gpus=8, labels=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {})},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)},
                       "allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def member_name(group, i):
    return f"{group}-{i}"


def reservation_of(entry, group, ns=NS):
    """Whether a /debug/cache pod entry is a reservation of gang ns/group
    (keys are gang-reservation/<ns>/<group>/<generation>/<slot>)."""
    return entry["namespace"] == RESERVATION_NS and \
        entry["name"].startswith(f"gang-reservation/{ns}/{group}/")


def holds_devices(entry):
    return entry["devices"] != "" or entry["unattributed"] > 0


class CacheMonitor:
    """Polls troupe's /debug/cache while a test runs and records, at every
    sample: any device held twice on a node (reservations included) and what
    each gang held (reservations and assumed or bound members).

    /debug/cache walks the pod table stripe by stripe, so one answer is not an
    atomic snapshot: a reservation handed to its member (one step in troupe)
    can show in both entries when the walk passes the reservation before the
    hand-over and the member after it. A device counts as held twice only when
    the same pair of holders shows in two consecutive samples."""

    def __init__(self, troupe, groups, interval=0.02):
        self.troupe = troupe
        self.groups = groups            # group -> set of member uids
        self.interval = interval
        self.double = []
        self._last_pairs = set()
        self.held = {g: [] for g in groups}     # group -> [(time, what)]
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self._stop.set()
        self._thread.join(10)

    def sample(self):
        try:
            cache = self.troupe.cache()
        except (OSError, AssertionError):
            return
        self.samples += 1
        seen, pairs = {}, set()
        now = time.monotonic()
        for p in cache["pods"]:
            for d in filter(None, p["devices"].split(",")):
                key = (p["node"], d)
                if key in seen:
                    pair = (key, seen[key], p["uid"])
                    pairs.add(pair)
                    if pair in self._last_pairs:
                        self.double.append(pair)
                seen[key] = p["uid"]
            for g, uids in self.groups.items():
                if reservation_of(p, g) or (p["uid"] in uids and holds_devices(p)):
                    self.held[g].append((now, p["uid"], p["node"], p["devices"]))
        self._last_pairs = pairs

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)


class GangTest(LiveCase):
    # ---- helpers --------------------------------------------------------------

    def start_troupe(self, config=GANG_CONFIG):
        t = self.start_live(config)
        wait_until(lambda: t.request("GET", "/readyz")[0] == 200, 30, "troupe ready")
        return t

    def add_nodes(self, n, gpus=8, prefix="gpu", labels=None):
        names = []
        for i in range(n):
            name = f"{prefix}-{i:03d}"
            self.srv.create("nodes", node(name, gpus, labels))
            names.append(name)
        return names

    def create_gang(self, group, n, gpus, min_member=None, timeout_s=None, members=None,
                    **pod_kw):
        """The PodGroup (unless min_member is None) and pods 0..n-1 of <group>
        (or only those in <members>); returns {i: server pod}."""
        if min_member is not None:
            self.srv.create("podgroups", pod_group(NS, group, min_member, timeout_s))
        pods = {}
        for i in (members if members is not None else range(n)):
            pods[i] = self.create_member(group, i, gpus, **pod_kw)
        return pods

    def create_member(self, group, i, gpus, **pod_kw):
        p = gang_pod(NS, member_name(group, i), None, gpus, group, **pod_kw)
        del p["metadata"]["uid"]        # the server assigns it
        return self.srv.create("pods", p)

    def wait_cache_sees(self, t, pods, groups=()):
        """troupe's cache has every pod (from the watch) and pod group."""
        want = {p["metadata"]["uid"] for p in pods}

        def seen():
            c = t.cache()
            have = {p["uid"] for p in c["pods"] if p["fromAPI"]}
            pgs = {g["name"] for g in c["podGroups"]}
            return want <= have and set(groups) <= pgs
        wait_until(seen, 20, "troupe's cache to see the gang")

    def scheduler(self, t, ext=None, **kw):
        kw.setdefault("percentage_of_nodes_to_score", 100)
        kw.setdefault("time_scale", 0.05)       # backoff 50 ms doubling to 0.5 s
        ext = ext or ExtenderConfig(http_timeout=HTTP_TIMEOUT)
        s = Scheduler(t.host, t.port, {"items": self.srv.list("nodes")}, ext=ext, **kw)
        self.addCleanup(s.close)
        return s

    def server_pod(self, name):
        return self.srv.get("pods", NS, name)

    def server_nodes_of(self, group, n):
        return {i: (self.server_pod(member_name(group, i)) or {}).get("spec", {}).get("nodeName")
                for i in range(n)}

    def bindings_for(self, names):
        names = set(names)
        return [b for b in self.srv.bindings if b.get("metadata", {}).get("name") in names]

    def assert_gang_bound(self, group, n, gpus):
        """Every member bound on the server, no node with two members, each
        member's troupe.io/gpu-ids naming <gpus> devices."""
        on = self.server_nodes_of(group, n)
        unbound = sorted(i for i, node_name in on.items() if not node_name)
        self.assertEqual(unbound, [], f"gang {group}: members without spec.nodeName")
        per_node = {}
        for i, node_name in on.items():
            per_node.setdefault(node_name, []).append(i)
        shared = {k: v for k, v in per_node.items() if len(v) > 1}
        self.assertEqual(shared, {}, f"gang {group}: nodes with two members")
        for i in range(n):
            ann = self.server_pod(member_name(group, i))["metadata"].get("annotations", {})
            ids = ann.get("troupe.io/gpu-ids", "")
            self.assertEqual(len([d for d in ids.split(",") if d]), gpus,
                             f"{member_name(group, i)}: troupe.io/gpu-ids={ids!r}")
        return on

    def assert_nothing_bound(self, group, n):
        on = self.server_nodes_of(group, n)
        self.assertEqual({i: v for i, v in on.items() if v}, {},
                         f"gang {group}: members bound on the server")

    def reservations(self, t, group=None):
        return [p for p in t.cache()["pods"] if p["namespace"] == RESERVATION_NS and
                (group is None or reservation_of(p, group))]

    def free_gpus(self, t):
        return {n["name"]: n["gpuFree"] for n in t.state()["nodes"]}

    def metrics(self, t):
        s, _, body = t.request("GET", "/metrics")
        self.assertEqual(s, 200)
        out = {}
        for line in body.splitlines():
            m = re.match(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", line)
            if m:
                out[m.group(1)] = float(m.group(2))
        return out

    def drive_until(self, sched, cond, timeout, what):
        """Run scheduling cycles until cond() holds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return
            if sched.schedule_one() is None:
                time.sleep(0.005)
        seen = {}
        for o in sched.outcomes:
            key = (o.result, o.error or next(iter(o.reasons.values()), ""))
            seen[key] = seen.get(key, 0) + 1
        self.fail(f"timed out driving the scheduler until {what}; outcomes: {seen}")

    def schedule_whole_gang(self, t, group, n, seed):
        """Create gang <group> of <n> 8-GPU members (quorum n), schedule it
        through <t> and check it bound completely; returns (pods, nodes)."""
        pods = self.create_gang(group, n, 8, min_member=n, timeout_s=60)
        self.wait_cache_sees(t, pods.values(), [group])
        sched = self.scheduler(t, seed=seed)
        for i in range(n):
            sched.add_pod(pods[i])
        sched.run(deadline_s=30)
        self.assertEqual(len(sched.bound()), n)
        return pods, self.assert_gang_bound(group, n, 8)

    def outcomes_of(self, sched, uid):
        return [o for o in sched.outcomes if o.pod == uid]

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
