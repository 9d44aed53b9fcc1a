#!/usr/bin/env python3
"""Self-tests for fake_apiserver.py: they pin the Kubernetes semantics troupe
relies on (paging snapshots, watch replay and expiry, bookmarks, binding
checks, access reviews and 403s, faults), using only http.client as a client
would.

Run: python3 tests/apiserver/test_fake_apiserver.py -v
"""
import http.client
import json
import os
import random
import socket
import ssl
import subprocess
import tempfile
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, "..", "integration"))   # tls_certs

from fake_apiserver import FakeAPIServer, MSG_CONTINUE_INCONSISTENT, MSG_LIST_EXPIRED  # noqa: E402
import tls_certs  # noqa: E402

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

class ListTests(Base):
    def test_list_shape(self):
        self.s.create("pods", pod("a"))
        self.s.create("podgroups", podgroup("g"))
        st, r, body = self.call("GET", "/api/v1/pods")
        self.assertEqual(st, 200)
        self.assertEqual((body["kind"], body["apiVersion"]), ("PodList", "v1"))
        self.assertEqual(body["metadata"], {"resourceVersion": self.s.resource_version})
        # Typed lists leave kind/apiVersion off their items ...
        self.assertNotIn("kind", body["items"][0])
        self.assertNotIn("apiVersion", body["items"][0])
        # ... custom-resource (unstructured) lists keep them.
        st, r, body = self.call("GET", PG + "/podgroups")
        self.assertEqual(body["kind"], "PodGroupList")
        self.assertEqual(body["items"][0]["kind"], "PodGroup")
        self.assertEqual(body["items"][0]["apiVersion"], "scheduling.x-k8s.io/v1alpha1")
        # A single GET carries its type.
        st, r, body = self.call("GET", "/api/v1/namespaces/ml/pods/a")
        self.assertEqual((st, body["kind"], body["apiVersion"]), (200, "Pod", "v1"))
        self.assertTrue(body["metadata"]["uid"])

    def test_paging_snapshot_under_concurrent_writes(self):
        for ns in ("a", "b"):
            for i in range(10):
                self.s.create("pods", pod("p%02d" % i, ns=ns))
        expected = {(p["metadata"]["namespace"], p["metadata"]["name"]):
                    p["metadata"]["resourceVersion"] for p in self.s.list("pods")}

        st, _, first = self.call("GET", "/api/v1/pods?limit=6")
        self.assertEqual(len(first["items"]), 6)
        self.assertEqual(first["metadata"]["remainingItemCount"], 14)
        list_rv = first["metadata"]["resourceVersion"]

        stop = threading.Event()

        def writer():
            n = 0
            while not stop.is_set():
                n += 1
                ns, i = random.choice("ab"), random.randrange(10)
                cur = self.s.get("pods", ns, "p%02d" % i)
                if cur is not None:
                    cur["metadata"].setdefault("labels", {})["n"] = str(n)
                    self.s.update("pods", cur)
                    if n % 7 == 0:
                        self.s.delete("pods", ns, "p%02d" % i)
                self.s.create("pods", pod("new%04d" % n, ns=ns))
                time.sleep(0.001)

        t = threading.Thread(target=writer)
        t.start()
        try:
            items, page, pages = list(first["items"]), first, 1
            while page["metadata"].get("continue"):
                time.sleep(0.02)
                st, _, page = self.call("GET", "/api/v1/pods?limit=6&continue="
                                        + page["metadata"]["continue"])
                self.assertEqual(st, 200)
                self.assertEqual(page["metadata"]["resourceVersion"], list_rv)
                items += page["items"]
                pages += 1
        finally:
            stop.set()
            t.join()
        got = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in items]
        self.assertEqual(got, sorted(expected))        # ordered by namespace/name
        self.assertEqual({k: p["metadata"]["resourceVersion"] for k, p in zip(got, items)},
                         expected)                     # exactly the state at list_rv
        self.assertEqual(pages, 4)
        st, _, fresh = self.call("GET", "/api/v1/pods")
        self.assertGreater(int(fresh["metadata"]["resourceVersion"]), int(list_rv))

    def test_paging_namespace_and_selector(self):
        for i in range(5):
            self.s.create("pods", pod("p%d" % i, ns="a", labels={"app": "x" if i % 2 else "y"}))
        self.s.create("pods", pod("other", ns="b", labels={"app": "x"}))
        st, _, page = self.call("GET", "/api/v1/namespaces/a/pods?limit=1&labelSelector=app%3Dx")
        self.assertEqual([p["metadata"]["name"] for p in page["items"]], ["p1"])
        # No remainingItemCount when a selector filters (the count is unknown).
        self.assertNotIn("remainingItemCount", page["metadata"])
        names = ["p1"]
        while page["metadata"].get("continue"):
            st, _, page = self.call("GET", "/api/v1/namespaces/a/pods?limit=1&labelSelector="
                                    "app%3Dx&continue=" + page["metadata"]["continue"])
            names += [p["metadata"]["name"] for p in page["items"]]
        # The last page may be empty: the server examined keys that did not match.
        self.assertEqual(names, ["p1", "p3"])

    def test_expired_continue_is_410(self):
        for i in range(5):
            self.s.create("pods", pod("p%d" % i))
        st, _, page = self.call("GET", "/api/v1/pods?limit=2")
        token = page["metadata"]["continue"]
        self.s.create("pods", pod("p9"))
        self.s.compact()
        st, _, body = self.call("GET", "/api/v1/pods?limit=2&continue=" + token)
        self.assertEqual(st, 410)
        self.assertEqual((body["kind"], body["reason"], body["code"]), ("Status", "Expired", 410))
        self.assertEqual(body["message"], MSG_CONTINUE_INCONSISTENT)
        self.assertTrue(body["message"].startswith("The provided continue parameter is too old"))
        # The 410 offers a token that continues (inconsistently) at the latest version.
        st, _, rest = self.call("GET", "/api/v1/pods?continue=" + body["metadata"]["continue"])
        self.assertEqual(st, 200)
        self.assertEqual([p["metadata"]["name"] for p in rest["items"]], ["p2", "p3", "p4", "p9"])
        self.assertEqual(rest["metadata"]["resourceVersion"], self.s.resource_version)

    def test_continue_rejects_resource_version_and_garbage(self):
        self.s.create("pods", pod("a"))
        self.s.create("pods", pod("b"))
        st, _, page = self.call("GET", "/api/v1/pods?limit=1")
        st, _, body = self.call("GET", "/api/v1/pods?resourceVersion=5&continue="
                                + page["metadata"]["continue"])
        self.assertEqual((st, body["reason"]), (400, "BadRequest"))
        st, _, body = self.call("GET", "/api/v1/pods?continue=notatoken")
        self.assertEqual(st, 400)
        self.assertTrue(body["message"].startswith("invalid continue token"))

    def test_list_exact_resource_version(self):
        self.s.create("pods", pod("a"))
        rv = self.s.resource_version
        self.s.create("pods", pod("b"))
        st, _, body = self.call("GET", "/api/v1/pods?resourceVersionMatch=Exact&resourceVersion="
                                + rv)
        self.assertEqual([p["metadata"]["name"] for p in body["items"]], ["a"])
        self.assertEqual(body["metadata"]["resourceVersion"], rv)
        self.s.compact()
        st, _, body = self.call("GET", "/api/v1/pods?resourceVersionMatch=Exact&resourceVersion="
                                + rv)
        self.assertEqual((st, body["reason"], body["message"]), (410, "Expired", MSG_LIST_EXPIRED))
        st, _, body = self.call("GET", "/api/v1/pods?resourceVersionMatch=Exact")
        self.assertEqual((st, body["reason"]), (422, "Invalid"))

    def test_selectors(self):
        self.s.create("pods", pod("web", labels={"app": "web", "tier": "fe"}, node="n1"))
        self.s.create("pods", pod("db", labels={"app": "db"}))
        self.s.create("pods", pod("bare"))

        def names(q):
            st, _, body = self.call("GET", "/api/v1/pods?" + q)
            self.assertEqual(st, 200, body)
            return sorted(p["metadata"]["name"] for p in body["items"])

        self.assertEqual(names("labelSelector=app%3Dweb"), ["web"])
        self.assertEqual(names("labelSelector=app%3D%3Dweb"), ["web"])
        self.assertEqual(names("labelSelector=app!%3Dweb"), ["bare", "db"])
        self.assertEqual(names("labelSelector=tier"), ["web"])
        self.assertEqual(names("labelSelector=!tier"), ["bare", "db"])
        self.assertEqual(names("labelSelector=app,!tier"), ["db"])
        self.assertEqual(names("labelSelector=app%20in%20(web,db)"), ["db", "web"])
        self.assertEqual(names("fieldSelector=spec.nodeName%3D"), ["bare", "db"])
        self.assertEqual(names("fieldSelector=spec.nodeName%3Dn1"), ["web"])
        self.assertEqual(names("fieldSelector=spec.nodeName!%3D,metadata.name%3Dweb"), ["web"])
        st, _, body = self.call("GET", "/api/v1/pods?fieldSelector=spec.foo%3Dx")
        self.assertEqual((st, body["message"]), (400, "field label not supported: spec.foo"))
        st, _, body = self.call("GET", "/api/v1/pods?labelSelector=a%3D%3D%3Db")
        self.assertEqual(st, 400)


