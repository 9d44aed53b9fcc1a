#!/usr/bin/env python3
"""Self-tests of the fake API server over HTTPS: a throw-away CA signs the
server's and the client's certificates; a verified client certificate
authenticates, a certificate of another CA fails the handshake, watches
work over TLS, a stalled handshake blocks nobody and restarts keep TLS.

Run alone: python3 tests/apiserver/test_fake_tls.py -v
(meson's apiserver-selftest runs every test_fake_*.py).
"""
import http.client
import json
import os
import socket
import ssl
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from selftest_common import FakeAPIServer, Watch, node, pod, tls_certs  # noqa: E402


class TLSBase(unittest.TestCase):
    """HTTPS: a throw-away CA signs the server's and the client's certificates."""
    server_kwargs = {"token": "t1"}

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="fake-apiserver-tls-")
        cls.certs = tls_certs.make_certs(cls._tmp.name)
        other = os.path.join(cls._tmp.name, "other")
        os.mkdir(other)
        # Another CA of the same name, and a client certificate it signed.
        cls.other_ca, other_key = tls_certs.make_ca(other)
        cls.other_client = tls_certs.make_client_cert(other, cls.other_ca, other_key)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def setUp(self):
        c = self.certs
        kw = dict(tls_cert=c.server_cert, tls_key=c.server_key, client_ca=c.ca_cert)
        kw.update(self.server_kwargs)
        self.s = FakeAPIServer(**kw).start()
        self.addCleanup(self.s.stop)

    def context(self, ca=None, cert=None):
        ctx = ssl.create_default_context(cafile=ca or self.certs.ca_cert)
        if cert:
            ctx.load_cert_chain(*cert)
        return ctx

    def client_cert(self):
        return (self.certs.client_cert, self.certs.client_key)

    def call(self, method, path, token=None, cert=None, ca=None):
        c = http.client.HTTPSConnection("127.0.0.1", self.s.port, timeout=5,
                                        context=self.context(ca, cert))
        h = {"Authorization": "Bearer " + token} if token else {}
        try:
            c.request(method, path, headers=h)
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        if (r.getheader("Content-Type") or "").startswith("application/json"):
            data = json.loads(data)
        return r.status, data

    def watch(self, path, cert=None, **kw):
        w = Watch(self.s.port, path, context=self.context(cert=cert), **kw)
        self.addCleanup(w.close)
        return w


