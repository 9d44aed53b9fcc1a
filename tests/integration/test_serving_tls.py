"""troupe serving its verbs over HTTPS (tls.*), as kube-scheduler's extender
enableHTTPS and tlsConfig use it: a client certificate signed by the client CA
and of an allowed subject may call; every other client gets 403 with the reason
and a log line that names it (subject and address), or no TLS at all. The
server certificate, key and client CA are re-read when they change on disk; a
broken replacement keeps the old ones serving.

Certificates come from tls_certs (openssl); the client is Python's ssl module."""
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import tempfile
import unittest

import tls_certs
import troupe_proc
from live_common import wait_until
from troupe_proc import Troupe

# With TLS troupe logs "listening on https://HOST:PORT"; troupe_proc reads only
# the http:// form, so its pattern is widened for these tests.
troupe_proc.LISTEN_RE = re.compile(r"listening on https?://(?:\[([^\]]+)\]|([^:/\s]+)):(\d+)")

POD4 = {"metadata": {"name": "p", "namespace": "ml", "uid": "uid-p"},
        "spec": {"containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}
FILTER = {"Pod": POD4, "Nodes": None, "NodeNames": ["gpu-a100-1", "cpu-0"]}


class Pki:
    """A client CA with an allowed client (CN=troupe), a client of another
    subject (CN=intruder), a second CA with its own CN=troupe client, and the
    server certificate (signed by the first CA)."""

    def __init__(self, folder):
        self.folder = folder
        c = tls_certs.make_certs(folder)
        self.ca, self.ca_key = c.ca_cert, c.ca_key
        self.server_cert, self.server_key = c.server_cert, c.server_key
        self.client = (c.client_cert, c.client_key)
        self.intruder = tls_certs.make_client_cert(folder, self.ca, self.ca_key, name="intruder",
                                                   cn="intruder", org="troupe-schedulers")
        self.other_ca, other_ca_key = tls_certs.make_ca(folder, name="other-ca",
                                                        cn="another-ca")
        self.stranger = tls_certs.make_client_cert(folder, self.other_ca, other_ca_key,
                                                   name="stranger", cn="troupe",
                                                   org="troupe-schedulers")


def tls_args(pki, cert=None, key=None, ca=None, subjects=("troupe",)):
    args = ["--tls-cert-file", cert or pki.server_cert, "--tls-key-file", key or pki.server_key,
            "--tls-client-ca-file", ca or pki.ca]
    for s in subjects:
        args += ["--tls-allowed-subject", s]
    return args


def context(pki, client=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki.ca)
    if client:
        ctx.load_cert_chain(*client)
    return ctx


def call(troupe, pki, client=None, path="/filter", body=FILTER):
    """One POST over a fresh HTTPS connection: (status, parsed JSON body, the
    server certificate's DER)."""
    conn = http.client.HTTPSConnection(troupe.host, troupe.port, timeout=30,
                                       context=context(pki, client))
    try:
        conn.connect()
        peer = conn.sock.getpeercert(binary_form=True)
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if data else None, peer
    finally:
        conn.close()


class ClientCertificateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="troupe-tls-")
        cls.pki = Pki(cls.tmp.name)
        cls.troupe = Troupe(args=tls_args(cls.pki))
        cls.troupe.start()

    @classmethod
    def tearDownClass(cls):
        cls.troupe.stop()
        cls.tmp.cleanup()

    def test_allowed_client_calls_the_verbs(self):
        status, body, peer = call(self.troupe, self.pki, self.pki.client)
        self.assertEqual((status, body["Error"], body["NodeNames"]), (200, "", ["gpu-a100-1"]))
        self.assertEqual(peer, tls_certs.der(self.pki.server_cert))
        self.assertRegex(self.troupe.log(), r"listening on https://127\.0\.0\.1:\d+")

    def test_keep_alive_connection_serves_many_requests(self):
        conn = http.client.HTTPSConnection(self.troupe.host, self.troupe.port, timeout=30,
                                           context=context(self.pki, self.pki.client))
        try:
            for _ in range(20):
                conn.request("POST", "/filter", body=json.dumps(FILTER))
                resp = conn.getresponse()
                self.assertEqual(resp.status, 200)
                self.assertEqual(json.loads(resp.read())["NodeNames"], ["gpu-a100-1"])
        finally:
            conn.close()

    def test_valid_certificate_of_another_subject_gets_403_and_a_log_line(self):
        status, body, _ = call(self.troupe, self.pki, self.pki.intruder)
        self.assertEqual(status, 403)
        self.assertIn("not in tls.allowed_subjects", body["Error"])
        self.assertIn("CN=intruder", body["Error"])
        # Refusals are logged a few a second; the other tests' may have used
        # this second's lines up, so ask again until one is logged.
        wait_until(lambda: call(self.troupe, self.pki, self.pki.intruder) and
                   re.search(r"POST /filter from 127\.0\.0\.1:\d+ as "
                             r"O=troupe-schedulers,CN=intruder refused with 403: subject "
                             r"\"O=troupe-schedulers,CN=intruder\" is not in "
                             r"tls.allowed_subjects", self.troupe.log()),
                   what="the refusal's log line")

    def test_no_client_certificate_gets_403(self):
        status, body, _ = call(self.troupe, self.pki, None)
        self.assertEqual((status, body["Error"]),
                         (403, "troupe: client certificate refused: no client certificate"))
        wait_until(lambda: call(self.troupe, self.pki, None) and
                   re.search(r"from 127\.0\.0\.1:\d+ refused with 403: no client "
                             r"certificate", self.troupe.log()),
                   what="the refusal's log line")

    def test_certificate_of_another_ca_gets_403(self):
        status, body, _ = call(self.troupe, self.pki, self.pki.stranger)
        self.assertEqual(status, 403)
        self.assertIn("not trusted by tls.client_ca_file", body["Error"])

    def test_server_certificate_is_no_client_certificate(self):
        # Signed by the right CA, but its extended key usage is serverAuth only.
        status, body, _ = call(self.troupe, self.pki, (self.pki.server_cert, self.pki.server_key))
        self.assertEqual(status, 403)
        self.assertIn("intended purpose", body["Error"])

    def test_every_path_is_refused_to_a_refused_client(self):
        for path in ("/prioritize", "/bind", "/no-such-endpoint"):
            status, body, _ = call(self.troupe, self.pki, self.pki.intruder, path=path)
            self.assertEqual(status, 403, path)

    def test_plain_http_gets_no_answer(self):
        conn = http.client.HTTPConnection(self.troupe.host, self.troupe.port, timeout=30)
        try:
            with self.assertRaises((http.client.HTTPException, ConnectionError, OSError)):
                conn.request("POST", "/filter", body=json.dumps(FILTER))
                conn.getresponse().read()
        finally:
            conn.close()
        status, _, _ = call(self.troupe, self.pki, self.pki.client)
        self.assertEqual(status, 200)


class ConfigurationTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="troupe-tls-")
        self.pki = Pki(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_config_file_keys_and_a_full_dn_entry(self):
        dn = tls_certs.subject_rfc4514(self.pki.client[0])
        self.assertEqual(dn, "O=troupe-schedulers,CN=troupe")
        text = (f"tls:\n  cert_file: {self.pki.server_cert}\n  key_file: {self.pki.server_key}\n"
                f"  client_ca_file: {self.pki.ca}\n  allowed_subjects: [\"{dn}\"]\n")
        with Troupe(config_text=text) as t:
            self.assertEqual(call(t, self.pki, self.pki.client)[0], 200)
            # The intruder's CN differs, and so does its DN.
            self.assertEqual(call(t, self.pki, self.pki.intruder)[0], 403)

    def test_dn_entry_does_not_match_a_cn(self):
        # An entry holding '=' is a whole DN: "CN=troupe" is not the DN
        # "O=troupe-schedulers,CN=troupe".
        with Troupe(args=tls_args(self.pki, subjects=["CN=troupe"])) as t:
            self.assertEqual(call(t, self.pki, self.pki.client)[0], 403)

    def test_server_tls_without_client_ca_serves_anyone(self):
        with Troupe(args=["--tls-cert-file", self.pki.server_cert,
                          "--tls-key-file", self.pki.server_key]) as t:
            self.assertEqual(call(t, self.pki, None)[0], 200)

    def test_bad_settings_are_refused_at_start(self):
        bad = [
            (["--tls-cert-file", self.pki.server_cert], "go together"),
            (tls_args(self.pki, subjects=()), "tls.allowed_subjects is empty"),
            (tls_args(self.pki, key=self.pki.intruder[1]), "does not belong"),
            (tls_args(self.pki, cert=os.path.join(self.tmp.name, "missing.crt")),
             "No such file"),
        ]
        for args, message in bad:
            t = Troupe(args=args, ready_timeout=10)
            with self.assertRaises(RuntimeError) as cm:
                t.start()
            self.assertIn(message, str(cm.exception), args)
            t.stop(check=False)


class RotationTest(unittest.TestCase):
    """The files troupe reads are replaced while it runs."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="troupe-tls-")
        self.pki = Pki(self.tmp.name)
        live = os.path.join(self.tmp.name, "live")
        os.mkdir(live)
        self.cert, self.key, self.ca = (os.path.join(live, n)
                                        for n in ("tls.crt", "tls.key", "ca.crt"))
        shutil.copyfile(self.pki.server_cert, self.cert)
        shutil.copyfile(self.pki.server_key, self.key)
        shutil.copyfile(self.pki.ca, self.ca)
        self.troupe = Troupe(args=tls_args(self.pki, cert=self.cert, key=self.key, ca=self.ca))
        self.troupe.start()

    def tearDown(self):
        self.troupe.stop()
        self.tmp.cleanup()

    def served_cert(self):
        return call(self.troupe, self.pki, self.pki.client)[2]

    def test_new_certificate_is_served_without_restart_and_a_broken_one_is_not(self):
        self.assertEqual(self.served_cert(), tls_certs.der(self.pki.server_cert))
        new_cert, new_key = tls_certs.make_server_cert(self.tmp.name, self.pki.ca,
                                                       self.pki.ca_key, name="server-2")
        # The key first, then the certificate: in between troupe sees a pair
        # that does not match, keeps the old one and says so.
        tls_certs.replace_file(new_key, self.key)
        tls_certs.replace_file(new_cert, self.cert)
        wait_until(lambda: self.served_cert() == tls_certs.der(new_cert),
                   what="the new certificate in a handshake")
        self.assertIn("server certificate reloaded", self.troupe.log())

        with open(self.cert, "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
        # Files are looked at when a handshake needs them (at most once a
        # second), so each try shakes hands.
        wait_until(lambda: self.served_cert() and
                   "new server certificate not loaded, the old one keeps serving"
                   in self.troupe.log().split("server certificate reloaded")[-1],
                   what="the broken file's error")
        status, body, peer = call(self.troupe, self.pki, self.pki.client)
        self.assertEqual((status, peer), (200, tls_certs.der(new_cert)))

    def test_new_client_ca_decides_new_connections(self):
        self.assertEqual(call(self.troupe, self.pki, self.pki.stranger)[0], 403)
        # A keep-alive connection of the allowed client, open across the change.
        conn = http.client.HTTPSConnection(self.troupe.host, self.troupe.port, timeout=30,
                                           context=context(self.pki, self.pki.client))
        conn.request("POST", "/filter", body=json.dumps(FILTER))
        self.assertEqual(conn.getresponse().read() and 200, 200)

        tls_certs.replace_file(self.pki.other_ca, self.ca)
        wait_until(lambda: call(self.troupe, self.pki, self.pki.stranger)[0] == 200,
                   what="the other CA's client allowed")
        self.assertEqual(call(self.troupe, self.pki, self.pki.client)[0], 403)
        # The open connection is decided again under the new CA.
        conn.request("POST", "/filter", body=json.dumps(FILTER))
        resp = conn.getresponse()
        resp.read()
        conn.close()
        self.assertEqual(resp.status, 403)

        with open(self.ca, "w") as f:
            f.write("garbage\n")
        wait_until(lambda: call(self.troupe, self.pki, self.pki.stranger) and
                   "new client CA not loaded" in self.troupe.log(),
                   what="the broken CA file's error")
        self.assertEqual(call(self.troupe, self.pki, self.pki.stranger)[0], 200)


if __name__ == "__main__":
    unittest.main()
