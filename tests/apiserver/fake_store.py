"""The fake API server's object store: one global resourceVersion counter like
etcd's revision, the objects of each kind, the history of changes that watches
and paged lists replay, and compaction that makes old versions answer 410.

ObjectStore is a mixin of FakeAPIServer (fake_apiserver.py), which creates the
state it works on (_rv, _objs, _hist, _floor, _snapshots) under one lock.
"""

import bisect
import copy
import json
import os
import time
import uuid
from collections import namedtuple

from kube_api import ADDED, APIError, DELETED, KIND_BY_LIST, KIND_BY_NAME, KINDS, MODIFIED
from kube_query import merge_patch, now_rfc3339

Event = namedtuple("Event", "rv type obj prev")   # obj: new state (DELETED: last state, new rv)


class ObjectStore:
    """Objects and their history; every method takes or holds the server's lock."""

    # -- objects (test API) -------------------------------------------------

    @staticmethod
    def _info(kind):
        if kind not in KINDS:
            raise ValueError("kind must be one of %s, not %r" % (sorted(KINDS), kind))
        return KINDS[kind]

    @staticmethod
    def _key(info, ns, name):
        return "%s/%s" % (ns, name) if info.namespaced else name

    def _key_of(self, info, obj):
        meta = obj.get("metadata") or {}
        return self._key(info, meta.get("namespace"), meta.get("name"))

    def _normalise(self, info, obj, old=None):
        """Deep copy with kind/apiVersion first and server-owned metadata set."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            raise ValueError("metadata.name is required")
        if info.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        if old is not None:
            meta.setdefault("uid", old["metadata"]["uid"])
            meta.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"])
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_rfc3339())
        rest = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        return dict({"kind": info.kind, "apiVersion": info.api_version}, **rest)

    def create(self, kind, obj):
        """Add an object (ADDED event); returns the stored copy."""
        info = self._info(kind)
        with self._lock:
            new = self._normalise(info, obj)
            key = self._key_of(info, new)
            if key in self._objs[kind]:
                raise KeyError("%s %s already exists" % (kind, key))
            return copy.deepcopy(self._commit(info, ADDED, key, new))

    def update(self, kind, obj):
        """Replace an object (MODIFIED event, new resourceVersion even if unchanged)."""
        info = self._info(kind)
        with self._lock:
            meta = obj.get("metadata") or {}
            key = self._key(info, meta.get("namespace") or ("default" if info.namespaced else None),
                            meta.get("name"))
            old = self._objs[kind].get(key)
            if old is None:
                raise KeyError("%s %s not found" % (kind, key))
            new = self._normalise(info, obj, old)
            return copy.deepcopy(self._commit(info, MODIFIED, key, new))

    def patch(self, kind, ns, name, patch):
        """Apply an RFC 7386 merge patch (MODIFIED event)."""
        info = self._info(kind)
        with self._lock:
            old = self._get_locked(info, ns, name)
            new = merge_patch(old, patch)
            new = self._normalise(info, new, old)
            return copy.deepcopy(self._commit(info, MODIFIED, self._key(info, ns, name), new))

    def delete(self, kind, ns, name):
        """Remove an object now (DELETED event carrying its last state with a
        new resourceVersion); returns that object."""
        info = self._info(kind)
        with self._lock:
            self._get_locked(info, ns, name)
            return copy.deepcopy(self._commit(info, DELETED, self._key(info, ns, name), None))

    def begin_delete(self, kind, ns, name, grace_seconds=30):
        """Mark an object as terminating (deletionTimestamp set, MODIFIED), as the
        apiserver does for a bound pod until its kubelet confirms; delete()
        finishes it."""
        info = self._info(kind)
        with self._lock:
            old = self._get_locked(info, ns, name)
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + grace_seconds))
            new["metadata"]["deletionGracePeriodSeconds"] = grace_seconds
            return copy.deepcopy(self._commit(info, MODIFIED, self._key(info, ns, name), new))

    def get(self, kind, ns, name):
        """A deep copy of the object, or None."""
        info = self._info(kind)
        with self._lock:
            obj = self._objs[kind].get(self._key(info, ns, name))
            return copy.deepcopy(obj)

    def list(self, kind):
        """Deep copies of all objects of that kind, sorted by namespace/name."""
        self._info(kind)
        with self._lock:
            objs = self._objs[kind]
            return [copy.deepcopy(objs[k]) for k in sorted(objs)]

    def load_list(self, path_or_dict):
        """Create the Node, Pod and PodGroup items of a kubectl List (a path to
        a JSON file or the parsed dict); other kinds are ignored.  Also takes a
        NodeList/PodList/PodGroupList whose items lack kind.  Returns how many
        objects were created."""
        if isinstance(path_or_dict, (str, os.PathLike)):
            with open(path_or_dict) as f:
                data = json.load(f)
        else:
            data = path_or_dict
        default = KIND_BY_LIST.get(data.get("kind"))
        n = 0
        for item in data.get("items") or []:
            info = KIND_BY_NAME.get(item.get("kind")) or (default if not item.get("kind") else None)
            if info is None:
                continue
            item = copy.deepcopy(item)
            item.get("metadata", {}).pop("resourceVersion", None)
            self.create(info.plural, item)
            n += 1
        return n

    @property
    def resource_version(self):
        with self._lock:
            return str(self._rv)

    def history(self, kind):
        """[(rv, type, object)] still remembered for that kind (for assertions)."""
        with self._lock:
            return [(str(e.rv), e.type, copy.deepcopy(e.obj)) for e in self._hist[kind]]

    def _get_locked(self, info, ns, name):
        obj = self._objs[info.plural].get(self._key(info, ns, name))
        if obj is None:
            raise KeyError("%s %s/%s not found" % (info.plural, ns, name))
        return obj

    def _commit(self, info, etype, key, new):
        """Record one change: bump the global rv, store, append to history and
        wake watchers.  Stored objects are never mutated afterwards, so history
        and snapshots can share them."""
        self._rv += 1
        rv = self._rv
        objs = self._objs[info.plural]
        prev = objs.get(key)
        if etype == DELETED:
            del objs[key]
            new = _with_rv(prev, rv)
        else:
            new["metadata"]["resourceVersion"] = str(rv)
            objs[key] = new
        hist = self._hist[info.plural]
        hist.append(Event(rv, etype, new, prev))
        if len(hist) > self.max_history:
            self._forget(info.plural, hist[len(hist) - self.max_history - 1].rv)
        self._cond.notify_all()
        return new

    # -- history ------------------------------------------------------------

    def compact(self, rv=None):
        """Forget history up to rv (default: now), like etcd compaction: later
        watches or continue tokens from an older version get 410 Expired."""
        with self._lock:
            rv = self._rv if rv is None else min(int(rv), self._rv)
            for kind in KINDS:
                self._forget(kind, rv)

    def _forget(self, kind, rv):
        hist = self._hist[kind]
        i = bisect.bisect_right(hist, rv, key=lambda e: e.rv)
        dropped = hist[:i]
        del hist[:i]
        self._floor[kind] = max(self._floor[kind], rv)
        # A watcher that had already seen everything it loses keeps going (it
        # is simply caught up); one that still needed a dropped change lagged.
        for w in self._watchers[kind]:
            if w.cursor < rv:
                if any(e.rv > w.cursor for e in dropped):
                    w.lagged = True
                else:
                    w.cursor = rv
        self._snapshots = {k: v for k, v in self._snapshots.items() if k[1] >= self._floor[k[0]]}
        self._cond.notify_all()

    def _state_at(self, kind, rv):
        """{key: obj} as of resourceVersion rv (floor <= rv <= now), rebuilt by
        undoing later changes; the same snapshot etcd serves for a paged list."""
        if rv >= self._rv:
            return self._objs[kind]
        cached = self._snapshots.get((kind, rv))
        if cached is not None:
            return cached
        state = dict(self._objs[kind])
        info = KINDS[kind]
        for ev in reversed(self._hist[kind]):
            if ev.rv <= rv:
                break
            key = self._key_of(info, ev.obj)
            if ev.type == ADDED:
                state.pop(key, None)
            else:
                state[key] = ev.prev
        if len(self._snapshots) >= 16:
            self._snapshots.pop(next(iter(self._snapshots)))
        self._snapshots[(kind, rv)] = state
        return state

    def _wait_for_rv(self, rv):
        """A read asking for a version newer than the server's waits a little
        for it (storage/cacher waitUntilFreshAndBlock), then 504."""
        end = time.monotonic() + self.too_large_rv_wait
        while self._rv < rv:
            left = end - time.monotonic()
            if left <= 0:
                raise APIError(504, "Timeout: Too large resource version: %d, current: %d"
                               % (rv, self._rv), "Timeout",
                               {"causes": [{"reason": "ResourceVersionTooLarge",
                                            "message": "Too large resource version"}],
                                "retryAfterSeconds": 1})
            self._cond.wait(left)


def _with_rv(obj, rv):
    obj = dict(obj)
    obj["metadata"] = dict(obj["metadata"], resourceVersion=str(rv))
    return obj