class TLSTests(TLSBase):
    def test_https_with_the_right_ca(self):
        self.assertTrue(self.s.url.startswith("https://127.0.0.1:"), self.s.url)
        self.s.create("nodes", node("n1"))
        st, body = self.call("GET", "/api/v1/nodes", token="t1")
        self.assertEqual((st, [n["metadata"]["name"] for n in body["items"]]), (200, ["n1"]))
        st, body = self.call("GET", "/version")
        self.assertEqual(st, 401)
        # The server really presents the CA-signed certificate for 127.0.0.1 ...
        with self.assertRaises(ssl.SSLCertVerificationError):
            self.call("GET", "/healthz", token="t1", ca=self.other_ca)
        # ... and speaks nothing but TLS on that port.
        with self.assertRaises((http.client.HTTPException, ConnectionError)):
            c = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=5)
            try:
                c.request("GET", "/healthz", headers={"Authorization": "Bearer t1"})
                c.getresponse()
            finally:
                c.close()
        self.assertEqual(self.call("GET", "/healthz", token="t1")[0], 200)
        self.assertTrue(self.s.tls_failures)

    def test_client_certificate_authenticates(self):
        st, body = self.call("GET", "/api/v1/nodes", cert=self.client_cert())
        self.assertEqual((st, body["kind"]), (200, "NodeList"))
        self.assertEqual(self.s.x509_users, ["troupe"])
        # A bad token does not matter next to a valid certificate (x509 is tried first).
        st, _ = self.call("GET", "/api/v1/nodes", cert=self.client_cert(), token="bad")
        self.assertEqual(st, 200)
        # The token still works without a certificate.
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="t1")[0], 200)
        self.assertEqual(len(self.s.x509_users), 2)

    def test_no_certificate_and_no_token_is_401(self):
        st, body = self.call("GET", "/api/v1/nodes")
        self.assertEqual(body, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": "Unauthorized",
                                "reason": "Unauthorized", "code": 401})
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="bad")[0], 401)
        self.s.rotate_token("t2")
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="t1")[0], 401)
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="t2")[0], 200)
        self.assertEqual(self.s.x509_users, [])

    def test_certificate_of_another_ca_fails_the_handshake(self):
        with self.assertRaises((ssl.SSLError, ConnectionError)):
            self.call("GET", "/api/v1/nodes", cert=self.other_client)
        self.assertTrue(self.s.wait_for(lambda: self.s.tls_failures))
        self.assertEqual(self.s.requests, [])

    def test_watch_over_tls(self):
        w = self.watch("/api/v1/pods?watch=1&resourceVersion=" + self.s.resource_version,
                       cert=self.client_cert())
        self.assertEqual(w.resp.status, 200)
        self.assertTrue(self.s.wait_for_watches("pods", 1))
        time.sleep(0.6)                     # past a few liveness checks: still open
        self.assertEqual(self.s.open_watches("pods"), 1)
        self.s.create("pods", pod("a"))
        ev = w.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "a"))
        self.s.cut_watches("pods", mid_event=True)
        self.assertIsNone(w.next())
        self.assertEqual(w.end, "abrupt")
        self.assertFalse(w.buf.endswith(b"\n"))
        # A clean timeout, then the same TLS connection serves the next request.
        w = self.watch("/api/v1/nodes?watch=1&timeoutSeconds=1&resourceVersion="
                       + self.s.resource_version, token="t1")
        sock = w.conn.sock
        self.assertEqual(w.drain(), [])
        self.assertEqual(w.end, "clean")
        w.conn.request("GET", "/healthz", headers={"Authorization": "Bearer t1"})
        r = w.conn.getresponse()
        self.assertEqual((r.status, r.read()), (200, b"ok"))
        self.assertIs(w.conn.sock, sock)

    def test_watch_client_hanging_up_is_noticed(self):
        w = self.watch("/api/v1/pods?watch=1&resourceVersion=" + self.s.resource_version,
                       token="t1")
        self.assertTrue(self.s.wait_for_watches("pods", 1))
        w.close()
        self.assertTrue(self.s.wait_for(lambda: self.s.open_watches("pods") == 0, 3))

    def test_a_stalled_handshake_blocks_nobody(self):
        self.s.handshake_timeout = 0.5
        stalled = socket.create_connection(("127.0.0.1", self.s.port), timeout=5)
        self.addCleanup(stalled.close)
        half = socket.create_connection(("127.0.0.1", self.s.port), timeout=5)
        self.addCleanup(half.close)
        half.sendall(b"\x16\x03\x01\x02\x00\x01")       # the start of a ClientHello
        t0 = time.monotonic()
        self.assertEqual(self.call("GET", "/healthz", token="t1")[0], 200)
        self.assertLess(time.monotonic() - t0, 0.4)
        for sock in (stalled, half):                    # dropped after handshake_timeout
            self.assertEqual(sock.recv(100), b"")
        self.assertLess(time.monotonic() - t0, 3)

    def test_restart_and_stop_keep_tls(self):
        url = self.s.url
        w = self.watch("/api/v1/pods?watch=1&resourceVersion=" + self.s.resource_version,
                       cert=self.client_cert())
        self.assertTrue(self.s.wait_for_watches("pods", 1))
        t0 = time.monotonic()
        self.s.stop()
        self.assertEqual(w.drain(), [])
        self.assertEqual(w.end, "abrupt")
        self.assertLess(time.monotonic() - t0, 2.5)
        self.s.start()
        self.assertEqual(self.s.url, url)
        self.assertEqual(self.call("GET", "/healthz", cert=self.client_cert())[0], 200)


class TLSClientCAOnlyTests(TLSBase):
    server_kwargs = {}      # no token: only client certificates authenticate

    def test_certificate_required(self):
        self.assertEqual(self.call("GET", "/api/v1/nodes")[0], 401)
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="anything")[0], 401)
        self.assertEqual(self.call("GET", "/api/v1/nodes", cert=self.client_cert())[0], 200)


class TLSWithoutClientCATests(TLSBase):
    server_kwargs = {"token": None, "client_ca": None}

    def test_no_auth_and_no_client_certificate_request(self):
        self.assertEqual(self.call("GET", "/api/v1/nodes")[0], 200)
        # Without a client CA no certificate is asked for, so none counts.
        self.assertEqual(self.call("GET", "/api/v1/nodes", cert=self.client_cert())[0], 200)
        self.assertEqual(self.s.x509_users, [])

    def test_arguments_checked(self):
        c = self.certs
        with self.assertRaises(ValueError):
            FakeAPIServer(tls_cert=c.server_cert)
        with self.assertRaises(ValueError):
            FakeAPIServer(client_ca=c.ca_cert)


if __name__ == "__main__":
    unittest.main()
