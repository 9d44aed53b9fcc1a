#!/usr/bin/env python3
"""A fake kube-apiserver for troupe's tests (Python 3 standard library only).

troupe lists and watches Nodes, Pods and scheduler-plugins PodGroups and POSTs
pod Bindings.  No real kube-apiserver can run here, so this module speaks the
same HTTP/JSON protocol with the semantics troupe depends on, copied from the
upstream sources (paths are under kubernetes/kubernetes):

* one global resourceVersion counter, like etcd's revision; history is
  forgotten by compact() or after max_history events, like etcd compaction,
  and that is what makes old versions answer 410 Expired
  (apiserver/pkg/storage/cacher/watch_cache.go, storage/etcd3/store.go);
* LIST with limit/continue answers later pages as of the first page's
  resourceVersion (a consistent snapshot); the continue token has the upstream
  shape (base64url JSON {"v","rv","start"}); an expired token answers 410 with
  a fresh "inconsistent" token, as etcd3/store.go handleCompactedErrorForPaging;
  remainingItemCount only without selectors; list items of built-in kinds carry
  no kind/apiVersion, custom-resource (PodGroup) items do;
* WATCH streams newline-delimited JSON events in HTTP/1.1 chunks; with a
  resourceVersion it replays history after it, with "" or "0" it starts with
  synthetic ADDED events; selectors are applied to the old and new object of
  every change, so an object leaving the selector arrives as DELETED and one
  entering it as ADDED (cacher/cache_watcher.go convertToWatchEvent);
  BOOKMARKs when asked for; a server-side random timeout ends the stream
  cleanly (handlers/watch.go), scaled down from 1800-3600 s to 30-60 s;
* Binding: the checks, messages and status codes of
  pkg/registry/core/pod/storage/storage.go (BindingREST) and
  apimachinery/pkg/api/errors/errors.go;
* authorization as RBAC shows it to a client: SelfSubjectAccessReview
  (pkg/registry/authorization/selfsubjectaccessreview: 201 with status.allowed,
  422 unless exactly one of resourceAttributes and nonResourceAttributes) answers
  allowed: false for the permissions a test denies, and a request that lacks its
  permission gets 403 with the Forbidden Status of
  endpoints/handlers/responsewriters/errors.go, checked before the resource is
  looked up (so a CRD that is not installed answers 403, not 404, to a client
  without the permission), as the authorization filter runs before routing;
* delegated authentication and authorization, as kube-scheduler and the
  ops listener of troupe use them: TokenReview (tokens registered with
  add_user) and SubjectAccessReview (non-resource paths granted with
  grant_path, RBAC's nonResourceURLs matching);
* every error body is a v1 Status (endpoints/handlers/responsewriters).

TLS (optional): with a server certificate and key the server speaks HTTPS,
and with a client CA it asks for client certificates and, like kube-apiserver's
x509 authenticator, lets a request with a verified one through even when a
bearer token is configured; a request with neither a verified certificate nor
the right token gets 401.  The handshake runs in the connection's own thread,
so a client that never completes it holds up only itself.

Fault injection (failing, delaying or refusing requests, cutting watch streams
mid-event, rotating the bearer token, stop/start on the same port) lets the
integration tests exercise troupe's recovery paths.  Everything the tests call
directly is thread-safe behind one lock.  Run as a program it serves until
SIGINT/SIGTERM; see main() at the bottom.

This file is the entry point and the import name (`from fake_apiserver import
FakeAPIServer`, `python3 tests/apiserver/fake_apiserver.py`); the server is
put together here from its parts beside it:

  kube_api.py        kinds, upstream messages, v1 Status errors
  kube_query.py      selectors, query parameters, continue tokens, merge patch
  fake_store.py      objects, resourceVersions, history, compaction
  fake_listwatch.py  LIST pages and WATCH streams
  fake_access.py     authentication, authorization, access reviews
  fake_writes.py     create, update, patch, Binding
  fake_events.py     events.k8s.io/v1 Events: create, patch, get, list
  fake_faults.py     fault injection and the tests' waiting helpers
  fake_http.py       the HTTP server and request routing
"""

import argparse
import os
import signal
import ssl
import sys
import threading
import time

