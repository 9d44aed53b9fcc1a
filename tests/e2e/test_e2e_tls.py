#!/usr/bin/env python3
"""End-to-end: the real kube-scheduler talks HTTPS to troupe, with the
config/scheduler-config.yaml as shipped but for enableHTTPS: true and a
tlsConfig (caFile, certFile, keyFile), and troupe requiring a client
certificate of an allowed subject.

  test_scheduler_binds_over_https        GPU pods are filtered and bound
                                         through troupe over HTTPS
  test_scheduler_not_allowed_is_refused  with kube-scheduler's subject not
                                         allowed, troupe answers 403 and logs
                                         it, the pod waits; allowed again, the
                                         pod is bound

The certificates come from tests/integration/tls_certs.py (openssl): one CA
signs troupe's serving certificate (IP 127.0.0.1), kube-scheduler's client
certificate (CN=kube-scheduler) and the test's own (CN=e2e-probe), with which
it reads troupe's /readyz (/metrics is on the plain ops listener).
"""
import os
import ssl
import sys
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import cluster as rig  # noqa: E402
import tls_certs  # noqa: E402
from e2e_common import E2E, FAST_TROUPE, gpu_pod, gpu_ids, metric_samples, wait_until  # noqa: E402


class TlsCluster(rig.Cluster):
    """The rig with troupe serving HTTPS and kube-scheduler calling it so. The
    rig has no TLS hooks for troupe, so this subclass supplies them: the https
    URL, the scheduler configuration's enableHTTPS and tlsConfig, and a client
    certificate for the rig's own reads of troupe."""

    def __init__(self, folder, **kw):
        self.certs = os.path.join(folder, "troupe-tls")
        os.makedirs(self.certs, exist_ok=True)
        ca, ca_key = tls_certs.make_ca(self.certs)
        self.ca = ca
        self.server = tls_certs.make_server_cert(self.certs, ca, ca_key)
        self.scheduler = tls_certs.make_client_cert(self.certs, ca, ca_key, name="scheduler",
                                                    cn="kube-scheduler")
        self.probe = tls_certs.make_client_cert(self.certs, ca, ca_key, name="probe",
                                                cn="e2e-probe")
        super().__init__(folder, troupe_args=self.tls_args(["kube-scheduler", "e2e-probe"]),
                         **kw)

    def tls_args(self, subjects):
        args = ["--tls-cert-file", self.server[0], "--tls-key-file", self.server[1],
                "--tls-client-ca-file", self.ca]
        for s in subjects:
            args += ["--tls-allowed-subject", s]
        return args

    @property
    def troupe_url(self):
        return "https://127.0.0.1:%d" % self.state["ports"]["troupe"]

    def _context(self):
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.load_cert_chain(*self.probe)
        return ctx

    def troupe_status(self):
        try:
            with urllib.request.urlopen(self.troupe_url + "/readyz", timeout=2,
                                        context=self._context()) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError as e:
            return 0, str(e)

    def scheduler_config(self):
        text = super().scheduler_config()
        plain = "  enableHTTPS: false\n"
        if plain not in text:
            raise AssertionError("config/scheduler-config.yaml has no 'enableHTTPS: false'")
        return text.replace(plain, "  enableHTTPS: true\n  tlsConfig:\n"
                                   "    caFile: %s\n    certFile: %s\n    keyFile: %s\n"
                                   % (self.ca, self.scheduler[0], self.scheduler[1]))


def setUpModule():
    folder = os.path.join(rig.ROOT, "build", "e2e", "tls")
    c = TlsCluster(folder, nodes=4, troupe_config=FAST_TROUPE)
    c.down()
    c.up()
    E2E.cluster = c


def tearDownModule():
    if E2E.cluster:
        E2E.cluster.down()


class Tls(E2E):

    def test_scheduler_binds_over_https(self):
        self.assertIn("enableHTTPS: true", self.c.scheduler_config())
        self.assertIn("listening on https://", self.troupe_log())
        before = metric_samples(self.c.metrics("troupe"), "troupe_requests_total")
        for name, g in (("one", 1), ("four", 4)):
            self.create(gpu_pod(name, g))
        for name, g in (("one", 1), ("four", 4)):
            p = self.wait_bound(name)
            self.assertEqual(len(gpu_ids(p) or []), g, p["metadata"])
        after = metric_samples(self.c.metrics("troupe"), "troupe_requests_total")
        binds = sum(v - before.get(k, 0) for k, v in after.items() if 'verb="bind"' in k)
        self.assertEqual(binds, 2, after)
        self.assertNotIn("CN=kube-scheduler refused", self.troupe_log())

    def troupe_log(self):
        """What the running troupe logged: the log file keeps earlier runs in
        the same folder (an earlier refusal test among them)."""
        return self.c.log("troupe").rpartition("==== troupe started")[2]

    def test_scheduler_not_allowed_is_refused(self):
        c = self.c
        try:
            c.troupe_args = c.tls_args(["e2e-probe"])
            c.stop("troupe")
            c.start_troupe()
            mark = len(c.log("troupe"))
            self.create(gpu_pod("waits", 2))
            wait_until(lambda: "as CN=kube-scheduler refused with 403: subject "
                       "\"CN=kube-scheduler\" is not in tls.allowed_subjects"
                       in c.log("troupe")[mark:], what="troupe refusing kube-scheduler")
            self.assertFalse(self.pod("waits")["spec"].get("nodeName"))
        finally:
            c.troupe_args = c.tls_args(["kube-scheduler", "e2e-probe"])
            c.stop("troupe")
            c.start_troupe()
        # kube-scheduler retries the pod (with backoff) and troupe now answers.
        p = self.wait_bound("waits", timeout=120)
        self.assertEqual(len(gpu_ids(p) or []), 2)


if __name__ == "__main__":
    unittest.main()
