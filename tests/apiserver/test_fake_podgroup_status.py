#!/usr/bin/env python3
"""Self-tests of PodGroup status writes on the fake API server, as troupe's
status writer (src/cache/podgroup_status_writer.c) relies on them: GET, merge
PATCH and PUT of .../podgroups/NAME/status, a write carrying a stale
resourceVersion refused with 409 as kube-apiserver refuses it, /status changing
only the status, and fake_podgroup_status.StatusWrites (the writes recorded; a
concurrent writer that really changes the object before the next n writes).

Run alone: python3 tests/apiserver/test_fake_podgroup_status.py -v
(meson's apiserver-selftest runs every test_fake_*.py).
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_podgroup_status import StatusWrites  # noqa: E402
from selftest_common import Base, podgroup, PG  # noqa: E402

PATH = PG + "/namespaces/ml/podgroups/g/status"
MP = {"Content-Type": "application/merge-patch+json"}


class PodGroupStatusTests(Base):
    def setUp(self):
        super().setUp()
        self.writes = StatusWrites(self.s)
        self.rv = self.s.create("podgroups", podgroup("g", min_member=3))["metadata"][
            "resourceVersion"]

    def patch(self, rv, status):
        return self.call("PATCH", PATH, {"metadata": {"resourceVersion": rv},
                                         "status": status}, headers=MP)

    def test_get_patch_put_with_resource_versions(self):
        st, _, got = self.call("GET", PATH)
        self.assertEqual((st, got["metadata"]["resourceVersion"]), (200, self.rv))
        st, _, out = self.patch(self.rv, {"phase": "Pending"})
        self.assertEqual((st, out["status"]), (200, {"phase": "Pending"}))
        new_rv = out["metadata"]["resourceVersion"]
        self.assertNotEqual(new_rv, self.rv)
        # The version read before is stale now: 409, and nothing changes.
        st, _, out = self.patch(self.rv, {"phase": "Running"})
        self.assertEqual((st, out["reason"]), (409, "Conflict"))
        self.assertEqual(self.s.get("podgroups", "ml", "g")["status"], {"phase": "Pending"})
        # PUT of /status with the current version; its spec is ignored.
        obj = self.s.get("podgroups", "ml", "g")
        obj["status"] = {"phase": "Scheduling", "scheduled": 3}
        obj["spec"]["minMember"] = 9
        st, _, out = self.call("PUT", PATH, obj)
        self.assertEqual(st, 200, out)
        self.assertEqual(out["status"], {"phase": "Scheduling", "scheduled": 3})
        self.assertEqual(out["spec"]["minMember"], 3, "/status changes only the status")
        self.assertEqual([w[0] for w in self.writes.podgroup_writes("ml", "g")],
                         ["PATCH", "PATCH", "PUT"])

    def test_race_next_makes_real_conflicts(self):
        self.writes.race_next(2)
        for _ in range(2):
            rv = self.s.get("podgroups", "ml", "g")["metadata"]["resourceVersion"]
            st, _, _ = self.patch(rv, {"phase": "Pending"})
            self.assertEqual(st, 409, "the object changed under the write")
        # The object really changed (a reader that does not read again keeps failing).
        pg = self.s.get("podgroups", "ml", "g")
        self.assertEqual(pg["metadata"]["annotations"], {"test.troupe.io/concurrent-writer": "2"})
        self.assertEqual(self.writes.raced, 2)
        st, _, out = self.patch(pg["metadata"]["resourceVersion"], {"phase": "Pending"})
        self.assertEqual((st, out["status"]), (200, {"phase": "Pending"}))
        self.assertEqual(out["metadata"]["annotations"],
                         {"test.troupe.io/concurrent-writer": "2"}, "kept by a status write")


if __name__ == "__main__":
    unittest.main()
