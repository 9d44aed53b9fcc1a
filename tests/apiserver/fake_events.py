"""Events on the fake API server: POST, PATCH, GET and list of
events.k8s.io/v1 Events in a namespace, kept apart from the watched kinds (no
watch, no history: troupe only writes them), so that tests can read what troupe
recorded (FakeAPIServer.events_list()).

What it mirrors of kube-apiserver (pkg/apis/core/validation/events.go,
ValidateEventCreate for events.k8s.io/v1, and the strategic-merge PATCH
client-go's recorder sends for a series):
  - create needs metadata.name, eventTime, reportingController,
    reportingInstance (at most 128 characters), action and reason (at most 128),
    type Normal or Warning, a note of at most 1 kB, regarding.namespace equal to
    the Event's, and a series (when present) with count >= 2 and
    lastObservedTime; otherwise 422 Invalid. An existing name is 409.
  - PATCH of a missing Event is 404 (it expired); of an existing one, the
    patch's fields replace the object's (series replaced whole, as its
    strategic-merge patch does), and reason, action, type, regarding, note,
    reportingController and reportingInstance may not change (422).
  - Authorization goes through the fake's deny()/allow() like every request
    (verbs create, patch, get, list on group events.k8s.io, resource events).

EventsHandler is the request handler's side (mixin of fake_http._Handler);
EventsStore the server's (mixin of FakeAPIServer).
"""

import copy
import json
import uuid

from kube_api import (APIError, MSG_METHOD_NOT_ALLOWED, _goquote, err_invalid,
                      err_resource_not_found)

EVENTS_GROUP = "events.k8s.io"
EVENTS_VERSION = "v1"
EVENTS_API_VERSION = EVENTS_GROUP + "/" + EVENTS_VERSION
NOTE_LIMIT = 1024
FIELD_LIMIT = 128
IMMUTABLE = ("reason", "action", "type", "regarding", "note", "reportingController",
             "reportingInstance", "eventTime")


def _not_found(name):
    return APIError(404, "events.events.k8s.io %s not found" % _goquote(name), "NotFound",
                    {"name": name, "group": EVENTS_GROUP, "kind": "events"})


def _validate(ev, ns):
    causes = []
    meta = ev.get("metadata") or {}
    if not meta.get("name"):
        causes.append(("metadata.name", "Required value: name or generateName is required"))
    for field in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
        if not ev.get(field):
            causes.append((field, "Required value"))
    for field in ("reportingInstance", "action", "reason"):
        if len(ev.get(field) or "") > FIELD_LIMIT:
            causes.append((field, "Too long: may not be more than %d bytes" % FIELD_LIMIT))
    if ev.get("type") not in ("Normal", "Warning"):
        causes.append(("type", 'Unsupported value: "%s"' % ev.get("type")))
    if len((ev.get("note") or "").encode()) > NOTE_LIMIT:
        causes.append(("note", "Too long: may not be more than %d bytes" % NOTE_LIMIT))
    reg = ev.get("regarding") or {}
    if reg.get("namespace") != ns:
        causes.append(("regarding.namespace",
                       'Invalid value: "%s": does not match event.namespace'
                       % reg.get("namespace")))
    series = ev.get("series")
    if series is not None:
        if not isinstance(series.get("count"), int) or series["count"] < 2:
            causes.append(("series.count", "Invalid value: should be at least 2"))
        if not series.get("lastObservedTime"):
            causes.append(("series.lastObservedTime", "Required value"))
    return causes


class EventsStore:
    """The server's Events (mixin of FakeAPIServer): (ns, name) -> Event, and
    every write in order as (method, ns, name, body)."""

    def _events_init(self):
        if not hasattr(self, "_events"):
            self._events = {}
            self.event_writes = []

    def events_list(self, ns=None, reason=None, regarding_kind=None, regarding_name=None):
        """Copies of the Events kept, filtered by namespace, reason and the
        regarding object's kind and name."""
        with self._lock:
            self._events_init()
            out = [copy.deepcopy(e) for (n, _), e in sorted(self._events.items())
                   if ns in (None, n)]
        return [e for e in out
                if reason in (None, e.get("reason"))
                and regarding_kind in (None, e.get("regarding", {}).get("kind"))
                and regarding_name in (None, e.get("regarding", {}).get("name"))]


