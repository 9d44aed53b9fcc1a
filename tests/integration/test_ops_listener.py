"""The ops listener: /debug/*, /metrics (and /healthz, /readyz, /version) on
their own address (--ops-address, ops.address), off the verbs' port; and with
ops.auth on, bearer tokens checked as Kubernetes components check theirs: a
TokenReview says who the caller is, a SubjectAccessReview whether it may get
the path; no or a bad token is 401, a user RBAC does not allow 403, each
refusal logged with the caller; answers are kept ops.auth_cache_seconds, so a
scraper costs the API server two reviews per period, not two per scrape."""
import http.client
import os
import socket
import subprocess
import tempfile
import threading
import unittest

from live_common import FAST_CONFIG, LiveCase, load_fixture_cluster, wait_until
from troupe_proc import Troupe, binary, fixture_cluster

PROTECTED = ("/debug/state", "/debug/cache", "/metrics")
OPEN = ("/healthz", "/readyz", "/version")

PROM = "system:serviceaccount:monitoring:prometheus"
PROM_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:monitoring",
               "system:authenticated"]
PROM_EXTRA = {"authentication.kubernetes.io/pod-name": ["prometheus-0"]}
AUTH_CONFIG = FAST_CONFIG + "ops:\n  auth: true\n"


def run(args, timeout=20):
    return subprocess.run([binary()] + args, capture_output=True, text=True, timeout=timeout)


def bearer(token):
    return {"Authorization": "Bearer " + token}


