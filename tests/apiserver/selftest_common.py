"""What every self-test of the fake API server (tests/apiserver/test_fake_*.py)
shares: the object builders, a watch reader that buffers and splits on
newlines the way troupe must, and the Base test case that starts a fresh
server per test and talks to it with http.client only, as a client would.

The self-tests pin the Kubernetes semantics troupe relies on (paging
snapshots, watch replay and expiry, bookmarks, binding checks, access reviews
and 403s, faults, TLS); they are split by topic into test_fake_*.py files.
"""
import http.client
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "integration"))   # tls_certs

from fake_apiserver import FakeAPIServer  # noqa: E402
import tls_certs  # noqa: E402,F401  (for the test files)

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PG = "/apis/scheduling.x-k8s.io/v1alpha1"


def pod(name, ns="ml", labels=None, node=None, **spec):
    p = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": ns},
         "spec": dict({"containers": [{"name": "c", "image": "busybox"}]}, **spec),
         "status": {"phase": "Pending"}}
    if labels:
        p["metadata"]["labels"] = labels
    if node:
        p["spec"]["nodeName"] = node
    return p


def node(name, labels=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}}}


def podgroup(name, ns="ml", min_member=2):
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": min_member}}


class Watch:
    """Reads a watch stream the way troupe must: buffer what arrives, split on
    newlines.  end becomes "clean" (terminating chunk) or "abrupt"."""

    def __init__(self, port, path, token=None, timeout=5, context=None):
        if context is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        else:
            self.conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout,
                                                    context=context)
        headers = {"Authorization": "Bearer " + token} if token else {}
        self.conn.request("GET", path, headers=headers)
        self.resp = self.conn.getresponse()
        self.buf = b""
        self.reads = []
        self.end = None

    def _fill(self):
        try:
            data = self.resp.read1(65536)
        except http.client.IncompleteRead:
            self.end = "abrupt"
            return False
        except ConnectionError:
            self.end = "abrupt"
            return False
        if not data:
            self.end = "clean"
            return False
        self.reads.append(data)
        self.buf += data
        return True

    def next(self):
        """The next event, or None once the stream has ended."""
        while b"\n" not in self.buf:
            if self.end or not self._fill():
                return None
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def take(self, n):
        out = []
        for _ in range(n):
            ev = self.next()
            if ev is None:
                break
            out.append(ev)
        return out

    def drain(self):
        out = []
        while True:
            ev = self.next()
            if ev is None:
                return out
            out.append(ev)

    def close(self):
        self.conn.close()


class Base(unittest.TestCase):
    server_kwargs = {}

    def setUp(self):
        self.s = FakeAPIServer(**self.server_kwargs).start()
        self.addCleanup(self.s.stop)

    def call(self, method, path, body=None, headers=None, token=None, raw=False):
        c = http.client.HTTPConnection("127.0.0.1", self.s.port, timeout=5)
        h = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            h.setdefault("Content-Type", "application/json")
        if token:
            h["Authorization"] = "Bearer " + token
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        if not raw and data and (r.getheader("Content-Type") or "").startswith("application/json"):
            data = json.loads(data)
        return r.status, r, data

    def watch(self, path, **kw):
        w = Watch(self.s.port, path, **kw)
        self.addCleanup(w.close)
        return w

    def bind(self, name, node_name, ns="ml", token=None, **meta):
        b = {"apiVersion": "v1", "kind": "Binding",
             "metadata": dict({"name": name, "namespace": ns}, **meta),
             "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        return self.call("POST", "/api/v1/namespaces/%s/pods/%s/binding" % (ns, name), b,
                         token=token)


# ---------------------------------------------------------------------------
