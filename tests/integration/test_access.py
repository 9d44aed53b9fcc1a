"""troupe's readiness against the test API server: it names every permission
it lacks (from its SelfSubjectAccessReviews and from 403s) and is unready while
one is missing, and it is unready while it cannot reach the API server, but
never because a watch simply ended. Filter keeps answering from the cache
meanwhile."""
import threading
import time
import unittest

from live_common import FAST_CONFIG, LiveCase, load_fixture_cluster, wait_until
from schedclient import gpu_pod

# Permissions are re-checked every second here (default 60).
CONFIG = FAST_CONFIG + "  access_check_seconds: 1\n"
USER = "system:serviceaccount:kube-system:troupe"
PG_GROUP = "scheduling.x-k8s.io"

# The ClusterRole's rules (config/deploy/rbac.yaml), each removable on its own:
# (resource, group, subresource, verbs).
RULES = [
    ("nodes", "", "", ("list", "watch")),
    ("pods", "", "", ("list", "watch")),
    ("pods", "", "binding", ("create",)),
    ("podgroups", PG_GROUP, "", ("list", "watch")),
    ("pods", "", "", ("delete",)),      # rolling back a gang left partly bound
]
# The event recorder's optional permissions (ClusterRole troupe-events), reviewed
# once at start by the recorder itself; missing, troupe only warns.
OPTIONAL_RULES = [
    ("events", "events.k8s.io", "", ("create", "patch")),
]


def perm_name(verb, resource, subresource=""):
    return f"{verb} {resource}" + (f"/{subresource}" if subresource else "")


def missing_line(verb, resource, group, subresource=""):
    return (f'missing permission: {perm_name(verb, resource, subresource)} (group "{group}"): '
            f"add it to troupe's ClusterRole (config/deploy/rbac.yaml)")


