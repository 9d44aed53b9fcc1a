"""/readyz follows the API connection, not only the last request's outcome:
troupe is not ready while the API server refuses connections, while it takes
them and never answers (a hung server: no request fails for minutes), and
while it answers watches that end at once (the server cannot serve them); and
it is ready again soon after the server heals.  Against the test API server's
faults (tests/apiserver/fake_faults.py); the thresholds are ANSWER_DEADLINE_S,
WATCH_HEALTHY_MS and SHORT_WATCHES_FAILING in src/cache/informer.h."""
import threading
import time
import unittest

from live_common import FakeAPIServer, live, wait_until


class ReadinessTest(unittest.TestCase):
    def setUp(self):
        self.srv = FakeAPIServer()
        self.srv.start()
        self.addCleanup(self.srv.stop)
        self.t = live(self.srv)
        self.t.start()
        self.addCleanup(self.t.stop)
        wait_until(lambda: self.readyz()[0] == 200, 20, "ready")

    def readyz(self):
        s, _, body = self.t.request("GET", "/readyz")
        return s, body

    def wait_not_ready(self, detail, timeout):
        got = wait_until(lambda: (lambda r: r if r[0] == 503 else None)(self.readyz()),
                         timeout, f"/readyz 503 with {detail!r}")
        self.assertEqual(got[1]["status"], "api-unreachable", got)
        self.assertRegex(got[1]["detail"], detail)
        return got

    def heal_and_wait_ready(self, timeout=30):
        self.srv.clear_faults()
        wait_until(lambda: self.readyz()[0] == 200, timeout, "ready again")
        self.assertEqual(self.readyz(), (200, {"status": "ready"}))

    def test_connections_closed_unanswered(self):
        self.srv.refuse_connections(True)
        self.srv.cut_watches(abrupt=False)
        # libcurl names it one of these ways, depending on when the close came.
        self.wait_not_ready("Empty reply from server|Connection died|Recv failure", 10)
        self.heal_and_wait_ready()

    def test_hung_server_is_not_ready_within_the_answer_deadline(self):
        # Every request waits far longer than the test: only troupe's own
        # deadline (10 s) can notice.  Ready until then: nothing has failed.
        self.srv.delay(3600)
        self.srv.cut_watches(abrupt=False)
        self.assertEqual(self.readyz()[0], 200)
        self.wait_not_ready(r"no answer from the API server in 10 s", 25)
        self.assertIn("no answer from the API server in 10 s", self.t.log())
        self.heal_and_wait_ready(40)

    def test_watches_that_end_at_once_are_not_ready(self):
        stop = threading.Event()

        def cutter():
            while not stop.is_set():
                self.srv.cut_watches(abrupt=False)
                time.sleep(0.05)

        th = threading.Thread(target=cutter, daemon=True)
        th.start()
        try:
            self.wait_not_ready("ended as soon as it started", 10)
        finally:
            stop.set()
            th.join()
        # Ready again only once a watch has stayed up (0.5 s), not at the first
        # answer of a server that just cut three in a row.
        self.heal_and_wait_ready()
        self.assertIn("healthy again", self.t.log())

    def test_a_server_timeout_now_and_then_stays_ready(self):
        # Watches that end after living a while (the server's own timeout)
        # are normal: troupe stays ready through them.
        for _ in range(4):
            self.assertTrue(self.srv.wait_for_watches(n=3, timeout=10))
            time.sleep(1.2)
            self.srv.cut_watches(abrupt=False)
            self.assertEqual(self.readyz(), (200, {"status": "ready"}))


if __name__ == "__main__":
    unittest.main()
