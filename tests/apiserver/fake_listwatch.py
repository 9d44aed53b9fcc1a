"""LIST and WATCH as kube-apiserver serves them: paged lists from one consistent
snapshot with continue tokens, and watch streams of newline-delimited JSON
events in HTTP/1.1 chunks, with selectors applied to the old and the new object,
bookmarks, server-side timeouts and the cuts the tests inject.

ListWatch is FakeAPIServer's side (registering watchers, computing pending
events under the lock); WatchStream is the request handler's side (writing the
stream and noticing a client that hung up).
"""

import bisect
import random
import select
import socket
import ssl
import time
import uuid

from kube_api import (ADDED, BOOKMARK, DELETED, ERROR, MODIFIED, MSG_CONTINUE_INCONSISTENT,
                      MSG_LIST_EXPIRED, _bookmark_object, _goquote, err_bad_request,
                      err_expired)
from kube_query import (_parse_bool, _parse_rv, _validate_list_options, decode_continue, dumps,
                        encode_continue, field_match, label_match, parse_field_selector,
                        parse_label_selector)
from fake_store import _with_rv

class _Watcher:
    def __init__(self, info, cursor, match):
        self.info = info
        self.cursor = cursor      # resourceVersion of the last change this stream has seen
        self.match = match        # obj -> bool (namespace, name and selectors)
        self.cut = None           # set by cut_watches()/stop(): ("abrupt", mid_event) or ("clean",)
        self.lagged = False       # history it still needed was forgotten