class AccessTest(LiveCase):
    def setUp(self):
        super().setUp()
        load_fixture_cluster(self.srv)

    def start(self, config=CONFIG):
        return self.start_live(config)

    @staticmethod
    def readyz(t):
        s, _, body = t.request("GET", "/readyz")
        return s, body

    def wait_readyz(self, t, status, body=None, timeout=10):
        def ok():
            got = self.readyz(t)
            return got[0] == status and (body is None or got[1] == body)
        try:
            wait_until(ok, timeout, f"/readyz {status} {body}")
        except AssertionError:
            self.fail(f"/readyz is {self.readyz(t)}, not {status} {body}\n"
                      f"--- troupe log ---\n{t.log()[-4000:]}")
        return self.readyz(t)[1]

    def wait_log(self, t, text, timeout=10):
        try:
            wait_until(lambda: text in t.log(), timeout, repr(text))
        except AssertionError:
            self.fail(f"troupe never logged {text!r}\n--- troupe log ---\n{t.log()[-4000:]}")

    def metric(self, t, name):
        return t.metric(name)

    def filter_passes(self, t):
        """Filter still answers from the cache: a 1-GPU pod fits an idle node."""
        pod = gpu_pod("ml", "probe", None, 1)
        s, _, f = t.request("POST", "/filter", {"Pod": pod, "Nodes": None,
                                                "NodeNames": ["gpu-a100-1"]})
        self.assertEqual((s, f["Error"], f["NodeNames"]), (200, "", ["gpu-a100-1"]), f)

    # ---- permissions ----------------------------------------------------------

    def test_each_missing_rule_is_named_and_makes_troupe_unready(self):
        t = self.start()
        self.wait_readyz(t, 200)
        for resource, group, sub, verbs in RULES:
            with self.subTest(rule=(resource, group, sub)):
                for verb in verbs:
                    self.srv.deny(verb, resource, group, sub)
                names = [perm_name(v, resource, sub) for v in verbs]
                for verb in verbs:
                    self.wait_log(t, missing_line(verb, resource, group, sub))
                self.wait_readyz(t, 503, {"status": "forbidden", "missing": names})
                self.assertEqual(self.metric(t, "troupe_ready"), 0)
                self.assertEqual(self.metric(t, "troupe_permissions_missing"), len(verbs))
                self.filter_passes(t)
                for verb in verbs:
                    self.srv.allow(verb, resource, group, sub)
                self.wait_readyz(t, 200, {"status": "ready"})
                for verb in verbs:
                    self.assertIn(f'permission granted again: {perm_name(verb, resource, sub)} '
                                  f'(group "{group}")', t.log())
                self.assertEqual(self.metric(t, "troupe_ready"), 1)
        self.assertEqual(t.log().count("troupe is ready again"), len(RULES))

    def test_a_denial_is_logged_once_while_it_lasts(self):
        self.srv.deny("create", "pods", subresource="binding", requests=False)
        t = self.start()
        line = missing_line("create", "pods", "", "binding")
        self.wait_log(t, line)
        self.assertIn(" error [informer] " + line, t.log(), "logged at error level")
        wait_until(lambda: sum(1 for a in self.srv.access_reviews
                               if a.get("subresource") == "binding") >= 4, 10,
                   "four rounds of reviews")
        self.assertEqual(t.log().count(line), 1, t.log())
        self.assertEqual(t.log().count("troupe is not ready: missing permission: "
                                       "create pods/binding"), 1)
        # The server counts a review as it answers it; troupe counts the
        # denial once it has read the answer, a moment later.
        wait_until(lambda: self.metric(t, "troupe_permission_denials_total") >= 4, 5,
                   "troupe to count the four denials")
        self.assertEqual(self.readyz(t), (503, {"status": "forbidden",
                                                "missing": ["create pods/binding"]}))

    def test_reviews_name_verb_group_resource_and_subresource(self):
        t = self.start(FAST_CONFIG)        # the default period: one round at start
        self.wait_readyz(t, 200)
        wait_until(lambda: len(self.srv.access_reviews) >= 10, 5, "the first round")
        got = sorted((a["verb"], a.get("group", ""), a["resource"], a.get("subresource", ""))
                     for a in self.srv.access_reviews)
        want = sorted((v, g, r, s) for r, g, s, verbs in RULES + OPTIONAL_RULES for v in verbs)
        self.assertEqual(got, want, "one review per permission, nothing else asked")

    def test_forbidden_list_is_logged_and_unready_until_it_succeeds(self):
        # The rule is gone but the reviews still say yes (another authorizer, a
        # stale cache): the 403 alone must tell.
        self.srv.deny("list", "pods", reviews=False)
        t = self.start()
        self.wait_log(t, 'list pods: forbidden (403): pods is forbidden: User "%s" cannot '
                         'list resource "pods" in API group "" at the cluster scope' % USER)
        self.wait_readyz(t, 503, {"status": "forbidden", "missing": ["list pods"]})
        self.srv.allow("list", "pods")
        self.wait_readyz(t, 200, {"status": "ready"})
        self.assertIn("list pods: allowed again", t.log())

    def test_forbidden_watch_is_logged_and_unready_until_it_succeeds(self):
        t = self.start()
        self.wait_readyz(t, 200)
        self.srv.deny("watch", "nodes", reviews=False)
        self.srv.cut_watches("nodes", mid_event=False, abrupt=False)
        self.wait_log(t, 'watch nodes: forbidden (403): nodes is forbidden: User "%s" cannot '
                         'watch resource "nodes" in API group "" at the cluster scope' % USER)
        self.wait_readyz(t, 503, {"status": "forbidden", "missing": ["watch nodes"]})
        self.filter_passes(t)
        self.srv.allow("watch", "nodes")
        self.wait_readyz(t, 200, {"status": "ready"})

    def test_podgroups_permission_counts_without_the_crd(self):
        # Without the permission the API server answers 403 even where the CRD
        # is absent: troupe is unready (it would mis-size gangs if it ignored
        # PodGroups it cannot see); with it, the 404 means "no CRD", ready.
        self.srv.podgroups_crd = False
        self.srv.deny("list", "podgroups", PG_GROUP, reviews=False)
        t = self.start()
        self.wait_readyz(t, 503, {"status": "forbidden", "missing": ["list podgroups"]})
        self.srv.allow("list", "podgroups", PG_GROUP)
        self.wait_readyz(t, 200, {"status": "ready"})
        self.assertIn("scheduler-plugins PodGroups (scheduling.x-k8s.io/v1alpha1) are not "
                      "served here", t.log())

    def test_other_schedulers_objects_never_hold_readiness(self):
        # Kubernetes', Volcano's and KAI's PodGroups and Queues are optional:
        # the test server serves none (404, said once each), a 403 on one (its
        # role not granted) is one warning, and an API answering 500 (KAI's
        # here) is retried and logged: none is a reason to be unready.
        self.srv.deny("list", "podgroups", "scheduling.volcano.sh", reviews=False)
        self.srv.fail_next(100000, 500, path_contains="/apis/scheduling.run.ai/")
        t = self.start()
        self.wait_readyz(t, 200, {"status": "ready"})
        said = "Volcano PodGroups (scheduling.volcano.sh/v1beta1): troupe may not list them (403)"
        self.wait_log(t, said)
        self.wait_log(t, "podgroups.scheduling.run.ai: list answered HTTP 500")
        # Several retries (api.podgroup_retry_seconds: 1), ready throughout.
        for _ in range(6):
            self.assertEqual(self.readyz(t), (200, {"status": "ready"}))
            time.sleep(0.5)
        log = t.log()
        self.assertEqual(log.count(said), 1, log)
        for what in ("Kubernetes PodGroups (scheduling.k8s.io/v1beta1)",
                     "Volcano Queues (scheduling.volcano.sh/v1beta1)"):
            self.assertEqual(log.count("%s are not served here" % what), 1, log)
        self.assertNotIn("missing permission", log)
        self.assertNotIn("troupe is not ready", log)
        self.filter_passes(t)

    def test_a_review_that_cannot_be_made_changes_nothing(self):
        self.srv.serve_access_reviews = False
        t = self.start()
        self.wait_readyz(t, 200, {"status": "ready"})
        self.wait_log(t, "(SelfSubjectAccessReview): HTTP 404: the server could not find the "
                         "requested resource; keeping what was known")
        self.assertIn(" warn  [informer] cannot check permission ", t.log())
        # A denial seen before stays while the reviews fail (5xx), and goes
        # once a review says yes again.
        self.srv.serve_access_reviews = True
        self.srv.deny("create", "pods", subresource="binding", requests=False)
        self.wait_readyz(t, 503, {"status": "forbidden", "missing": ["create pods/binding"]})
        self.srv.fail_next(1000, 500, path_contains="selfsubjectaccessreviews")
        self.srv.allow("create", "pods", subresource="binding")
        self.wait_log(t, "(SelfSubjectAccessReview): HTTP 500: Internal error occurred")
        end = time.monotonic() + 2.5       # two more rounds, all failing
        while time.monotonic() < end:
            self.assertEqual(self.readyz(t)[0], 503)
            time.sleep(0.1)
        self.srv.clear_faults()
        self.wait_readyz(t, 200, {"status": "ready"})

    # ---- the API server's availability -----------------------------------------

    def test_readiness_follows_the_api_server(self):
        t = self.start()
        self.wait_readyz(t, 200)
        self.srv.stop()
        t0 = time.monotonic()
        body = self.wait_readyz(t, 503, timeout=5)
        self.assertLess(time.monotonic() - t0, 3, "unready within a few seconds")
        self.assertEqual(body["status"], "api-unreachable", body)
        self.assertRegex(body["detail"], r"^(list|watch) (nodes|pods|podgroups): .*connect", body)
        self.assertIn("troupe is not ready: API server unreachable: ", t.log())
        self.assertEqual(self.metric(t, "troupe_ready"), 0)
        self.filter_passes(t)
        self.srv.start()
        self.wait_readyz(t, 200, {"status": "ready"})
        self.assertIn("troupe is ready again", t.log())
        # 5xx answers count the same as a refused connection.
        self.srv.fail_next(1, 503, path_contains="watch")
        self.srv.cut_watches("pods", mid_event=False, abrupt=False)
        wait_until(lambda: self.readyz(t)[1].get("detail", "").startswith(
            "watch pods: HTTP 503: "), 5, "a 503 watch")
        self.wait_readyz(t, 200, {"status": "ready"})

    def test_watches_ending_normally_never_flap_readiness(self):
        t = self.start()
        self.wait_readyz(t, 200)
        restarts = t.state()["informer"]["watchRestarts"]
        stop = threading.Event()

        def end_watches():
            # Watches end cleanly, as on the server's timeout: some after events
            # and over a second (resumed at once), some at once (after a short
            # backoff). Neither is a failure.
            i = 0
            while not stop.is_set():
                i += 1
                if i % 2:
                    self.srv.create("nodes", {"metadata": {"name": f"extra-{i}"},
                                              "status": {}})
                self.srv.cut_watches(None, abrupt=False)
                stop.wait(1.2 if i % 3 == 0 else 0.3)

        th = threading.Thread(target=end_watches)
        th.start()
        bad = []
        try:
            end = time.monotonic() + 5
            while time.monotonic() < end:
                s, body = self.readyz(t)
                if s != 200:
                    bad.append(body)
                time.sleep(0.005)
        finally:
            stop.set()
            th.join()
        self.assertEqual(bad, [], f"/readyz flapped\n--- troupe log ---\n{t.log()[-4000:]}")
        self.assertGreaterEqual(t.state()["informer"]["watchRestarts"] - restarts, 10,
                                "the watches did end and reconnect")
        self.assertNotIn("troupe is not ready", t.log())


if __name__ == "__main__":
    unittest.main()
