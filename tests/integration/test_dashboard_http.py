"""The dashboard on the ops listener, over HTTP (the page itself is tested in
Chromium: tests/browser/test_dashboard.mjs): the page and its two files with
their content types, compiled into troupe; /debug/dashboard.json, never cached,
with its query checked; only GET and HEAD. With ops.auth on, the JSON needs a
token RBAC allows, as /debug/state does, while the page's files (the same for
everyone, no cluster data in them) stay open, so a browser can load the page and
then be asked for a token."""
import unittest

from live_common import FAST_CONFIG, LiveCase, load_fixture_cluster, wait_until
from troupe_proc import Troupe

FILES = {"/debug/dashboard": "text/html; charset=utf-8",
         "/debug/dashboard.js": "text/javascript; charset=utf-8",
         "/debug/dashboard.css": "text/css; charset=utf-8"}


class DashboardHttpTest(unittest.TestCase):
    def test_page_files_and_json(self):
        with Troupe() as t:
            ok = 'troupe_http_responses_total{code="200"}'
            before = t.metric(ok)
            for path, ctype in FILES.items():
                s, h, body = t.ops_request("GET", path)
                self.assertEqual((s, h["Content-Type"]), (200, ctype), path)
                self.assertEqual(h["Cache-Control"], "max-age=60")
                self.assertEqual(h["X-Content-Type-Options"], "nosniff")
                self.assertIn("default-src 'self'", h["Content-Security-Policy"])
                self.assertGreater(len(body), 500, path)
            # The files count among the answers, as every other does (and
            # the /metrics read before is one more 200).
            self.assertEqual(t.metric(ok), before + 1 + len(FILES))
            # The page names its files relative to itself: no internet, no prefix.
            page = t.ops_request("GET", "/debug/dashboard")[2]
            self.assertIn('src="dashboard.js"', page)
            self.assertIn('href="dashboard.css"', page)
            self.assertNotIn("http://", page.replace("http://www.w3.org", ""))
            self.assertNotIn("https://", page)
            s, h, body = t.ops_request("GET", "/debug/dashboard.json")
            self.assertEqual((s, h["Content-Type"], h["Cache-Control"]),
                             (200, "application/json", "no-store"))
            self.assertEqual(body["totals"]["nodes"], 8)
            self.assertEqual(body["mode"], "full")
            # HEAD as GET without the body; other methods 405.
            self.assertEqual(t.ops_request("HEAD", "/debug/dashboard")[0], 200)
            s, h, _ = t.ops_request("POST", "/debug/dashboard.json", "{}")
            self.assertEqual((s, h.get("Allow")), (405, "GET, HEAD"))
            # Only the page's own files.
            self.assertEqual(t.ops_request("GET", "/debug/dashboard/index.html")[0], 404)
            self.assertEqual(t.ops_request("GET", "/debug/embed.py")[0], 404)
            # The query: a search, a domain, a page; too long or too far is 400.
            body = t.ops_request("GET", "/debug/dashboard.json?q=a100")[2]
            self.assertEqual(sorted(n[0] for n in body["nodes"]), ["gpu-a100-0", "gpu-a100-1"])
            body = t.ops_request("GET", "/debug/dashboard.json?q=resnet")[2]
            self.assertEqual([n[0] for n in body["nodes"]], ["gpu-a100-0"])
            s, _, body = t.ops_request("GET", "/debug/dashboard.json?q=" + "x" * 300)
            self.assertEqual(s, 400)
            self.assertIn("at most 255 characters", body["Error"])
            self.assertEqual(t.ops_request("GET", "/debug/dashboard.json?page=1000001")[0], 400)
            # The verbs' port has none of it.
            self.assertEqual(t.request("GET", "/debug/dashboard")[0], 404)


class DashboardAuthTest(LiveCase):
    """ops.auth on: the JSON as /debug/state, the files open."""

    def setUp(self):
        super().setUp()
        load_fixture_cluster(self.srv)
        self.srv.add_user("dev-token", "alice", groups=["debuggers", "system:authenticated"])
        self.srv.grant_path("debuggers", "/debug/*")
        self.srv.add_user("nobody-token", "mallory")

    def test_json_needs_a_token_files_do_not(self):
        t = self.start_live(FAST_CONFIG + "ops:\n  auth: true\n")
        wait_until(lambda: t.ops_request("GET", "/readyz")[0] == 200, 20, "troupe ready")
        for path in FILES:
            self.assertEqual(t.ops_request("GET", path)[0], 200, path)
        with self.srv._lock:
            self.assertEqual(self.srv.token_reviews, [], "the files cost no review")
        self.assertEqual(t.ops_request("GET", "/debug/dashboard.json")[0], 401)
        s, _, body = t.ops_request("GET", "/debug/dashboard.json",
                                   headers={"Authorization": "Bearer nobody-token"})
        self.assertEqual((s, body["reason"]), (403, "Forbidden"))
        s, _, body = t.ops_request("GET", "/debug/dashboard.json",
                                   headers={"Authorization": "Bearer dev-token"})
        self.assertEqual(s, 200, body)
        # Live: the informer's nodes and pods.
        wait_until(lambda: t.ops_request(
            "GET", "/debug/dashboard.json",
            headers={"Authorization": "Bearer dev-token"})[2]["totals"]["nodes"] == 8,
            20, "8 nodes in the dashboard")


if __name__ == "__main__":
    unittest.main()