class ListWatch:
    """FakeAPIServer's LIST and WATCH state (mixin; the server holds the lock)."""

    # -- LIST ---------------------------------------------------------------

    def _list(self, info, ns, q):
        labels = parse_label_selector(q.get("labelSelector", ""))
        fields = parse_field_selector(q.get("fieldSelector", ""), info)
        rv_param = q.get("resourceVersion", "")
        rv_match = q.get("resourceVersionMatch", "")
        token = q.get("continue", "")
        limit = 0
        if q.get("limit"):
            try:
                limit = max(0, int(q["limit"]))
            except ValueError:
                raise err_bad_request("limit: invalid value %s" % _goquote(q["limit"]))
        _validate_list_options(q, watch=False)
        if token and rv_param not in ("", "0"):
            raise err_bad_request("specifying resource version is not allowed when using continue")
        prefix = ns + "/" if (info.namespaced and ns) else ""

        with self._lock:
            start = ""
            if token:
                tok_rv, start_rel = decode_continue(token)
                start = prefix + start_rel
                if tok_rv == -1:         # "continue inconsistently, at the latest version"
                    list_rv = self._rv
                elif tok_rv < self._floor[info.plural]:
                    fresh = encode_continue(-1, start_rel)
                    raise err_expired(MSG_CONTINUE_INCONSISTENT, {"continue": fresh})
                elif tok_rv > self._rv:
                    raise err_bad_request("invalid continue token: resource version is newer "
                                          "than the server")
                else:
                    list_rv = tok_rv
            elif rv_match == "Exact":
                list_rv = _parse_rv(rv_param)
                self._wait_for_rv(list_rv)
                if list_rv < self._floor[info.plural]:
                    raise err_expired(MSG_LIST_EXPIRED)
            else:
                if rv_param not in ("", "0"):
                    self._wait_for_rv(_parse_rv(rv_param))
                list_rv = self._rv
            state = self._state_at(info.plural, list_rv)

            keys = sorted(k for k in state if k.startswith(prefix) and k >= start)
            items, last, examined = [], None, 0
            for k in keys:
                if limit and len(items) == limit:
                    break
                examined += 1
                last = k
                obj = state[k]
                if label_match(labels, obj) and field_match(fields, info, obj):
                    items.append(obj)
            more = examined < len(keys)
            meta = {"resourceVersion": str(list_rv)}
            if more:
                # The token remembers the list's version, so the next page is
                # served from the same snapshot however the store changes.
                meta["continue"] = encode_continue(list_rv, last[len(prefix):] + "\x00")
                if not labels and not fields:
                    meta["remainingItemCount"] = len(keys) - examined
            if info.builtin:
                items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
                         for o in items]
            return {"kind": info.list_kind, "apiVersion": info.api_version,
                    "metadata": meta, "items": items}

    # -- WATCH --------------------------------------------------------------

    def _open_watch(self, info, ns, name, q):
        """Validate a watch request and register its watcher.  Returns
        (watcher, initial_objects, send_initial_end_bookmark, expired_error)."""
        labels = parse_label_selector(q.get("labelSelector", ""))
        fields = parse_field_selector(q.get("fieldSelector", ""), info)
        _validate_list_options(q, watch=True)
        rv_param = q.get("resourceVersion", "")
        send_initial = q.get("sendInitialEvents")
        bookmarks = _parse_bool(q, "allowWatchBookmarks")

        def match(obj):
            meta = obj.get("metadata") or {}
            if ns and meta.get("namespace") != ns:
                return False
            if name and meta.get("name") != name:
                return False
            return label_match(labels, obj) and field_match(fields, info, obj)

        with self._lock:
            initial, end_bookmark = [], False
            if send_initial is not None:
                # The watch-list protocol (sendInitialEvents, resourceVersionMatch=
                # NotOlderThan): state as ADDED events, then a bookmark annotated
                # k8s.io/initial-events-end, then changes.
                if rv_param not in ("", "0"):
                    self._wait_for_rv(_parse_rv(rv_param))
                cursor = self._rv
                if _parse_bool(q, "sendInitialEvents"):
                    initial = self._initial(info, match)
                    end_bookmark = bookmarks
            elif rv_param in ("", "0"):
                # "Get state and start at most recent": synthetic ADDED events.
                cursor = self._rv
                initial = self._initial(info, match)
            else:
                cursor = _parse_rv(rv_param)
                floor = self._floor[info.plural]
                if cursor < floor:
                    return None, [], False, err_expired(
                        "too old resource version: %d (%d)" % (cursor, floor))
            w = _Watcher(info, cursor, match)
            self._watchers[info.plural].add(w)
            self._cond.notify_all()
            return w, initial, end_bookmark, None

    def _initial(self, info, match):
        objs = self._objs[info.plural]
        return [objs[k] for k in sorted(objs) if match(objs[k])]

    def _close_watch(self, w):
        with self._lock:
            self._watchers[w.info.plural].discard(w)
            self._cond.notify_all()

    def _pending(self, w):
        """Watch events for w after its cursor (lock held), as the cacher
        converts them: the selector is tested on the old and the new object."""
        hist = self._hist[w.info.plural]
        i = bisect.bisect_right(hist, w.cursor, key=lambda e: e.rv)
        out = []
        for ev in hist[i:]:
            cur_pass = ev.type != DELETED and w.match(ev.obj)
            old_pass = ev.prev is not None and w.match(ev.prev)
            if cur_pass:
                out.append((ADDED if not old_pass else MODIFIED, ev.obj))
            elif old_pass:
                # Leaving the selector (or deleted): the previous content with the
                # event's resourceVersion.
                out.append((DELETED, _with_rv(ev.prev, ev.rv)))
        if i < len(hist):
            w.cursor = hist[-1].rv
        return out