# Every name this module defined before it was split stays importable from it
# (`from fake_apiserver import MSG_LIST_EXPIRED`, ...).
from kube_api import (  # noqa: F401
    ADDED, APIError, AUTHZ_API_VERSION, AUTHZ_GROUP, BOOKMARK, CR_FIELDS, DEFAULT_USER, DELETED,
    ERROR, INITIAL_EVENTS_END, KINDS, KIND_BY_LIST, KIND_BY_NAME, KindInfo, MODIFIED,
    MSG_CONTINUE_EXPIRED, MSG_CONTINUE_INCONSISTENT, MSG_LIST_EXPIRED, MSG_METHOD_NOT_ALLOWED,
    MSG_NOT_FOUND_RESOURCE, MSG_OBJECT_MODIFIED, NODE_FIELDS, PODGROUP_API_VERSION,
    PODGROUP_GROUP, PODGROUP_VERSION, POD_FIELDS, RBAC_ALLOWED, REASONS, STORAGE_ERR_INVALID_OBJ,
    _bookmark_object, _bool_str, _details, _get_path, _goquote, err_already_exists,
    err_bad_request, err_conflict, err_expired, err_forbidden, err_injected, err_invalid,
    err_not_found, err_resource_not_found, err_untyped, status_body)
from kube_query import (  # noqa: F401
    _LABEL_KEY, _LABEL_VALUE, _parse_bool, _parse_rv, _split_top, _validate_list_options,
    decode_continue, dumps, encode_continue, field_match, label_match, merge_patch, now_rfc3339,
    parse_field_selector, parse_label_selector)
from fake_store import Event, ObjectStore, _with_rv  # noqa: F401
from fake_listwatch import ListWatch, _Watcher  # noqa: F401
from fake_faults import Faults, _Fault  # noqa: F401
from fake_access import AccessRules
from fake_events import EventsStore
from fake_writes import _set_pod_scheduled  # noqa: F401
from fake_http import _Abort, _HTTPServer, _Handler, _hard_shutdown  # noqa: F401