def series_count(ev):
    """An Event's count: its series' count, 1 without a series."""
    return (ev.get("series") or {}).get("count", 1)


class EventsHandler:
    """The events.k8s.io routes (mixin of fake_http._Handler)."""

    def _events(self, ns, resource, name, sub, body):
        fake = self.fake
        if resource != "events" or not ns or sub is not None:
            raise err_resource_not_found()
        with fake._lock:
            fake._events_init()
        if name is None:
            if self.command == "POST":
                return self._event_create(ns, body)
            if self.command in ("GET", "HEAD"):
                with fake._lock:
                    items = [copy.deepcopy(e) for (n, _), e in sorted(fake._events.items())
                             if n == ns]
                return self._send(200, {"kind": "EventList", "apiVersion": EVENTS_API_VERSION,
                                        "metadata": {"resourceVersion": str(fake._rv)},
                                        "items": items})
            raise APIError(405, MSG_METHOD_NOT_ALLOWED, "MethodNotAllowed", {})
        if self.command == "PATCH":
            return self._event_patch(ns, name, body)
        if self.command in ("GET", "HEAD"):
            with fake._lock:
                ev = copy.deepcopy(fake._events.get((ns, name)))
            if ev is None:
                raise _not_found(name)
            return self._send(200, ev)
        raise APIError(405, MSG_METHOD_NOT_ALLOWED, "MethodNotAllowed", {})

    def _event_create(self, ns, body):
        fake = self.fake
        ev = self._json_body(body, "Event")
        self._check_type(ev, "Event", EVENTS_API_VERSION)
        meta = ev.setdefault("metadata", {})
        meta.setdefault("namespace", ns)
        name = meta.get("name") or ""
        causes = _validate(ev, ns)
        if meta.get("namespace") != ns:
            causes.append(("metadata.namespace", "Invalid value: does not match the request"))
        if causes:
            raise err_invalid("Event", EVENTS_GROUP, name, causes)
        with fake._lock:
            if (ns, name) in fake._events:
                raise APIError(409, "events.events.k8s.io %s already exists" % _goquote(name),
                               "AlreadyExists", {"name": name, "group": EVENTS_GROUP,
                                                 "kind": "events"})
            fake._rv += 1
            meta["uid"] = str(uuid.uuid4())
            meta["resourceVersion"] = str(fake._rv)
            ev["apiVersion"], ev["kind"] = EVENTS_API_VERSION, "Event"
            fake._events[(ns, name)] = ev
            fake.event_writes.append(("POST", ns, name, json.loads(body)))
            out = copy.deepcopy(ev)
        self._send(201, out)

    def _event_patch(self, ns, name, body):
        fake = self.fake
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype not in ("application/strategic-merge-patch+json",
                         "application/merge-patch+json"):
            raise APIError(415, "the body of the request was in an unknown format - accepted "
                           "media types include: application/json-patch+json, "
                           "application/merge-patch+json, application/apply-patch+yaml, "
                           "application/strategic-merge-patch+json", "UnsupportedMediaType")
        patch = self._json_body(body, "Event")
        with fake._lock:
            ev = fake._events.get((ns, name))
            if ev is None:
                raise _not_found(name)
            new = copy.deepcopy(ev)
            for k, v in patch.items():
                if k == "metadata":
                    continue
                if v is None:
                    new.pop(k, None)
                else:
                    new[k] = v
            causes = [(k, "Invalid value: field is immutable") for k in IMMUTABLE
                      if new.get(k) != ev.get(k)]
            causes += _validate(new, ns)
            if causes:
                raise err_invalid("Event", EVENTS_GROUP, name, causes)
            fake._rv += 1
            new["metadata"]["resourceVersion"] = str(fake._rv)
            fake._events[(ns, name)] = new
            fake.event_writes.append(("PATCH", ns, name, patch))
            out = copy.deepcopy(new)
        self._send(200, out)