class WatchStream:
    """The request handler's half of a watch (mixin of fake_http._Handler)."""

    # -- watch --------------------------------------------------------------

    def _watch(self, info, ns, name, q):
        fake = self.fake
        timeout = 0.0
        if q.get("timeoutSeconds"):
            try:
                timeout = float(int(q["timeoutSeconds"]))
            except ValueError:
                raise err_bad_request("timeoutSeconds: invalid value")
        if timeout <= 0:    # absent or 0: the server picks (handlers/watch.go)
            lo, hi = fake.watch_timeout_range
            timeout = random.uniform(lo, hi)
        bookmarks = _parse_bool(q, "allowWatchBookmarks")
        interval = fake.bookmark_interval if bookmarks else 0

        w, initial, end_bookmark, expired = fake._open_watch(info, ns, name, q)
        if expired is not None and fake.watch_410_mode == "status":
            raise expired
        try:
            self._record(200)
            self.send_response(200)
            self.send_header("Audit-Id", str(uuid.uuid4()))
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if expired is not None:
                # The cacher reports an expired version inside the stream
                # (newErrWatcher), then ends it normally.
                self._write_events([dumps({"type": ERROR, "object": expired.body})])
                self._end_chunked()
                return
            lines = [dumps({"type": ADDED, "object": o}) for o in initial]
            if end_bookmark:
                with fake._lock:
                    rv = max(w.cursor, fake._rv)
                lines.append(dumps({"type": BOOKMARK,
                                    "object": _bookmark_object(info, rv, initial_end=True)}))
            self._write_events(lines)
            self._stream(w, time.monotonic() + timeout, interval)
        finally:
            if w is not None:
                fake._close_watch(w)

    def _stream(self, w, deadline, interval):
        fake = self.fake
        info = w.info
        next_bookmark = time.monotonic() + interval if interval > 0 else None
        next_alive_check = time.monotonic() + 0.25
        while True:
            lines, partial, end = [], None, None
            with fake._lock:
                pending = fake._pending(w)
                if not pending and w.cut is None and not w.lagged:
                    now = time.monotonic()
                    wake = min(deadline, next_bookmark or deadline, next_alive_check)
                    if wake > now:
                        fake._cond.wait(wake - now)
                    pending = fake._pending(w)
                now = time.monotonic()
                if w.cut is not None:
                    end = w.cut
                    if end[0] == "abrupt" and end[1]:
                        partial = (dumps({"type": pending[0][0], "object": pending[0][1]})
                                   if pending else
                                   dumps({"type": BOOKMARK,
                                          "object": _bookmark_object(info, fake._rv)}))
                elif w.lagged:
                    # Like the cacher dropping a watcher that fell too far behind:
                    # the stream just ends; the client resumes and gets 410.
                    end = ("clean",)
                else:
                    lines = [dumps({"type": t, "object": o}) for t, o in pending]
                    if now >= deadline:
                        if interval > 0:   # upstream sends one just before the deadline
                            lines.append(dumps({"type": BOOKMARK,
                                                "object": _bookmark_object(info, fake._rv)}))
                        end = ("clean",)
                    elif next_bookmark is not None and now >= next_bookmark:
                        lines.append(dumps({"type": BOOKMARK,
                                            "object": _bookmark_object(info, fake._rv)}))
                        next_bookmark = now + interval
            try:
                self._write_events(lines)
                if end is not None:
                    if end[0] == "clean":
                        self._end_chunked()
                    else:
                        if partial is not None:
                            half = (partial + "\n").encode()
                            half = half[:max(1, len(half) // 2)]
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(half), half))
                        self._abort_connection()
                    return
                if time.monotonic() >= next_alive_check:
                    next_alive_check = time.monotonic() + 0.25
                    if not self._client_alive():
                        self.close_connection = True
                        return
            except OSError:
                self.close_connection = True
                return

    def _write_events(self, lines):
        """Each event is one JSON document plus "\\n", in its own chunk."""
        if not lines:
            return
        if self.fake.split_events:
            for line in lines:
                data = (line + "\n").encode()
                cut = max(1, len(data) // 2)
                for piece in (data[:cut], data[cut:]):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    time.sleep(0.02)
            return
        out = []
        for line in lines:
            data = (line + "\n").encode()
            out.append(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"".join(out))

    def _end_chunked(self):
        self.wfile.write(b"0\r\n\r\n")

    def _client_alive(self):
        """A watch client that hung up shows as readable with EOF."""
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
            if not r:
                return True
            if isinstance(self.connection, ssl.SSLSocket):
                return self._tls_client_alive()
            return self.connection.recv(1, socket.MSG_PEEK) != b""
        except (OSError, ValueError):
            return False

    def _tls_client_alive(self):
        """TLS cannot peek: read one byte without blocking.  close_notify or EOF
        reads as b"" (or an error); a record with no application data (a session
        ticket, a key update) as "want read".  A client sending data in the middle
        of a watch is misbehaving: keep streaming, but close afterwards because
        the byte is gone."""
        conn = self.connection
        conn.settimeout(0.0)
        try:
            data = conn.recv(1)
        except ssl.SSLWantReadError:
            return True
        except (ssl.SSLError, OSError):
            return False
        finally:
            try:
                conn.settimeout(None)
            except OSError:
                pass
        if not data:
            return False
        self.close_connection = True
        return True