class OpsListenerTest(unittest.TestCase):
    """Without authentication (the default): the split of the two ports."""

    def test_debug_and_metrics_moved_off_the_verbs_port(self):
        with Troupe() as t:
            self.assertNotEqual(t.port, t.ops_port)
            for path in PROTECTED:
                s, _, body = t.request("GET", path)
                self.assertEqual(s, 404, f"verbs port still serves {path}")
                self.assertIn("no such endpoint", body["Error"])
                s, h, body = t.ops_request("GET", path)
                self.assertEqual(s, 200, (path, body))
            self.assertEqual(t.ops_request("GET", "/metrics")[1]["Content-Type"],
                             "text/plain; version=0.0.4")
            self.assertEqual(t.ops_request("GET", "/debug/state")[2]["stats"]["nodes"], 8)
            # Probes answer on both: kubelet may point at either port.
            for path in OPEN:
                self.assertEqual(t.request("GET", path)[0], 200, path)
                self.assertEqual(t.ops_request("GET", path)[0], 200, path)
            self.assertEqual(t.ops_request("GET", "/healthz")[2], {"status": "ok"})
            # The verbs are not on the ops port; only GET and HEAD are.
            self.assertEqual(t.ops_request("POST", "/filter", "{}")[0], 404)
            s, h, _ = t.ops_request("POST", "/metrics", "{}")
            self.assertEqual((s, h.get("Allow")), (405, "GET, HEAD"))
            self.assertEqual(t.ops_request("HEAD", "/debug/state")[0], 200)
            self.assertRegex(t.log(), r"ops listening on http://127\.0\.0\.1:%d " % t.ops_port)
            self.assertIn("open to anyone who reaches this address", t.log())

    def test_one_client_holding_connections_cannot_starve_the_probes(self):
        with Troupe() as t:
            idle = []
            try:
                for _ in range(16):     # the per-address limit
                    idle.append(socket.create_connection(("127.0.0.1", t.ops_port)))

                def healthz(source):
                    c = http.client.HTTPConnection("127.0.0.1", t.ops_port, timeout=10,
                                                   source_address=(source, 0))
                    try:
                        c.request("GET", "/healthz")
                        return c.getresponse().status
                    except (ConnectionError, http.client.HTTPException):
                        return None
                    finally:
                        c.close()
                # Another address (the kubelet's) is served; the greedy one is not.
                self.assertEqual(healthz("127.0.0.2"), 200)
                self.assertIsNone(healthz("127.0.0.1"))
            finally:
                for s in idle:
                    s.close()
            wait_until(lambda: t.ops_request("GET", "/healthz")[0] == 200, 10,
                       "served again once the connections closed")

    def test_ops_address_comes_from_the_file_unless_the_flag_is_given(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        # troupe_proc passes --ops-address 127.0.0.1:0 first; a later flag wins.
        with Troupe(config_text=f"ops:\n  address: 127.0.0.1:{port}\n") as t:
            self.assertNotEqual(t.ops_port, port, "the flag overrides the file")
        cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        with cfg:
            cfg.write(f"ops:\n  address: 127.0.0.1:{port}\n")
        self.addCleanup(os.unlink, cfg.name)
        p = subprocess.Popen([binary(), "--cluster", fixture_cluster(), "--listen",
                              "127.0.0.1:0", "--config", cfg.name],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            line = ""
            while "ops listening on" not in line:
                line = p.stderr.readline()
                self.assertNotEqual(line, "", "troupe exited before the ops line")
            self.assertIn(f"ops listening on http://127.0.0.1:{port} ", line)
        finally:
            p.terminate()
            p.wait(timeout=20)
            p.stderr.close()

    def test_bad_ops_settings_exit_2_and_a_taken_port_exits_1(self):
        cases = [
            (["--ops-address", "nohost"], "--ops-address: ops address \"nohost\" is not HOST:PORT"),
            (["--ops-address", "127.0.0.1:70000"], "is not HOST:PORT"),
        ]
        for args, text in cases:
            r = run(["--cluster", fixture_cluster()] + args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(text, r.stderr, args)
        for yaml, text in [("ops:\n  adress: x\n", 'unknown key "ops.adress"'),
                           ("ops:\n  address: 8889\n", "ops.address has the wrong type"),
                           ("ops:\n  auth: yes please\n", "ops.auth has the wrong type"),
                           ("ops:\n  auth_cache_seconds: 7200\n", "at most 3600"),
                           ("ops:\n  auth_cache_entries: 0\n", "1 to 65536")]:
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
                f.write(yaml)
            try:
                r = run(["--cluster", fixture_cluster(), "--config", f.name])
            finally:
                os.unlink(f.name)
            self.assertEqual(r.returncode, 2, yaml)
            self.assertIn(text, r.stderr, yaml)
        with Troupe() as first:
            r = run(["--cluster", fixture_cluster(), "--listen", "127.0.0.1:0",
                     "--ops-address", f"127.0.0.1:{first.ops_port}"])
            self.assertEqual(r.returncode, 1)
            self.assertIn(f"cannot listen on the ops address 127.0.0.1:{first.ops_port}",
                          r.stderr)
        # A snapshot has no API server to review tokens with.
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("ops:\n  auth: true\n")
        try:
            r = run(["--cluster", fixture_cluster(), "--listen", "127.0.0.1:0",
                     "--ops-address", "127.0.0.1:0", "--config", f.name])
        finally:
            os.unlink(f.name)
        self.assertEqual(r.returncode, 1)
        self.assertIn("ops.auth needs a live API server", r.stderr)

    def test_help_names_the_ops_flag(self):
        out = run(["--help"]).stdout
        self.assertIn("--ops-address HOST:PORT", out)
        self.assertIn("127.0.0.1:8889", out)


class OpsAuthTest(LiveCase):
    """ops.auth on, against the test API server's TokenReview and
    SubjectAccessReview."""

    def setUp(self):
        super().setUp()
        load_fixture_cluster(self.srv)
        self.srv.add_user("prom-token", PROM, uid="uid-prom", groups=PROM_GROUPS,
                          extra=PROM_EXTRA)
        self.srv.grant_path(PROM, "/metrics")
        self.srv.add_user("dev-token", "alice", groups=["debuggers", "system:authenticated"])
        self.srv.grant_path("debuggers", "/debug/*")
        self.srv.add_user("nobody-token", "mallory")

    def start(self, extra=""):
        t = self.start_live(AUTH_CONFIG + extra)
        wait_until(lambda: t.ops_request("GET", "/readyz")[0] == 200, 20, "troupe ready")
        self.assertIn("need a bearer token that TokenReview and SubjectAccessReview accept",
                      t.log())
        return t

    def reviews(self, token):
        with self.srv._lock:
            return self.srv.token_reviews.count(token)

    def access_reviews(self, user, path):
        with self.srv._lock:
            return sum(1 for s in self.srv.subject_access_reviews
                       if s.get("user") == user and
                       s.get("nonResourceAttributes", {}).get("path") == path)

    def test_probes_need_no_token(self):
        t = self.start()
        for path in OPEN:
            self.assertEqual(t.ops_request("GET", path)[0], 200, path)
        self.assertEqual(self.srv.token_reviews, [])

    def test_no_token_or_a_bad_one_is_401_and_logged(self):
        t = self.start()
        unauthorized = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Failure", "message": "Unauthorized",
                        "reason": "Unauthorized", "code": 401}
        for path in PROTECTED:
            s, h, body = t.ops_request("GET", path)
            self.assertEqual((s, body), (401, unauthorized), path)
            self.assertEqual(h.get("WWW-Authenticate"), 'Bearer realm="troupe"')
        self.assertRegex(t.log(), r"GET /metrics from 127\.0\.0\.1:\d+ refused \(401 "
                         r"Unauthorized\): no bearer token")
        s, _, _ = t.ops_request("GET", "/metrics", headers={"Authorization": "Basic YTpi"})
        self.assertEqual(s, 401)
        self.assertIn('the Authorization header is not "Bearer <token>"', t.log())
        self.assertEqual(self.srv.token_reviews, [], "nothing to review without a token")
        s, _, body = t.ops_request("GET", "/metrics", headers=bearer("stolen"))
        self.assertEqual((s, body), (401, unauthorized))
        self.assertEqual(self.srv.token_reviews, ["stolen"])
        self.assertRegex(t.log(), r"GET /metrics from 127\.0\.0\.1:\d+ refused \(401 "
                         r"Unauthorized\): the token is not accepted: invalid bearer token")
        self.assertEqual(self.srv.subject_access_reviews, [], "no user, no access review")

    def test_rbac_decides_who_gets_which_path(self):
        t = self.start()
        s, h, text = t.ops_request("GET", "/metrics", headers=bearer("prom-token"))
        self.assertEqual((s, h["Content-Type"]), (200, "text/plain; version=0.0.4"))
        self.assertIn("troupe_nodes 8", text)
        # The access review carries the whole user from the TokenReview.
        self.assertEqual(self.srv.subject_access_reviews[-1], {
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            "user": PROM, "uid": "uid-prom", "groups": PROM_GROUPS, "extra": PROM_EXTRA})
        s, _, body = t.ops_request("GET", "/debug/state", headers=bearer("prom-token"))
        self.assertEqual((s, body["reason"], body["code"]), (403, "Forbidden", 403))
        self.assertEqual(body["message"],
                         f'forbidden: User "{PROM}" cannot get path "/debug/state"')
        self.assertRegex(t.log(), r'GET /debug/state from 127\.0\.0\.1:\d+ by user "%s" '
                         r'refused \(403 Forbidden\)' % PROM)
        # A group's rule: alice may read /debug/*, not /metrics.
        for path in ("/debug/state", "/debug/cache"):
            self.assertEqual(t.ops_request("GET", path, headers=bearer("dev-token"))[0], 200)
        self.assertEqual(t.ops_request("GET", "/metrics", headers=bearer("dev-token"))[0], 403)
        # A valid token whose user nothing allows.
        for path in PROTECTED:
            s, _, body = t.ops_request("GET", path, headers=bearer("nobody-token"))
            self.assertEqual(s, 403, path)
            self.assertIn('User "mallory" cannot get path', body["message"])
        self.assertIn('by user "mallory" refused (403 Forbidden)', t.log())
        # The verbs' port still has neither, token or not.
        self.assertEqual(t.request("GET", "/metrics", headers=bearer("prom-token"))[0], 404)

    def test_answers_are_kept_so_scrapes_do_not_hammer_the_api_server(self):
        t = self.start()       # ops.auth_cache_seconds: 10 (the default)
        for _ in range(5):
            self.assertEqual(t.ops_request("GET", "/metrics", headers=bearer("prom-token"))[0],
                             200)
            self.assertEqual(t.ops_request("GET", "/metrics",
                                           headers=bearer("nobody-token"))[0], 403)
            self.assertEqual(t.ops_request("GET", "/metrics", headers=bearer("stolen"))[0], 401)
        self.assertEqual((self.reviews("prom-token"), self.access_reviews(PROM, "/metrics")),
                         (1, 1))
        self.assertEqual((self.reviews("nobody-token"), self.access_reviews("mallory",
                                                                            "/metrics")), (1, 1))
        self.assertEqual(self.reviews("stolen"), 1, "refusals are kept too")
        # Another path of the same user: the token's answer is reused, the
        # access review is new.
        t.ops_request("GET", "/debug/state", headers=bearer("prom-token"))
        self.assertEqual((self.reviews("prom-token"), self.access_reviews(PROM, "/debug/state")),
                         (1, 1))

    def test_without_a_cache_every_request_is_reviewed(self):
        t = self.start("  auth_cache_seconds: 0\n")
        for _ in range(3):
            self.assertEqual(t.ops_request("GET", "/metrics", headers=bearer("prom-token"))[0],
                             200)
        self.assertEqual((self.reviews("prom-token"), self.access_reviews(PROM, "/metrics")),
                         (3, 3))

    def test_a_revoked_role_or_token_counts_once_the_answer_expires(self):
        t = self.start("  auth_cache_seconds: 1\n")
        self.assertEqual(t.ops_request("GET", "/metrics", headers=bearer("prom-token"))[0], 200)
        self.srv.revoke_paths(PROM)
        wait_until(lambda: t.ops_request("GET", "/metrics",
                                         headers=bearer("prom-token"))[0] == 403,
                   20, "revoked rule refused")
        self.srv.remove_user("prom-token")
        wait_until(lambda: t.ops_request("GET", "/metrics",
                                         headers=bearer("prom-token"))[0] == 401,
                   20, "removed token refused")

    def test_a_full_cache_still_answers_every_caller_right(self):
        # 4 entries for 12 tokens (and their access checks), 6 threads at once:
        # answers are evicted and replaced all the time, never mixed up.
        t = self.start("  auth_cache_entries: 4\n")
        for i in range(8):
            self.srv.add_user(f"ok-{i}", f"scraper-{i}", groups=["scrapers"])
        self.srv.grant_path("scrapers", "/metrics")
        tokens = [f"ok-{i}" for i in range(8)] + ["nobody-token"] + [f"bad-{i}" for i in range(3)]
        want = {tok: 200 if tok.startswith("ok-") else 403 if tok == "nobody-token" else 401
                for tok in tokens}
        wrong = []

        def worker(k):
            for n in range(40):
                tok = tokens[(k * 5 + n) % len(tokens)]
                got = t.ops_request("GET", "/metrics", headers=bearer(tok))[0]
                if got != want[tok]:
                    wrong.append((tok, got))
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(wrong, [])
        self.assertGreater(len(self.srv.token_reviews), len(tokens), "entries were evicted")

    def test_failing_reviews_are_503_and_not_kept(self):
        t = self.start()
        self.srv.deny("create", "tokenreviews", group="authentication.k8s.io")
        s, _, body = t.ops_request("GET", "/metrics", headers=bearer("prom-token"))
        self.assertEqual((s, body["reason"]), (503, "ServiceUnavailable"))
        self.assertIn("cannot check the token with a TokenReview: TokenReview refused: HTTP 403",
                      t.log())
        self.srv.allow("create", "tokenreviews", group="authentication.k8s.io")
        self.srv.deny("create", "subjectaccessreviews", group="authorization.k8s.io")
        self.assertEqual(t.ops_request("GET", "/metrics", headers=bearer("prom-token"))[0], 503)
        self.assertIn(f'by user "{PROM}" not answered (503): cannot check access with a '
                      "SubjectAccessReview", t.log())
        self.srv.allow("create", "subjectaccessreviews", group="authorization.k8s.io")
        self.assertEqual(t.ops_request("GET", "/metrics", headers=bearer("prom-token"))[0], 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
