"""Fault injection and the tests' waiting helpers: failing, delaying or
refusing requests, cutting watch streams, rotating the bearer token, and
waiting for watches to open, so the integration tests can drive troupe's
recovery paths.

Faults is a mixin of FakeAPIServer (fake_apiserver.py); the request handler
consults _take_fault and _delay_for on every request.
"""

import time

from kube_api import KINDS, err_injected

class _Fault:
    def __init__(self, count, path_contains, method, **kw):
        self.count = count
        self.path_contains = path_contains
        self.method = method
        self.kw = kw

    def matches(self, method, path):
        return ((self.path_contains is None or self.path_contains in path) and
                (self.method is None or self.method.upper() == method))


class Faults:
    """What a test can do to the server while it runs (mixin; thread-safe)."""

    # -- faults -------------------------------------------------------------

    def fail_next(self, n, status, path_contains=None, method=None, retry_after=None,
                  message=None):
        """Answer the next n matching requests with `status` and the Status body
        a real server sends for it (429 carries Retry-After, default 1)."""
        with self._lock:
            self._faults.append(_Fault(n, path_contains, method, status=status,
                                       retry_after=retry_after, message=message))

    def delay(self, seconds, path_contains=None, count=None):
        """Sleep `seconds` before answering matching requests (every one, or the
        next `count`).  seconds <= 0 removes the delays for that path_contains."""
        with self._lock:
            if seconds <= 0:
                self._delays = [d for d in self._delays if d.path_contains != path_contains]
            else:
                self._delays.append(_Fault(count, path_contains, None, seconds=seconds))

    def refuse_connections(self, on=True):
        """Close every new connection, and every new request on an open one,
        without answering (a server that is down but still accepts TCP)."""
        self._refusing = bool(on)

    def rotate_token(self, new):
        """From now on only "Authorization: Bearer <new>" is accepted."""
        with self._lock:
            self.token = new

    def cut_watches(self, kind=None, mid_event=True, abrupt=True):
        """End the open watch streams of `kind` (all kinds if None).  abrupt:
        close the connection without the terminating chunk, after first
        writing half of a serialized event if mid_event (the client must drop
        the partial line).  abrupt=False ends them cleanly, like a timeout."""
        with self._lock:
            for k in ([kind] if kind else list(KINDS)):
                for w in self._watchers[k]:
                    w.cut = ("abrupt", mid_event) if abrupt else ("clean",)
            self._cond.notify_all()

    def clear_faults(self):
        with self._lock:
            self._faults = []
            self._delays = []
            self._refusing = False

    def open_watches(self, kind=None):
        with self._lock:
            return sum(len(self._watchers[k]) for k in ([kind] if kind else KINDS))

    def wait_for_watches(self, kind=None, n=1, timeout=5.0):
        """Block until at least n watches of `kind` are open; returns success."""
        end = time.monotonic() + timeout
        with self._lock:
            while self.open_watches(kind) < n:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return True

    def wait_for(self, predicate, timeout=5.0, interval=0.02):
        end = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() >= end:
                return False
            time.sleep(interval)
        return True

    def _take_fault(self, method, path):
        with self._lock:
            for f in self._faults:
                if f.count > 0 and f.matches(method, path):
                    f.count -= 1
                    self._faults = [x for x in self._faults if x.count > 0]
                    return err_injected(f.kw["status"], f.kw["message"], f.kw["retry_after"])
            return None

    def _delay_for(self, path):
        with self._lock:
            for d in self._delays:
                if d.matches("", path) and (d.count is None or d.count > 0):
                    if d.count is not None:
                        d.count -= 1
                    return d.kw["seconds"]
        return 0
