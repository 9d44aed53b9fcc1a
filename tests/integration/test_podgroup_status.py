"""PodGroup status (src/cache/podgroup_status.c): the real troupe against the
test API server keeps a scheduling.x-k8s.io PodGroup's status as
scheduler-plugins' PodGroup controller does, through the status subresource.

  a  a gang bound: status scheduled 3 and phase Scheduling (bound, not yet
     running), then Running once the pods run, then Finished; scheduleStartTime
     set once; nothing written while nothing changes
  b  another writer changes the PodGroup just before each of troupe's first two
     writes (a real 409 each time): troupe reads it again and succeeds
  c  a PodGroup that changes under every attempt: troupe gives up after its
     bounded retries, says so, and writes at a later pass once it settles
  d  pods naming an upstream scheduling.k8s.io PodGroup (spec.schedulingGroup):
     nothing is written for them, and scheduling.k8s.io is never called
  e  "patch podgroups/status" denied: troupe warns, stays ready, writes nothing
  f  gang.write_status: false writes nothing
  g  a CRD whose schema prunes status.scheduled (scheduler-plugins' own):
     troupe notices from the answer and stops writing it, instead of writing
     the same status again every pass
"""
import time
import unittest

from fake_podgroup_status import StatusWrites
from gang_common import NS, GangCase
from live_common import FAST_CONFIG, wait_until
from schedclient import gang_pod

INTERVAL_S = 1
CONFIG = FAST_CONFIG + f"""
gang:
  default_timeout_seconds: 30
  scheduler_http_timeout_seconds: 10
  margin_seconds: 2
  status_interval_seconds: {INTERVAL_S}
"""
STATUS_PATH = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/%s/podgroups/%s/status"