# ---------------------------------------------------------------------------

class WatchTests(Base):
    def test_watch_from_rv_gets_exactly_later_events(self):
        self.s.create("pods", pod("p1"))
        st, _, lst = self.call("GET", "/api/v1/pods")
        rv0 = lst["metadata"]["resourceVersion"]
        self.s.create("pods", pod("p2"))
        p1 = self.s.get("pods", "ml", "p1")
        p1["metadata"]["labels"] = {"x": "1"}
        self.s.update("pods", p1)
        self.s.create("nodes", node("n1"))          # another kind: never in a pod stream
        self.s.delete("pods", "ml", "p2")

        w = self.watch("/api/v1/pods?watch=1&resourceVersion=%s&timeoutSeconds=1" % rv0)
        self.assertEqual(w.resp.status, 200)
        self.assertEqual(w.resp.getheader("Transfer-Encoding"), "chunked")
        self.assertEqual(w.resp.getheader("Content-Type"), "application/json")
        evs = w.take(3)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
                         [("ADDED", "p2"), ("MODIFIED", "p1"), ("DELETED", "p2")])
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
        self.assertEqual(rvs, sorted(rvs))
        self.assertGreater(rvs[0], int(rv0))
        for e in evs:
            self.assertEqual((e["object"]["kind"], e["object"]["apiVersion"]), ("Pod", "v1"))
        # Then live changes.
        self.s.create("pods", pod("p3"))
        ev = w.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "p3"))
        self.assertEqual(w.drain(), [])           # no bookmarks: not asked for
        self.assertEqual(w.end, "clean")

    def test_watch_from_zero_starts_with_synthetic_added(self):
        for n in ("a", "b", "c"):
            self.s.create("pods", pod(n))
        for q in ("resourceVersion=0", "resourceVersion="):
            w = self.watch("/api/v1/pods?watch=true&timeoutSeconds=1&" + q)
            evs = w.take(3)
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
                             [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")])
        self.s.create("pods", pod("d"))
        ev = w.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "d"))

    def test_event_split_across_reads(self):
        rv = self.s.resource_version
        self.s.split_events = True
        self.s.create("pods", pod("split", labels={"k": "v" * 200}))
        w = self.watch("/api/v1/pods?watch=1&timeoutSeconds=1&resourceVersion=" + rv)
        ev = w.next()
        self.assertEqual(ev["object"]["metadata"]["name"], "split")
        self.assertGreaterEqual(len(w.reads), 2)
        self.assertFalse(w.reads[0].endswith(b"\n"))   # the first read held half an event

    def test_bookmarks(self):
        self.s.bookmark_interval = 0.2
        rv = self.s.resource_version
        w = self.watch("/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=1"
                       "&resourceVersion=" + rv)
        first = w.next()
        self.assertEqual(first["type"], "BOOKMARK")
        self.assertEqual((first["object"]["kind"], first["object"]["apiVersion"]), ("Pod", "v1"))
        self.assertEqual(first["object"]["metadata"]["resourceVersion"], rv)
        self.s.create("nodes", node("n1"))           # moves the global version on
        evs = w.drain()
        self.assertEqual(w.end, "clean")
        self.assertTrue(evs and all(e["type"] == "BOOKMARK" for e in evs))
        # The bookmark sent just before the timeout carries the newest version.
        self.assertEqual(evs[-1]["object"]["metadata"]["resourceVersion"], self.s.resource_version)
        # Without allowWatchBookmarks none come.
        w = self.watch("/api/v1/pods?watch=1&timeoutSeconds=1&resourceVersion=" + rv)
        self.assertEqual(w.drain(), [])

    def test_timeout_ends_cleanly_and_connection_is_reused(self):
        t0 = time.monotonic()
        w = self.watch("/api/v1/nodes?watch=1&timeoutSeconds=1&resourceVersion="
                       + self.s.resource_version)
        sock = w.conn.sock
        self.assertEqual(w.drain(), [])
        self.assertEqual(w.end, "clean")
        self.assertLess(time.monotonic() - t0, 3)
        w.conn.request("GET", "/healthz")              # keep-alive after the stream ended
        r = w.conn.getresponse()
        self.assertEqual((r.status, r.read()), (200, b"ok"))
        self.assertIs(w.conn.sock, sock)

    def test_server_picks_timeout(self):
        self.s.watch_timeout_range = (0.3, 0.5)
        w = self.watch("/api/v1/pods?watch=1&resourceVersion=" + self.s.resource_version)
        self.assertEqual(w.drain(), [])
        self.assertEqual(w.end, "clean")

    def test_410_in_stream_after_compact(self):
        rv0 = self.s.resource_version
        self.s.create("pods", pod("a"))
        self.s.compact()
        w = self.watch("/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv0)
        self.assertEqual(w.resp.status, 200)
        evs = w.drain()
        self.assertEqual(len(evs), 1)
        self.assertEqual(evs[0]["type"], "ERROR")
        obj = evs[0]["object"]
        self.assertEqual((obj["kind"], obj["code"], obj["reason"]), ("Status", 410, "Expired"))
        self.assertEqual(obj["message"], "too old resource version: %s (%s)"
                         % (rv0, self.s.resource_version))
        self.assertEqual(w.end, "clean")
        # Resuming from a version at or after the compaction point works.
        w = self.watch("/api/v1/pods?watch=1&timeoutSeconds=1&resourceVersion="
                       + self.s.resource_version)
        self.assertEqual(w.drain(), [])

    def test_410_as_http_status(self):
        rv0 = self.s.resource_version
        self.s.create("pods", pod("a"))
        self.s.compact()
        self.s.watch_410_mode = "status"
        st, _, body = self.call("GET", "/api/v1/pods?watch=1&resourceVersion=" + rv0)
        self.assertEqual((st, body["kind"], body["reason"], body["code"]),
                         (410, "Status", "Expired", 410))

    def test_cut_mid_event(self):
        w = self.watch("/api/v1/pods?watch=1&resourceVersion=" + self.s.resource_version)
        other = self.watch("/api/v1/nodes?watch=1&resourceVersion=" + self.s.resource_version)
        self.assertTrue(self.s.wait_for_watches("pods", 1))
        self.assertTrue(self.s.wait_for_watches("nodes", 1))
        self.s.create("pods", pod("a"))
        self.assertEqual(w.next()["type"], "ADDED")
        self.s.cut_watches("pods", mid_event=True)
        self.assertIsNone(w.next())
        self.assertEqual(w.end, "abrupt")              # no terminating chunk
        self.assertTrue(w.buf)                          # a partial line was left over
        self.assertFalse(w.buf.endswith(b"\n"))
        with self.assertRaises(ValueError):
            json.loads(w.buf)
        self.assertTrue(self.s.wait_for(lambda: self.s.open_watches("pods") == 0))
        self.assertEqual(self.s.open_watches("nodes"), 1)  # other kinds untouched

    def test_cut_with_pending_event_is_replayed_on_resume(self):
        w = self.watch("/api/v1/pods?watch=1&resourceVersion=" + self.s.resource_version)
        self.assertTrue(self.s.wait_for_watches("pods", 1))
        last = self.s.resource_version
        with self.s._lock:                     # the cut and the change race on purpose
            self.s.create("pods", pod("b"))
            self.s.cut_watches("pods")
        self.assertEqual(w.drain(), [])
        self.assertEqual(w.end, "abrupt")
        w = self.watch("/api/v1/pods?watch=1&timeoutSeconds=1&resourceVersion=" + last)
        ev = w.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "b"))

    def test_selector_transitions(self):
        self.s.create("pods", pod("p1"))
        rv = self.s.resource_version
        w = self.watch("/api/v1/pods?watch=1&timeoutSeconds=2&fieldSelector=spec.nodeName%3D"
                       "&resourceVersion=" + rv)
        lw = self.watch("/api/v1/pods?watch=1&timeoutSeconds=2&labelSelector=team%3Dml"
                        "&resourceVersion=" + rv)
        st, _, _ = self.bind("p1", "n1")
        self.assertEqual(st, 201)
        ev = w.next()
        # Leaving the selector arrives as DELETED with the old content and the new version.
        self.assertEqual(ev["type"], "DELETED")
        self.assertNotIn("nodeName", ev["object"]["spec"])
        self.assertEqual(ev["object"]["metadata"]["resourceVersion"], self.s.resource_version)
        self.s.patch("pods", "ml", "p1", {"metadata": {"labels": {"team": "ml"}}})
        ev = lw.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "p1"))

    def test_send_initial_events(self):
        self.s.create("pods", pod("a"))
        w = self.watch("/api/v1/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                       "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
        evs = w.take(2)
        self.assertEqual(evs[0]["type"], "ADDED")
        self.assertEqual(evs[1]["type"], "BOOKMARK")
        self.assertEqual(evs[1]["object"]["metadata"]["annotations"],
                         {"k8s.io/initial-events-end": "true"})


# ---------------------------------------------------------------------------

class BindingTests(Base):
    def setUp(self):
        super().setUp()
        p = pod("p1")
        p["metadata"]["annotations"] = {"keep": "me"}
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                      "reason": "Unschedulable"}]
        self.pod = self.s.create("pods", p)
        self.uid = self.pod["metadata"]["uid"]

    def test_success(self):
        w = self.watch("/api/v1/pods?watch=1&timeoutSeconds=2&resourceVersion="
                       + self.s.resource_version)
        st, _, body = self.bind("p1", "gpu-a", uid=self.uid,
                                annotations={"troupe.io/placement": "rack-1"})
        self.assertEqual(st, 201)
        self.assertEqual(body, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Success", "code": 201})
        p = self.s.get("pods", "ml", "p1")
        self.assertEqual(p["spec"]["nodeName"], "gpu-a")
        self.assertEqual(p["metadata"]["annotations"],
                         {"keep": "me", "troupe.io/placement": "rack-1"})
        conds = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"]
        self.assertEqual(len(conds), 1)
        self.assertEqual(conds[0]["status"], "True")
        self.assertNotIn("reason", conds[0])
        ev = w.next()
        self.assertEqual(ev["type"], "MODIFIED")
        self.assertEqual(ev["object"]["spec"]["nodeName"], "gpu-a")
        self.assertEqual(ev["object"]["metadata"]["resourceVersion"],
                         p["metadata"]["resourceVersion"])
        self.assertEqual(self.s.bindings[-1]["target"]["name"], "gpu-a")

    def test_already_assigned(self):
        self.assertEqual(self.bind("p1", "gpu-a")[0], 201)
        st, _, body = self.bind("p1", "gpu-b")
        self.assertEqual(st, 409)
        self.assertEqual(body["reason"], "Conflict")
        self.assertEqual(body["message"], 'Operation cannot be fulfilled on pods/binding "p1": '
                                          'pod p1 is already assigned to node "gpu-a"')
        self.assertEqual(body["details"], {"name": "p1", "kind": "pods/binding"})

    def test_uid_precondition(self):
        st, _, body = self.bind("p1", "gpu-a", uid="not-the-uid")
        self.assertEqual((st, body["reason"]), (409, "Conflict"))
        self.assertTrue(body["message"].startswith('Operation cannot be fulfilled on pods "p1": '))
        self.assertIn("Precondition failed: UID in precondition: not-the-uid, UID in object "
                      "meta: " + self.uid, body["message"])
        self.assertNotIn("nodeName", self.s.get("pods", "ml", "p1")["spec"])

    def test_missing_pod(self):
        st, _, body = self.bind("ghost", "gpu-a")
        self.assertEqual((st, body["reason"], body["message"]),
                         (404, "NotFound", 'pods "ghost" not found'))

    def test_name_mismatch(self):
        b = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "other"},
             "target": {"kind": "Node", "name": "gpu-a"}}
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/p1/binding", b)
        self.assertEqual((st, body["reason"], body["message"]),
                         (400, "BadRequest", "name in URL does not match name in Binding object"))

    def test_target_validation_is_untyped_500(self):
        b = {"metadata": {"name": "p1"}, "target": {"kind": "Pod", "name": "gpu-a"}}
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/p1/binding", b)
        self.assertEqual(st, 500)
        self.assertNotIn("reason", body)          # StatusReasonUnknown is ""
        self.assertEqual(body["message"], 'target.kind: Unsupported value: "Pod": supported '
                                          'values: "Node", "<empty>"')
        b = {"metadata": {"name": "p1"}, "target": {}}
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/p1/binding", b)
        self.assertEqual((st, body["message"]), (500, "target.name: Required value"))

    def test_not_json(self):
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/p1/binding", b"{nope",
                                headers={"Content-Type": "application/json"})
        self.assertEqual((st, body["reason"]), (400, "BadRequest"))
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods/p1/binding", b"[1]",
                                headers={"Content-Type": "application/json"})
        self.assertEqual(st, 400)

    def test_terminating_and_gated(self):
        self.s.begin_delete("pods", "ml", "p1")
        st, _, body = self.bind("p1", "gpu-a")
        self.assertEqual(st, 409)
        self.assertIn("pod p1 is being deleted, cannot be assigned to a host", body["message"])
        self.s.create("pods", pod("gated", schedulingGates=[{"name": "wait"}]))
        st, _, body = self.bind("gated", "gpu-a")
        self.assertEqual(st, 409)
        self.assertIn("pod gated has non-empty .spec.schedulingGates", body["message"])

    def test_legacy_bindings_path(self):
        b = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"},
             "target": {"name": "gpu-c"}}
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/bindings", b)
        self.assertEqual(st, 201)
        self.assertEqual(self.s.get("pods", "ml", "p1")["spec"]["nodeName"], "gpu-c")


