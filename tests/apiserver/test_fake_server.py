#!/usr/bin/env python3
"""Self-tests of the fake API server as a whole: injected faults (fail_next,
delays, refused connections), a restart on the same port, its fixed paths,
loading a fixture cluster, running without the PodGroup CRD, and the
command line (plain and TLS).

Run alone: python3 tests/apiserver/test_fake_server.py -v
(meson's apiserver-selftest runs every test_fake_*.py).
"""
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from selftest_common import Base, HERE, ROOT, pod, PG, tls_certs  # noqa: E402


class FaultTests(Base):
    def test_fail_next_429_with_retry_after(self):
        self.s.fail_next(2, 429, path_contains="/api/v1/pods", retry_after=3)
        self.assertEqual(self.call("GET", "/api/v1/nodes")[0], 200)
        for _ in range(2):
            st, r, body = self.call("GET", "/api/v1/pods")
            self.assertEqual(st, 429)
            self.assertEqual(r.getheader("Retry-After"), "3")
            self.assertEqual((body["reason"], body["code"], body["details"]["retryAfterSeconds"]),
                             ("TooManyRequests", 429, 3))
        self.assertEqual(self.call("GET", "/api/v1/pods")[0], 200)
        self.s.fail_next(1, 500, method="POST")
        self.assertEqual(self.call("GET", "/api/v1/pods")[0], 200)
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/x/binding", {})
        self.assertEqual((st, body["reason"]), (500, "InternalError"))
        self.assertEqual(self.s.requests[-1], ("POST", "/api/v1/namespaces/ml/pods/x/binding", 500))

    def test_delay(self):
        self.s.delay(0.3, path_contains="/api/v1/nodes")
        t0 = time.monotonic()
        self.call("GET", "/api/v1/pods")
        self.assertLess(time.monotonic() - t0, 0.25)
        t0 = time.monotonic()
        self.call("GET", "/api/v1/nodes")
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)
        self.s.delay(0, path_contains="/api/v1/nodes")
        t0 = time.monotonic()
        self.call("GET", "/api/v1/nodes")
        self.assertLess(time.monotonic() - t0, 0.25)

    def test_refuse_connections(self):
        self.s.refuse_connections(True)
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            self.call("GET", "/healthz")
        self.s.refuse_connections(False)
        self.assertEqual(self.call("GET", "/healthz")[0], 200)

    def test_restart_on_same_port(self):
        self.s.create("pods", pod("a"))
        url = self.s.url
        w = self.watch("/api/v1/pods?watch=1&resourceVersion=" + self.s.resource_version)
        self.assertTrue(self.s.wait_for_watches("pods", 1))
        last = self.s.resource_version
        t0 = time.monotonic()
        self.s.stop()
        self.assertEqual(w.drain(), [])
        self.assertEqual(w.end, "abrupt")
        self.assertLess(time.monotonic() - t0, 2.5)
        self.assertEqual(self.s.open_watches(), 0)
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", self.s.port), timeout=1).close()
        self.s.create("pods", pod("b"))      # changes while "down" are kept (etcd survives)
        self.s.start()
        self.assertEqual(self.s.url, url)
        w = self.watch("/api/v1/pods?watch=1&timeoutSeconds=1&resourceVersion=" + last)
        ev = w.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "b"))


class MiscTests(Base):
    def test_paths(self):
        st, _, body = self.call("GET", "/version")
        self.assertEqual((st, body["major"]), (200, "1"))
        st, _, body = self.call("GET", "/healthz")
        self.assertEqual((st, body), (200, b"ok"))
        st, _, body = self.call("GET", "/api/v1/widgets")
        self.assertEqual((st, body["reason"], body["message"]),
                         (404, "NotFound", "the server could not find the requested resource"))
        st, _, body = self.call("DELETE", "/api/v1/pods")
        self.assertEqual((st, body["reason"]), (405, "MethodNotAllowed"))
        st, _, body = self.call("GET", "/api/v1/namespaces/ml/nodes")
        self.assertEqual(st, 404)

    def test_load_list_fixture_cluster(self):
        n = self.s.load_list(os.path.join(ROOT, "tests", "data", "cluster.json"))
        self.assertEqual(n, len(self.s.list("nodes")) + len(self.s.list("pods"))
                         + len(self.s.list("podgroups")))
        self.assertTrue(self.s.list("nodes") and self.s.list("pods"))


class NoCRDTests(Base):
    server_kwargs = {"podgroups_crd": False}

    def test_podgroups_404(self):
        for path in (PG + "/podgroups", PG + "/podgroups?watch=1",
                     PG + "/namespaces/ml/podgroups/g"):
            st, _, body = self.call("GET", path)
            self.assertEqual((st, body["reason"], body["message"]),
                             (404, "NotFound", "the server could not find the requested resource"))
        with self.assertRaises(ValueError):
            self.s.create("widgets", {})


# ---------------------------------------------------------------------------


class CLITests(unittest.TestCase):
    def test_cli(self):
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fake_apiserver.py"), "--port", "0",
             "--load", os.path.join(ROOT, "tests", "data", "cluster.json"),
             "--token", "tok"], stdout=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            self.assertTrue(line.startswith("listening on http://127.0.0.1:"), line)
            port = int(line.rsplit(":", 1)[1])
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/api/v1/nodes", headers={"Authorization": "Bearer tok"})
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            self.assertTrue(json.loads(r.read())["items"])
            c.close()
        finally:
            proc.terminate()
            rc = proc.wait(10)
            proc.stdout.close()
        self.assertEqual(rc, 0)

    def test_cli_tls(self):
        with tls_certs.temp_certs() as c:
            proc = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "fake_apiserver.py"), "--port", "0",
                 "--tls-cert", c.server_cert, "--tls-key", c.server_key,
                 "--client-ca", c.ca_cert, "--token", "tok"], stdout=subprocess.PIPE, text=True)
            try:
                line = proc.stdout.readline()
                self.assertTrue(line.startswith("listening on https://127.0.0.1:"), line)
                port = int(line.rsplit(":", 1)[1])
                ctx = ssl.create_default_context(cafile=c.ca_cert)
                ctx.load_cert_chain(c.client_cert, c.client_key)
                conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=ctx)
                conn.request("GET", "/api/v1/nodes")
                self.assertEqual(conn.getresponse().status, 200)
                conn.close()
            finally:
                proc.terminate()
                rc = proc.wait(10)
                proc.stdout.close()
            self.assertEqual(rc, 0)


if __name__ == "__main__":
    unittest.main()