class PodGroupStatusTest(GangCase):
    def setUp(self):
        super().setUp()
        self.writes = StatusWrites(self.srv)

    def status_of(self, group):
        return (self.srv.get("podgroups", NS, group) or {}).get("status") or {}

    def wait_status(self, group, what, timeout=20, **want):
        def ok():
            st = self.status_of(group)
            return all(st.get(k) == v for k, v in want.items()) and st
        return wait_until(ok, timeout, f"PodGroup {group}: {what} (status now "
                          f"{self.status_of(group)})")

    def set_phase(self, pods, phase):
        for p in pods:
            self.srv.patch("pods", NS, p["metadata"]["name"], {"status": {"phase": phase}})

    def patches(self, group):
        return [r for r in self.srv.requests
                if r[0] == "PATCH" and r[1].startswith(STATUS_PATH % (NS, group))]

    def test_a_gang_bound_then_running_then_finished(self):
        self.add_nodes(4)
        t = self.start_troupe(CONFIG)
        pods, _ = self.schedule_whole_gang(t, "ga", 3, seed=1)
        st = self.wait_status("ga", "scheduled 3, Scheduling", phase="Scheduling", scheduled=3,
                              running=0, succeeded=0, failed=0)
        start = st.get("scheduleStartTime")
        self.assertRegex(start or "", r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.set_phase(pods.values(), "Running")
        self.wait_status("ga", "Running", phase="Running", running=3, scheduled=3)
        self.assertEqual(self.status_of("ga")["scheduleStartTime"], start,
                         "scheduleStartTime is set once")
        # Nothing changes: nothing is written (three passes' worth).
        n = len(self.patches("ga"))
        time.sleep(3 * INTERVAL_S + 0.5)
        self.assertEqual(len(self.patches("ga")), n, "a write with nothing changed")
        self.set_phase(pods.values(), "Succeeded")
        self.wait_status("ga", "Finished", phase="Finished", succeeded=3, running=0)
        # Every write went to the status subresource as a merge patch carrying
        # the resourceVersion read, and each one was accepted.
        for method, ns, name, body in self.writes.podgroup_writes(NS, "ga"):
            self.assertEqual(method, "PATCH")
            self.assertTrue(body["metadata"]["resourceVersion"], body)
            self.assertEqual(set(body), {"metadata", "status"}, body)
        self.assertTrue(all(r[2] == 200 for r in self.patches("ga")), self.patches("ga"))
        self.assertRegex(t.log(), r"pod group ml/ga: status .* -> Running \(scheduled 3, "
                         r"running 3, succeeded 0, failed 0\)")

    def test_b_conflicts_are_read_again_and_retried(self):
        self.add_nodes(2)
        t = self.start_troupe(CONFIG)
        self.writes.race_next(2)
        self.create_gang("gb", 2, 8, min_member=2)
        self.wait_status("gb", "Scheduling after two conflicts", phase="Scheduling",
                         scheduled=0)
        codes = [r[2] for r in self.patches("gb")]
        self.assertEqual(codes[:3], [409, 409, 200], codes)
        self.assertEqual(self.writes.raced, 2)
        pg = self.srv.get("podgroups", NS, "gb")
        self.assertEqual(pg["metadata"]["annotations"]["test.troupe.io/concurrent-writer"], "2",
                         "the concurrent writer's change is kept (a merge patch of status)")
        reads = [r for r in self.srv.requests
                 if r[0] == "GET" and r[1].startswith(STATUS_PATH % (NS, "gb"))]
        self.assertGreaterEqual(len(reads), 2, "each 409 is followed by a fresh read")
        self.assertEqual(t.request("GET", "/readyz")[0], 200)

    def test_c_retries_are_bounded(self):
        self.add_nodes(2)
        t = self.start_troupe(CONFIG)
        self.writes.race_next(1000)
        self.create_gang("gc", 2, 8, min_member=2)
        wait_until(lambda: "changed under every one of 6 attempts" in t.log(), 20,
                   "troupe to give up after its retries")
        first = len(self.patches("gc"))
        self.assertGreaterEqual(first, 6)
        self.writes.race_next(0)
        self.wait_status("gc", "written once it settles", phase="Scheduling")
        # The fake API server applies a patch before it records the request:
        # the 200 may show a moment after the status does.
        wait_until(lambda: self.patches("gc")[-1][2] == 200, 10, "the last patch answered 200")

    def test_d_upstream_scheduling_k8s_io_group_gets_no_write(self):
        self.add_nodes(2)
        t = self.start_troupe(CONFIG)
        upstream = []
        for i in range(2):
            p = gang_pod(NS, f"up-{i}", None, 8, "unused")
            del p["metadata"]["uid"]
            del p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
            p["spec"]["schedulingGroup"] = {"podGroupName": "up"}
            upstream.append(self.srv.create("pods", p))
        self.wait_cache_sees(t, upstream)
        # A scheduling.x-k8s.io group beside it, so a pass is known to have run.
        self.create_gang("gd", 2, 8, min_member=2)
        self.wait_status("gd", "written", phase="Scheduling")
        time.sleep(2 * INTERVAL_S + 0.5)
        names = {w[2] for w in self.writes.podgroup_writes()}
        self.assertEqual(names, {"gd"})
        # troupe reads upstream PodGroups (their quorum), never writes one.
        self.assertEqual([r for r in self.srv.requests
                          if "scheduling.k8s.io" in r[1] and r[0] != "GET"], [])

    def test_e_permission_denied_warns_and_stays_ready(self):
        self.srv.deny("patch", "podgroups", group="scheduling.x-k8s.io", subresource="status")
        self.add_nodes(2)
        t = self.start_troupe(CONFIG)
        self.create_gang("ge", 2, 8, min_member=2)
        wait_until(lambda: "missing permission: patch podgroups/status" in t.log(), 20,
                   "the warning about the missing permission")
        wait_until(lambda: "needs \"patch\" on podgroups/status" in t.log(), 20,
                   "the refused write's warning")
        self.assertEqual(t.request("GET", "/readyz")[0], 200, "readiness does not depend on it")
        self.assertEqual(self.status_of("ge"), {})
        self.assertEqual({r[2] for r in self.patches("ge")}, {403})

    def test_f_write_status_off_writes_nothing(self):
        self.add_nodes(2)
        t = self.start_troupe(CONFIG + "  write_status: false\n")
        self.create_gang("gf", 2, 8, min_member=2)
        self.wait_cache_sees(t, [], ["gf"])
        time.sleep(3 * INTERVAL_S + 0.5)
        self.assertEqual(self.writes.podgroup_writes(), [])
        self.assertNotIn("writing scheduling.x-k8s.io PodGroup status", t.log())

    def test_g_a_crd_without_status_scheduled(self):
        self.writes.prune = {"scheduled"}
        self.add_nodes(4)
        t = self.start_troupe(CONFIG)
        pods, _ = self.schedule_whole_gang(t, "gg", 3, seed=3)
        self.set_phase(pods.values(), "Running")
        st = self.wait_status("gg", "Running", phase="Running", running=3)
        self.assertNotIn("scheduled", st)
        wait_until(lambda: "does not keep status.scheduled" in t.log(), 10, "the notice")
        n = len(self.patches("gg"))
        time.sleep(3 * INTERVAL_S + 0.5)
        self.assertEqual(len(self.patches("gg")), n, "the same status written again")


if __name__ == "__main__":
    unittest.main()
