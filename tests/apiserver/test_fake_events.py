#!/usr/bin/env python3
"""Self-tests of the fake API server's events.k8s.io/v1 Events
(fake_events.py): create with kube-apiserver's validation, 409 on a name taken,
the series PATCH client-go's recorder sends, 404 for a missing Event, the
immutable note, and deny() of create.

Run alone: python3 tests/apiserver/test_fake_events.py -v
(meson's apiserver-selftest runs every test_fake_*.py).
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from selftest_common import Base  # noqa: E402
from fake_events import series_count  # noqa: E402

PATH = "/apis/events.k8s.io/v1/namespaces/ml/events"
PATCH = {"Content-Type": "application/strategic-merge-patch+json"}


def event(name="p1.18a", **over):
    ev = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
          "metadata": {"name": name, "namespace": "ml"},
          "eventTime": "2026-12-01T23:10:00.123456Z", "reportingController": "troupe",
          "reportingInstance": "troupe-0", "action": "Binding", "reason": "BindRefused",
          "type": "Warning", "note": "node is cordoned",
          "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "ml", "name": "p1",
                        "uid": "u1"}}
    ev.update(over)
    return ev


class EventTests(Base):
    def test_create_get_list(self):
        st, _, body = self.call("POST", PATH, event())
        self.assertEqual(st, 201, body)
        self.assertTrue(body["metadata"]["uid"])
        st, _, got = self.call("GET", PATH + "/p1.18a")
        self.assertEqual((st, got["note"]), (200, "node is cordoned"))
        st, _, lst = self.call("GET", PATH)
        self.assertEqual([e["metadata"]["name"] for e in lst["items"]], ["p1.18a"])
        self.assertEqual(len(self.s.events_list(reason="BindRefused", regarding_name="p1")), 1)
        self.assertEqual(self.s.events_list(reason="Other"), [])
        st, _, body = self.call("POST", PATH, event())
        self.assertEqual((st, body["reason"]), (409, "AlreadyExists"))

    def test_create_is_validated(self):
        for over, field in (({"reportingController": ""}, "reportingController"),
                            ({"type": "Odd"}, "type"),
                            ({"note": "x" * 1025}, "note"),
                            ({"eventTime": None}, "eventTime"),
                            ({"series": {"count": 1, "lastObservedTime": "t"}}, "series.count")):
            ev = event(**over)
            st, _, body = self.call("POST", PATH, ev)
            self.assertEqual(st, 422, (over, body))
            self.assertIn(field, [c["field"] for c in body["details"]["causes"]], body)
        ev = event()
        ev["regarding"]["namespace"] = "other"
        self.assertEqual(self.call("POST", PATH, ev)[0], 422)
        self.assertEqual(self.s.events_list(), [])

    def test_series_patch(self):
        self.assertEqual(self.call("POST", PATH, event())[0], 201)
        series = {"series": {"count": 7, "lastObservedTime": "2026-12-01T23:11:00.000000Z"}}
        st, _, body = self.call("PATCH", PATH + "/p1.18a", series, headers=PATCH)
        self.assertEqual(st, 200, body)
        self.assertEqual(series_count(self.s.events_list()[0]), 7)
        self.assertEqual([w[0] for w in self.s.event_writes], ["POST", "PATCH"])
        # Missing: 404, so client-go (and troupe) create it again.
        st, _, body = self.call("PATCH", PATH + "/gone", series, headers=PATCH)
        self.assertEqual((st, body["reason"]), (404, "NotFound"))
        # The note may not change.
        st, _, body = self.call("PATCH", PATH + "/p1.18a", {"note": "other"}, headers=PATCH)
        self.assertEqual(st, 422, body)
        self.assertEqual(self.s.events_list()[0]["note"], "node is cordoned")

    def test_deny_create(self):
        self.s.deny("create", "events", group="events.k8s.io")
        st, _, body = self.call("POST", PATH, event())
        self.assertEqual(st, 403, body)
        self.s.allow("create", "events", group="events.k8s.io")
        self.assertEqual(self.call("POST", PATH, event())[0], 201)


if __name__ == "__main__":
    unittest.main()
