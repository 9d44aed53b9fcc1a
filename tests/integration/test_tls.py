"""troupe against the test API server over HTTPS: every way a kubeconfig or a
pod's service account can describe TLS (CA file or data, client certificate
file or data, token with verification off, in-cluster), and servers whose
certificate troupe must refuse (unknown CA, another host name).  Certificates come from tls_certs (openssl)."""
import base64
import os
import re
import shutil
import ssl
import time
import unittest
import urllib.request

from live_common import (FAST_CONFIG, FakeAPIServer, assert_converges, load_fixture_cluster, tmpdir,
                         wait_until)
from schedclient import gpu_pod
from troupe_proc import Troupe
import tls_certs

# The token the servers of the client-certificate tests want: troupe is never
# given it, so only its certificate can get it in.
UNKNOWN_TOKEN = "a-token-troupe-does-not-have"


def pending_pod(name, gpus, ns="ml"):
    p = gpu_pod(ns, name, None, gpus)
    del p["metadata"]["uid"]
    return p


def b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def write_kubeconfig(folder, server, cluster_lines, user_lines):
    """A kubeconfig in <folder>; the *_lines are "key: value" strings."""
    ind = "\n    "
    path = os.path.join(folder, "kubeconfig")
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
preferences: {{}}
current-context: tls
clusters:
- name: fake
  cluster:
    server: {server}{ind}{ind.join(cluster_lines)}
users:
- name: troupe
  user:{ind}{ind.join(user_lines) if user_lines else "{}"}
contexts:
- name: tls
  context:
    cluster: fake
    user: troupe
