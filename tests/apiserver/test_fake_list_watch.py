#!/usr/bin/env python3
"""Self-tests of the fake API server's LIST and WATCH: paged lists from one
snapshot, continue tokens and their expiry, exact resourceVersions and selectors;
watch replay from a resourceVersion, synthetic ADDED events, split events,
bookmarks, timeouts, 410 in and out of the stream, cuts mid-event, selector
transitions and the watch-list protocol.

Run alone: python3 tests/apiserver/test_fake_list_watch.py -v
(meson's apiserver-selftest runs every test_fake_*.py).
"""
import json
import os
import random
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from selftest_common import Base, node, pod, podgroup, PG  # noqa: E402
from fake_apiserver import MSG_CONTINUE_INCONSISTENT, MSG_LIST_EXPIRED  # noqa: E402

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


if __name__ == "__main__":
    unittest.main()