# ---------------------------------------------------------------------------

class WriteTests(Base):
    MP = {"Content-Type": "application/merge-patch+json"}

    def test_merge_patch(self):
        p = pod("p1", labels={"a": "1"})
        p["metadata"]["annotations"] = {"gone": "x", "kept": "y"}
        self.s.create("pods", p)
        rv = self.s.resource_version
        w = self.watch("/api/v1/pods?watch=1&timeoutSeconds=2&resourceVersion=" + rv)
        patch = {"metadata": {"labels": {"b": "2"}, "annotations": {"gone": None}},
                 "status": {"phase": "Running"}}
        st, _, body = self.call("PATCH", "/api/v1/namespaces/ml/pods/p1", json.dumps(patch),
                                headers=self.MP)
        self.assertEqual(st, 200)
        self.assertEqual(body["kind"], "Pod")
        self.assertEqual(body["metadata"]["labels"], {"a": "1", "b": "2"})
        self.assertEqual(body["metadata"]["annotations"], {"kept": "y"})
        self.assertEqual(body["status"]["phase"], "Pending")    # status only via /status
        self.assertGreater(int(body["metadata"]["resourceVersion"]), int(rv))
        ev = w.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["labels"]["b"]), ("MODIFIED", "2"))
        # /status changes only status.
        st, _, body = self.call("PATCH", "/api/v1/namespaces/ml/pods/p1/status",
                                json.dumps(patch), headers=self.MP)
        self.assertEqual((st, body["status"]["phase"]), (200, "Running"))
        # A no-op patch does not bump the version.
        st, _, again = self.call("PATCH", "/api/v1/namespaces/ml/pods/p1",
                                 json.dumps({"metadata": {"labels": {"b": "2"}}}), headers=self.MP)
        self.assertEqual(again["metadata"]["resourceVersion"], body["metadata"]["resourceVersion"])
        # Stale resourceVersion: optimistic-concurrency conflict.
        st, _, err = self.call("PATCH", "/api/v1/namespaces/ml/pods/p1",
                               json.dumps({"metadata": {"resourceVersion": rv}}), headers=self.MP)
        self.assertEqual((st, err["reason"]), (409, "Conflict"))
        self.assertIn("the object has been modified", err["message"])
        st, _, err = self.call("PATCH", "/api/v1/namespaces/ml/pods/p1", "{}",
                               headers={"Content-Type": "application/json"})
        self.assertEqual(st, 415)
        st, _, err = self.call("PATCH", "/api/v1/namespaces/ml/pods/nope", "{}", headers=self.MP)
        self.assertEqual(st, 404)

    def test_put_and_create(self):
        st, _, created = self.call("POST", "/api/v1/namespaces/ml/pods", pod("p1"))
        self.assertEqual((st, created["status"]), (201, {"phase": "Pending"}))
        st, _, body = self.call("POST", "/api/v1/namespaces/ml/pods", pod("p1"))
        self.assertEqual((st, body["reason"]), (409, "AlreadyExists"))
        created["metadata"]["labels"] = {"x": "y"}
        st, _, body = self.call("PUT", "/api/v1/namespaces/ml/pods/p1", created)
        self.assertEqual((st, body["metadata"]["labels"]), (200, {"x": "y"}))
        st, _, body = self.call("PUT", "/api/v1/namespaces/ml/pods/p1", created)   # stale rv
        self.assertEqual(st, 409)
        self.s.create("podgroups", podgroup("g"))
        pg = self.s.get("podgroups", "ml", "g")
        del pg["metadata"]["resourceVersion"]
        st, _, body = self.call("PUT", PG + "/namespaces/ml/podgroups/g", pg)
        self.assertEqual((st, body["reason"]), (422, "Invalid"))   # CRs need a resourceVersion