""")
    return path


def write_atomically(path, text):
    """As the kubelet replaces a projected token: the new file appears at once."""
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class TLSTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tmpdir()
        cls.certs = tls_certs.make_certs(cls._tmp.name)
        other = os.path.join(cls._tmp.name, "other")
        os.mkdir(other)
        # A CA with the same name but another key: only a real signature check
        # tells it from the right one.
        cls.other_ca, _ = tls_certs.make_ca(other)
        # Signed by the right CA, but for another host name.
        cls.misnamed = tls_certs.make_server_cert(other, cls.certs.ca_cert, cls.certs.ca_key,
                                                  name="misnamed", cn="elsewhere.invalid",
                                                  san="DNS:elsewhere.invalid")

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def setUp(self):
        d = tmpdir()
        self.addCleanup(d.cleanup)
        self.dir = d.name

    def serve(self, token=UNKNOWN_TOKEN, server_cert=None):
        """An HTTPS server that accepts the test CA's client certificates and
        <token>, with the fixture cluster loaded.  server_cert: (cert, key)."""
        c = self.certs
        cert, key = server_cert or (c.server_cert, c.server_key)
        srv = FakeAPIServer(token=token, tls_cert=cert, tls_key=key, client_ca=c.ca_cert)
        srv.start()
        self.addCleanup(srv.stop)
        load_fixture_cluster(srv)
        return srv

    def start(self, source, env=None):
        t = Troupe(source=source, config_text=FAST_CONFIG, env=env)
        t.start()
        self.addCleanup(t.stop)
        return t

    def ready(self, t):
        try:
            wait_until(lambda: t.request("GET", "/readyz")[0] == 200, 20, "ready")
        except AssertionError as e:
            self.fail(f"{e}\n--- troupe log ---\n{t.log()[-4000:]}")

    def filter_bind(self, t, srv, name, gpus=2, node="gpu-h100-1"):
        """kube-scheduler's view: filter, then bind; the server must show the
        pod on the node with troupe's device annotation."""
        pod = srv.create("pods", pending_pod(name, gpus))
        t.wait_seen(pod)
        s, _, f = t.request("POST", "/filter", {"Pod": pod, "Nodes": None, "NodeNames": [node]})
        self.assertEqual(s, 200)
        self.assertEqual((f["Error"], f["NodeNames"]), ("", [node]), f)
        md = pod["metadata"]
        s, _, b = t.request("POST", "/bind", {"PodName": md["name"],
                                               "PodNamespace": md["namespace"],
                                               "PodUID": md["uid"], "Node": node})
        self.assertEqual((s, b["Error"]), (200, ""), f"{b}\n--- troupe log ---\n{t.log()[-3000:]}")
        on_server = srv.get("pods", md["namespace"], md["name"])
        self.assertEqual(on_server["spec"].get("nodeName"), node)
        ids = on_server["metadata"].get("annotations", {}).get("troupe.io/gpu-ids", "")
        self.assertRegex(ids, r"^\d+(,\d+)*$", "troupe.io/gpu-ids")
        self.assertEqual(len(ids.split(",")), gpus, f"troupe.io/gpu-ids={ids!r}")
        self.assertEqual(srv.bindings[-1]["metadata"]["uid"], md["uid"])
        return on_server

    def check_live(self, t, srv, name):
        self.ready(t)
        assert_converges(self, t, srv)
        self.filter_bind(t, srv, name)
        assert_converges(self, t, srv)     # the annotation equals troupe's devices
        refused = [r for r in srv.requests if r[2] in (401, 403)]
        self.assertEqual(refused, [], "every request was authenticated")

    def copy_pki(self, names):
        """The named certificate files copied into <dir>/pki/: (relative paths)."""
        pki = os.path.join(self.dir, "pki")
        os.makedirs(pki, exist_ok=True)
        out = []
        for src in names:
            shutil.copy(src, pki)
            out.append("pki/" + os.path.basename(src))
        return out

    # ---- kubeconfig ----------------------------------------------------------

    def test_a_ca_and_client_certificate_files(self):
        srv = self.serve()
        c = self.certs
        ca, cert, key = self.copy_pki([c.ca_cert, c.client_cert, c.client_key])
        # Relative paths: resolved against the kubeconfig's folder, not troupe's
        # working directory.
        self.assertNotEqual(os.path.realpath(os.getcwd()), os.path.realpath(self.dir))
        kc = write_kubeconfig(self.dir, srv.url, [f"certificate-authority: {ca}"],
                              [f"client-certificate: {cert}", f"client-key: {key}"])
        t = self.start(["--kubeconfig", kc])
        self.check_live(t, srv, "bind-files")
        self.assertIn("troupe", srv.x509_users)
        self.assertIn(srv.url, t.log())
        self.assertNotIn("TLS not verified", t.log())

    def test_b_ca_and_client_certificate_data(self):
        srv = self.serve()
        c = self.certs
        kc = write_kubeconfig(self.dir, srv.url,
                              [f"certificate-authority-data: {b64(c.ca_cert)}"],
                              [f"client-certificate-data: {b64(c.client_cert)}",
                               f"client-key-data: {b64(c.client_key)}"])
        self.assertEqual(sorted(os.listdir(self.dir)), ["kubeconfig"], "no files to fall back on")
        t = self.start(["--kubeconfig", kc])
        self.check_live(t, srv, "bind-data")
        self.assertIn("troupe", srv.x509_users)

    def test_c_token_with_insecure_skip_tls_verify(self):
        srv = self.serve(token="tok-c")
        kc = write_kubeconfig(self.dir, srv.url, ["insecure-skip-tls-verify: true"],
                              ["token: tok-c"])
        t = self.start(["--kubeconfig", kc])
        self.check_live(t, srv, "bind-insecure")
        self.assertIn("TLS not verified", t.log())
        self.assertEqual(srv.x509_users, [], "authenticated by the token alone")

    def assert_refused(self, srv, ca_file):
        """troupe, given <ca_file> and the right client certificate, must fail
        every list on TLS verification and never become ready."""
        c = self.certs
        ca, cert, key = self.copy_pki([ca_file, c.client_cert, c.client_key])
        kc = write_kubeconfig(self.dir, srv.url, [f"certificate-authority: {ca}"],
                              [f"client-certificate: {cert}", f"client-key: {key}"])
        t = self.start(["--kubeconfig", kc])
        fail_re = re.compile(r"list failed: [^\n]*(SSL|certificate|TLS)[^\n]*retrying in")
        wait_until(lambda: fail_re.search(t.log()), 10, "a failed TLS list in the log")
        end = time.monotonic() + 3
        while time.monotonic() < end:
            s, _, body = t.request("GET", "/readyz")
            self.assertEqual(s, 503, f"troupe became ready with the wrong CA: {body}\n"
                                     f"--- troupe log ---\n{t.log()[-3000:]}")
            time.sleep(0.1)
        self.assertNotIn("troupe is ready", t.log())
        self.assertEqual(srv.requests, [], "no HTTP request was sent")

    def test_d_wrong_ca_is_refused(self):
        srv = self.serve()
        self.assert_refused(srv, self.other_ca)
        self.assertTrue(srv.tls_failures, "the server saw the aborted handshakes")
        # Control: the server itself is fine for a client with the right CA.
        c = self.certs
        ctx = ssl.create_default_context(cafile=c.ca_cert)
        ctx.load_cert_chain(c.client_cert, c.client_key)
        with urllib.request.urlopen(srv.url + "/api/v1/nodes", context=ctx, timeout=5) as r:
            self.assertEqual(r.status, 200)

    def test_d2_server_certificate_for_another_name_is_refused(self):
        srv = self.serve(server_cert=self.misnamed)
        self.assert_refused(srv, self.certs.ca_cert)
        # Control: the chain is good; only the name is wrong.
        ctx = ssl.create_default_context(cafile=self.certs.ca_cert)
        ctx.check_hostname = False
        ctx.load_cert_chain(self.certs.client_cert, self.certs.client_key)
        with urllib.request.urlopen(srv.url + "/healthz", context=ctx, timeout=5) as r:
            self.assertEqual(r.status, 200)

    # ---- in-cluster ----------------------------------------------------------

    def test_e_in_cluster_service_account_and_token_rotation(self):
        srv = self.serve(token="sa-token-1")
        sa = os.path.join(self.dir, "serviceaccount")
        os.mkdir(sa)
        shutil.copy(self.certs.ca_cert, os.path.join(sa, "ca.crt"))
        token = os.path.join(sa, "token")
        write_atomically(token, "sa-token-1")
        write_atomically(os.path.join(sa, "namespace"), "kube-system")
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
               "KUBERNETES_SERVICE_PORT": str(srv.port),
               "TROUPE_SERVICEACCOUNT_DIR": sa}
        t = self.start([], env=env)
        args = t.proc.args
        for flag in ("--cluster", "--kubeconfig", "--api-server"):
            self.assertNotIn(flag, args, "in-cluster mode gets no source flag")
        self.assertIn("in-cluster service account", t.log())
        self.check_live(t, srv, "bind-in-cluster")
        self.assertEqual(srv.x509_users, [])
        # Rotation: the kubelet writes a new token, the old one stops working.
        write_atomically(token, "sa-token-2\n")
        srv.rotate_token("sa-token-2")
        srv.cut_watches(None, mid_event=False)
        srv.create("pods", {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": "after-rotation", "namespace": "ml"},
                            "spec": {"nodeName": "gpu-a100-1", "containers": [{
                                "name": "main", "image": "trainer:1", "resources": {
                                    "limits": {"nvidia.com/gpu": "1"}}}]},
                            "status": {"phase": "Running"}})
        assert_converges(self, t, srv)
        self.assertIn("bearer token reloaded", t.log())
        self.filter_bind(t, srv, "bind-after-rotation", gpus=1)
        assert_converges(self, t, srv)


if __name__ == "__main__":
    unittest.main(verbosity=2)
