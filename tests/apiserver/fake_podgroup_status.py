"""PodGroup status writes on the fake API server, for the tests of troupe's
status writer (src/cache/podgroup_status.c).

The fake server already serves GET, PUT and merge PATCH of
.../podgroups/NAME/status with optimistic concurrency (fake_writes.py: a write
carrying a stale metadata.resourceVersion gets 409 Conflict, as from
kube-apiserver). StatusWrites adds what the tests need around that, through
the server's status_write_hook (called before every PUT or PATCH of a /status):

  - writes: every status write received, as (method, namespace, name, body);
  - race_next(n): the next n status writes of a PodGroup each meet a
    concurrent writer: just before the write is judged, another client changes
    the object (an annotation), so its resourceVersion moves on and the write's
    precondition fails with a real 409, as when scheduler-plugins' controller
    writes the same PodGroup at the same moment. Unlike fail_next(n, 409),
    the object really changed: a writer that retries without reading it again
    keeps failing;
  - prune: status fields the CRD's schema does not know, dropped from every
    status write as kube-apiserver's pruning drops them (scheduler-plugins'
    own CRD has no status.scheduled).
"""

import json
import threading


class StatusWrites:
    """Install on a FakeAPIServer (before troupe starts writing)."""

    def __init__(self, fake):
        self.fake = fake
        self.writes = []            # (method, ns, name, body as parsed JSON or None)
        self.raced = 0              # concurrent changes made so far
        self._races = 0
        self.prune = set()          # status fields dropped from every write
        self._lock = threading.Lock()
        fake.status_write_hook = self._hook

    def race_next(self, n):
        """Make the next n PodGroup status writes meet a concurrent change."""
        with self._lock:
            self._races = n

    def podgroup_writes(self, ns=None, name=None):
        """The status writes of PodGroups received so far (optionally of one)."""
        with self._lock:
            return [w for w in self.writes
                    if (ns is None or w[1] == ns) and (name is None or w[2] == name)]

    def _hook(self, info, ns, name, method, body):
        try:
            parsed = json.loads(body.decode("utf-8")) if body else None
        except (UnicodeDecodeError, ValueError):
            parsed = None
        with self._lock:
            if info.plural != "podgroups":
                return
            self.writes.append((method, ns, name, parsed))
            race = self._races > 0
            if race:
                self._races -= 1
                self.raced += 1
                n = self.raced
            prune = set(self.prune)
        if race:
            try:
                self.fake.patch("podgroups", ns, name, {"metadata": {"annotations": {
                    "test.troupe.io/concurrent-writer": str(n)}}})
            except KeyError:
                pass
        if prune and isinstance(parsed, dict) and isinstance(parsed.get("status"), dict):
            for k in prune:
                parsed["status"].pop(k, None)
            return json.dumps(parsed).encode()
        return None