# ---------------------------------------------------------------------------

class AuthTests(Base):
    server_kwargs = {"token": "t1"}

    def test_token_and_rotation(self):
        st, _, body = self.call("GET", "/api/v1/nodes")
        self.assertEqual(body, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": "Unauthorized",
                                "reason": "Unauthorized", "code": 401})
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="bad")[0], 401)
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="t1")[0], 200)
        self.s.rotate_token("t2")
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="t1")[0], 401)
        self.assertEqual(self.call("GET", "/api/v1/nodes", token="t2")[0], 200)
        w = self.watch("/api/v1/nodes?watch=1&timeoutSeconds=1", token="t2")
        self.assertEqual(w.resp.status, 200)


def review(verb, resource, group=None, subresource=None):
    attrs = {"verb": verb, "resource": resource}
    if group is not None:
        attrs["group"] = group
    if subresource is not None:
        attrs["subresource"] = subresource
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs}}


SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
USER = "system:serviceaccount:kube-system:troupe"


class AccessTests(Base):
    """RBAC as a client sees it: SelfSubjectAccessReviews and 403s."""
    server_kwargs = {"token": "t1"}

    def can(self, *args, **kw):
        st, _, body = self.call("POST", SSAR, review(*args, **kw), token="t1")
        self.assertEqual((st, body["kind"], body["apiVersion"]),
                         (201, "SelfSubjectAccessReview", "authorization.k8s.io/v1"), body)
        return body["status"]["allowed"]

    def test_reviews_allow_everything_by_default(self):
        st, _, body = self.call("POST", SSAR, review("create", "pods", "", "binding"), token="t1")
        self.assertEqual(st, 201)
        self.assertEqual(body["spec"], review("create", "pods", "", "binding")["spec"])
        self.assertEqual(body["status"]["allowed"], True)
        self.assertIn("RBAC: allowed by ClusterRoleBinding", body["status"]["reason"])
        self.assertEqual(self.s.access_reviews[-1],
                         {"verb": "create", "resource": "pods", "group": "",
                          "subresource": "binding"})
        # Reviews need authentication like any request.
        self.assertEqual(self.call("POST", SSAR, review("list", "pods"))[0], 401)

    def test_denied_reviews_name_verb_group_resource_and_subresource(self):
        self.s.deny("create", "pods", subresource="binding", requests=False)
        self.s.deny("list", "podgroups", group="scheduling.x-k8s.io", requests=False)
        self.assertFalse(self.can("create", "pods", "", "binding"))
        st, _, body = self.call("POST", SSAR, review("create", "pods", None, "binding"),
                                token="t1")
        self.assertEqual(body["status"], {"allowed": False}, "RBAC gives no reason")
        self.assertTrue(self.can("create", "pods"), "pods itself is another permission")
        self.assertFalse(self.can("list", "podgroups", "scheduling.x-k8s.io"))
        self.assertTrue(self.can("watch", "podgroups", "scheduling.x-k8s.io"))
        self.assertTrue(self.can("list", "podgroups"), "group \"\" is another permission")
        # Only the review changed: the requests themselves still pass.
        self.assertEqual(self.call("GET", PG + "/podgroups", token="t1")[0], 200)
        self.s.allow("create", "pods", subresource="binding")
        self.assertTrue(self.can("create", "pods", "", "binding"))

    def test_review_validation_and_absence(self):
        st, _, body = self.call("POST", SSAR, {"apiVersion": "authorization.k8s.io/v1",
                                               "kind": "SelfSubjectAccessReview", "spec": {}},
                                token="t1")
        self.assertEqual((st, body["reason"]), (422, "Invalid"))
        self.assertIn("exactly one of nonResourceAttributes or resourceAttributes",
                      body["message"])
        st, _, body = self.call("POST", SSAR, {"kind": "Binding"}, token="t1")
        self.assertEqual(st, 400)
        self.assertEqual(self.call("GET", SSAR, token="t1")[0], 405)
        self.s.serve_access_reviews = False
        st, _, body = self.call("POST", SSAR, review("list", "pods"), token="t1")
        self.assertEqual((st, body["message"]),
                         (404, "the server could not find the requested resource"))

    def test_denied_list_and_watch_answer_403(self):
        self.s.create("pods", pod("a"))
        self.s.deny("list", "pods", reviews=False)
        st, _, body = self.call("GET", "/api/v1/pods?limit=500", token="t1")
        self.assertEqual(body, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'pods is forbidden: User "%s" cannot list resource "pods" in API '
                       'group "" at the cluster scope' % USER,
            "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403})
        self.assertTrue(self.can("list", "pods"), "reviews=False leaves the review allowed")
        st, _, body = self.call("GET", "/api/v1/namespaces/ml/pods", token="t1")
        self.assertEqual(body["message"], 'pods is forbidden: User "%s" cannot list resource '
                         '"pods" in API group "" in the namespace "ml"' % USER)
        # A watch is another verb; an open one keeps streaming when it is denied.
        w = self.watch("/api/v1/pods?watch=1&resourceVersion=0", token="t1")
        self.assertEqual(w.next()["type"], "ADDED")
        self.s.deny("watch", "pods")
        self.assertFalse(self.can("watch", "pods"))
        st, _, body = self.call("GET", "/api/v1/pods?watch=1", token="t1")
        self.assertEqual((st, body["reason"]), (403, "Forbidden"))
        self.s.create("pods", pod("b"))
        self.assertEqual(w.next()["object"]["metadata"]["name"], "b")
        self.s.allow("list", "pods")
        self.s.allow("watch", "pods")
        self.assertEqual(self.call("GET", "/api/v1/pods", token="t1")[0], 200)
        self.assertTrue(self.can("watch", "pods"))

    def test_denied_binding_and_missing_crd(self):
        self.s.create("pods", pod("p"))
        self.s.deny("create", "pods", subresource="binding")
        st, _, body = self.bind("p", "n1", token="t1")
        self.assertEqual((st, body["reason"], body["details"]), (403, "Forbidden",
                         {"name": "p", "kind": "pods"}))
        self.assertEqual(body["message"], 'pods "p" is forbidden: User "%s" cannot create '
                         'resource "pods/binding" in API group "" in the namespace "ml"' % USER)
        self.assertEqual(self.s.bindings, [], "refused before the handler")
        # Authorization runs before routing: without the permission a CRD that is
        # not installed is a 403, with it a 404.
        self.s.podgroups_crd = False
        self.s.deny("list", "podgroups", group="scheduling.x-k8s.io")
        st, _, body = self.call("GET", PG + "/podgroups", token="t1")
        self.assertEqual((st, body["message"]), (403, 'podgroups.scheduling.x-k8s.io is '
                         'forbidden: User "%s" cannot list resource "podgroups" in API group '
                         '"scheduling.x-k8s.io" at the cluster scope' % USER))
        self.s.allow("list", "podgroups", group="scheduling.x-k8s.io")
        self.assertEqual(self.call("GET", PG + "/podgroups", token="t1")[0], 404)


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