class FakeAPIServer(ObjectStore, ListWatch, Faults, AccessRules, EventsStore):
    """In-memory kube-apiserver for nodes, pods and podgroups.  See the module
    docstring for what it mirrors; attributes below can be changed any time."""

    RV_START = 1000

    def __init__(self, host="127.0.0.1", port=0, token=None, podgroups_crd=True,
                 max_history=100000, watch_timeout_range=(30.0, 60.0), anonymous_auth=False,
                 tls_cert=None, tls_key=None, client_ca=None):
        """tls_cert/tls_key: PEM files of the serving certificate and its key (both
        or neither); with them the server speaks HTTPS.  client_ca: PEM file of the
        CA that signs client certificates (needs tls_cert): clients are asked for
        a certificate and one it verifies authenticates the request.  The files
        are read at every start(), so a restart picks up replaced ones."""
        if bool(tls_cert) != bool(tls_key):
            raise ValueError("tls_cert and tls_key go together")
        if client_ca and not tls_cert:
            raise ValueError("client_ca needs tls_cert and tls_key")
        self.host = host
        self.port = port
        self.token = token
        self.podgroups_crd = podgroups_crd
        self.max_history = max_history
        # Server-chosen watch duration when timeoutSeconds is absent: upstream picks
        # uniformly in [minRequestTimeout, 2*minRequestTimeout) = 1800-3600 s; the
        # default here is scaled down to 30-60 s so tests see reconnects.
        self.watch_timeout_range = tuple(watch_timeout_range)
        self.watch_410_mode = "event"      # or "status"
        self.bookmark_interval = 1.0       # seconds; 0 disables (upstream: about 1 min)
        self.split_events = False          # send each event in two chunks, 20 ms apart
        self.too_large_rv_wait = 3.0       # how long a request for a future rv waits
        # With anonymous auth on, a request without a token is "system:anonymous":
        # 403 on resources, allowed on /healthz and /version (the RBAC defaults).
        # Off (the default) every request without the right token gets 401.
        self.anonymous_auth = anonymous_auth
        self.verbose = bool(os.environ.get("FAKE_APISERVER_VERBOSE"))
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self.client_ca = client_ca
        self.handshake_timeout = 10.0      # seconds a client may take to finish the TLS handshake
        # Authorization: permissions are (verb, group, resource, subresource)
        # tuples, see deny().  Without TLS users every authenticated request is
        # self.user.  serve_access_reviews False: the authorization.k8s.io API
        # is not served (404), as behind an aggregator that lacks it.
        self.user = DEFAULT_USER
        self.serve_access_reviews = True
        self.review_denied = set()
        self.request_denied = set()

        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._rv = self.RV_START
        self._objs = {k: {} for k in KINDS}
        self._hist = {k: [] for k in KINDS}
        # History of a kind holds every change with rv > its floor.
        self._floor = {k: self.RV_START for k in KINDS}
        self._snapshots = {}                              # (kind, rv) -> {key: obj}
        self._watchers = {k: set() for k in KINDS}
        self._faults = []
        self._delays = []
        self._refusing = False
        self._server = None
        self._thread = None
        self._stop_evt = threading.Event()
        self._conns = set()

        # Called as hook(info, ns, name, method, body) before every PUT or PATCH of
        # a /status is judged; bytes it returns replace the body
        # (fake_podgroup_status.StatusWrites installs one).
        self.status_write_hook = None
        self.requests = []   # (method, path_with_query, status)
        self.bindings = []   # every Binding body received (parsed JSON objects)
        self.deletions = []  # every DELETE done: (plural, ns, name, precondition uid)
        self.tls_failures = []   # (client address, error text) of failed TLS handshakes
        self.x509_users = []     # subject CN of every request authenticated by client certificate
        self.access_reviews = []  # spec.resourceAttributes of every SelfSubjectAccessReview
        # Delegated authentication and authorization (fake_access.py):
        # token -> UserInfo for TokenReviews (add_user), (subject, path, verbs)
        # rules for SubjectAccessReviews (grant_path), and what was reviewed.
        self.users = {}
        self.path_rules = []
        self.token_reviews = []            # spec.token of every TokenReview
        self.subject_access_reviews = []   # spec of every SubjectAccessReview
        self._events_init()                # events.k8s.io Events (fake_events.py)

    # -- lifecycle ----------------------------------------------------------

    @property
    def tls(self):
        return bool(self.tls_cert)

    @property
    def url(self):
        return "%s://%s:%d" % ("https" if self.tls else "http", self.host, self.port)

    def _ssl_context(self):
        if not self.tls:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.tls_cert, self.tls_key)
        if self.client_ca:
            # Ask for a certificate but do not insist (CERT_OPTIONAL): without one
            # the request may still carry a bearer token.  A certificate that does
            # not verify fails the handshake.
            ctx.verify_mode = ssl.CERT_OPTIONAL
            ctx.load_verify_locations(cafile=self.client_ca)
        return ctx

    def start(self):
        """Serve in background threads.  After stop(), start() again binds the
        same port (SO_REUSEADDR) and keeps all objects and history, like an
        apiserver restarting in front of the same etcd."""
        if self._server is not None:
            return self
        self._stop_evt = threading.Event()
        ctx = self._ssl_context()
        self._server = _HTTPServer((self.host, self.port), _Handler, self, ctx)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fake-apiserver", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop listening and drop every connection, open watches included
        (abruptly, as a dying server would)."""
        server = self._server
        if server is None:
            return
        self._stop_evt.set()
        with self._lock:
            for ws in self._watchers.values():
                for w in ws:
                    w.cut = ("abrupt", False)
            self._cond.notify_all()
        server.shutdown()
        server.server_close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            _hard_shutdown(c)
        self._thread.join(5)
        self._server = None
        # Give the watch threads a moment to notice, so open_watches() is 0.
        with self._lock:
            end = time.monotonic() + 2.0
            while any(self._watchers.values()) and time.monotonic() < end:
                self._cond.wait(0.05)

    def restart(self, down_seconds=0.0):
        self.stop()
        if down_seconds:
            time.sleep(down_seconds)
        self.start()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(description="Fake kube-apiserver for troupe tests.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--load", action="append", default=[],
                   help="kubectl List JSON to preload (Node, Pod, PodGroup items)")
    p.add_argument("--token", help="require Authorization: Bearer TOKEN")
    p.add_argument("--tls-cert", help="serve HTTPS with this PEM certificate (with --tls-key)")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    p.add_argument("--client-ca", help="PEM CA file: accept client certificates it signs")
    p.add_argument("--no-podgroups", action="store_true",
                   help="act as if the PodGroup CRD were not installed (404)")
    p.add_argument("--bookmark-interval", type=float, default=1.0)
    p.add_argument("--watch-timeout", default="30,60",
                   help="server-side watch timeout range in seconds, MIN,MAX")
    args = p.parse_args(argv)

    lo, hi = (float(x) for x in args.watch_timeout.split(","))
    if bool(args.tls_cert) != bool(args.tls_key) or (args.client_ca and not args.tls_cert):
        p.error("--tls-cert and --tls-key go together; --client-ca needs them")
    srv = FakeAPIServer(args.host, args.port, token=args.token,
                        podgroups_crd=not args.no_podgroups, watch_timeout_range=(lo, hi),
                        tls_cert=args.tls_cert, tls_key=args.tls_key, client_ca=args.client_ca)
    srv.bookmark_interval = args.bookmark_interval
    for path in args.load:
        srv.load_list(path)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    srv.start()
    print("listening on %s" % srv.url, flush=True)
    while not done.wait(0.5):
        pass
    srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
