"""The fake API server's HTTP side: the threading server (TLS handshakes in
each connection's own thread, refused connections, hard shutdown) and the
request handler that reads a request, applies injected delays and faults,
authenticates, routes the path the way kube-apiserver's RequestInfoFactory does
and answers every error as a v1 Status.

The handler's watch, access and write paths are mixins (fake_listwatch.py,
fake_access.py, fake_writes.py); the state is FakeAPIServer's (server.fake).
"""

import socket
import socketserver
import ssl
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from kube_api import (AUTHZ_GROUP, KINDS, MSG_METHOD_NOT_ALLOWED, PODGROUP_GROUP,
                      PODGROUP_VERSION, APIError, err_not_found, err_resource_not_found)
from kube_query import _parse_bool, dumps
from fake_access import AUTHN_GROUP, AccessHandler
from fake_listwatch import WatchStream
from fake_writes import WriteHandler
from fake_events import EVENTS_GROUP, EVENTS_VERSION, EventsHandler

def _hard_shutdown(sock):
    """Shut the TCP connection down at once.  On a TLS socket this is the plain
    socket's shutdown: no close_notify, and the SSL object stays in place, so a
    thread still writing through it gets an error instead of writing clear text."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except (OSError, ValueError):
        pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True      # restart on the same port despite TIME_WAIT
    request_queue_size = 128

    def __init__(self, addr, handler, fake, ssl_context=None):
        self.fake = fake
        self.ssl_context = ssl_context
        super().__init__(addr, handler)

    def finish_request(self, request, client_address):
        """Runs in the connection's own thread (ThreadingMixIn), so the TLS
        handshake happens here and never in the accept loop."""
        if self.ssl_context is None:
            return super().finish_request(request, client_address)
        fake = self.fake
        request.settimeout(fake.handshake_timeout)
        # wrap_socket takes over the descriptor; socketserver's own shutdown of
        # the original socket afterwards is a harmless no-op.
        conn = self.ssl_context.wrap_socket(request, server_side=True,
                                            do_handshake_on_connect=False)
        with fake._lock:
            fake._conns.add(conn)
        try:
            try:
                conn.do_handshake()
            except (ssl.SSLError, OSError) as e:
                with fake._lock:
                    fake.tls_failures.append((client_address, str(e)))
                if fake.verbose:
                    sys.stderr.write("fake-apiserver: TLS handshake with %s failed: %s\n"
                                     % (client_address, e))
                return
            conn.settimeout(None)
            self.RequestHandlerClass(conn, client_address, self)
        finally:
            with fake._lock:
                fake._conns.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def server_bind(self):
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn); skip it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def verify_request(self, request, client_address):
        return not self.fake._refusing      # False: socketserver closes it unanswered

    def handle_error(self, request, client_address):
        if self.fake.verbose:
            super().handle_error(request, client_address)


class _Abort(Exception):
    """Drop the connection without a (further) response."""


class _Handler(WatchStream, AccessHandler, WriteHandler, EventsHandler, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"
    sys_version = ""

    # -- plumbing -----------------------------------------------------------

    def setup(self):
        super().setup()
        self.fake = self.server.fake
        # The user of a verified client certificate (x509 authentication): its
        # subject's common name; None without TLS or without a certificate.
        self.x509_user = None
        if isinstance(self.connection, ssl.SSLSocket):
            cert = self.connection.getpeercert()
            if cert:   # {} or None: no certificate (a bad one fails the handshake)
                cn = [v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]
                self.x509_user = cn[0] if cn else ""
        with self.fake._lock:
            self.fake._conns.add(self.connection)

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        with self.fake._lock:
            self.fake._conns.discard(self.connection)

    def log_message(self, fmt, *args):
        if self.fake.verbose:
            sys.stderr.write("fake-apiserver: %s\n" % (fmt % args))

    def do_GET(self):
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def _abort_connection(self):
        self.close_connection = True
        _hard_shutdown(self.connection)

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise _Abort()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline(3)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _record(self, status):
        with self.fake._lock:
            self.fake.requests.append((self.command, self.path, status))

    def _send(self, code, body, headers=None, content_type="application/json"):
        if isinstance(body, (dict, list)):
            data = (dumps(body) + "\n").encode()
        else:
            data = body.encode() if isinstance(body, str) else body
        # Logged before anything is written, so a test that has the response
        # always finds the request in .requests.
        self._record(code)
        self.send_response(code)
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Type", content_type)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_error(self, e):
        self._send(e.code, e.body, e.headers)

    # -- request flow -------------------------------------------------------

    def _dispatch(self):
        fake = self.fake
        try:
            body = self._read_body()
            if fake._refusing:
                raise _Abort()
            secs = fake._delay_for(self.path)
            if secs and fake._stop_evt.wait(secs):
                raise _Abort()          # stopped while delaying
            parts = urlsplit(self.path)
            # keep_blank_values: "resourceVersion=" or "fieldSelector=spec.nodeName=" matter
            q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
            self._authenticate(parts.path)
            fault = fake._take_fault(self.command, self.path)
            if fault is not None:
                raise fault
            self._route(parts.path, q, body)
        except APIError as e:
            self._safe(lambda: self._send_error(e))
        except _Abort:
            self._abort_connection()
        except (BrokenPipeError, ConnectionError, socket.timeout):
            self.close_connection = True
        except Exception as e:   # a bug here must not wedge the client: answer 500
            if fake.verbose:
                import traceback
                traceback.print_exc()
            self._safe(lambda: self._send_error(
                APIError(500, "Internal error occurred: %s" % e, "InternalError")))

    def _safe(self, fn):
        try:
            fn()
        except OSError:
            self.close_connection = True

    def _route(self, path, q, body):
        fake = self.fake
        if path in ("/healthz", "/livez", "/readyz"):
            return self._only("GET", lambda: self._send(
                200, "ok", content_type="text/plain; charset=utf-8"))
        if path == "/version":
            return self._only("GET", lambda: self._send(200, {
                "major": "1", "minor": "31", "gitVersion": "v1.31.0-fake",
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean", "buildDate": "2024-08-13T00:00:00Z",
                "goVersion": "go1.22.5", "compiler": "gc", "platform": "linux/amd64"}))
        segs = [unquote(s) for s in path.split("/") if s]
        if segs[:2] == ["api", "v1"]:
            group, rest, served = "", segs[2:], True
        elif segs[:1] == ["apis"] and len(segs) >= 3:
            # The request's attributes come from the path alone (RequestInfoFactory),
            # whether or not the group is served.
            group, rest = segs[1], segs[3:]
            served = ((segs[1:3] == [PODGROUP_GROUP, PODGROUP_VERSION] and fake.podgroups_crd)
                      or (segs[1:3] == [AUTHZ_GROUP, "v1"] and fake.serve_access_reviews)
                      or (segs[1:3] == [AUTHN_GROUP, "v1"] and fake.serve_access_reviews)
                      or segs[1:3] == [EVENTS_GROUP, EVENTS_VERSION])
        else:
            raise err_resource_not_found()
        ns = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise err_resource_not_found()
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        self._authorize(group, resource, sub, ns, name, q)
        if not served:
            raise err_resource_not_found()

        if group == AUTHZ_GROUP:
            if resource == "selfsubjectaccessreviews" and ns is None and name is None:
                return self._only("POST", lambda: self._access_review(body))
            if resource == "subjectaccessreviews" and ns is None and name is None:
                return self._only("POST", lambda: self._subject_access_review(body))
            raise err_resource_not_found()
        if group == AUTHN_GROUP:
            if resource == "tokenreviews" and ns is None and name is None:
                return self._only("POST", lambda: self._token_review(body))
            raise err_resource_not_found()
        if group == EVENTS_GROUP:
            return self._events(ns, resource, name, sub, body)
        if group == "" and resource == "bindings" and ns and name is None:
            return self._only("POST", lambda: self._binding(ns, None, body))
        info = KINDS.get(resource)
        if info is None or info.group != group or (ns and not info.namespaced):
            raise err_resource_not_found()
        if name is None:
            if self.command == "GET":
                return self._list_or_watch(info, ns, None, q)
            if self.command == "POST" and (ns or not info.namespaced):
                return self._create(info, ns, body)
            raise APIError(405, MSG_METHOD_NOT_ALLOWED, "MethodNotAllowed", {})
        if info.namespaced and not ns:
            raise err_resource_not_found()
        if sub is None or sub == "status":
            if self.command == "GET":
                if sub is None and _parse_bool(q, "watch"):
                    return self._list_or_watch(info, ns, name, q)
                return self._get(info, ns, name)
            if self.command in ("PUT", "PATCH"):
                return self._write(info, ns, name, sub, body)
            if self.command == "DELETE" and sub is None:
                return self._delete(info, ns, name, body)
            raise APIError(405, MSG_METHOD_NOT_ALLOWED, "MethodNotAllowed", {})
        if sub == "binding" and info.plural == "pods":
            return self._only("POST", lambda: self._binding(ns, name, body))
        raise err_resource_not_found()

    def _only(self, method, fn):
        if self.command != method and not (method == "GET" and self.command == "HEAD"):
            raise APIError(405, MSG_METHOD_NOT_ALLOWED, "MethodNotAllowed", {})
        return fn()

    # -- reads --------------------------------------------------------------

    def _get(self, info, ns, name):
        with self.fake._lock:
            obj = self.fake._objs[info.plural].get(self.fake._key(info, ns, name))
            if obj is None:
                raise err_not_found(info, name)
        self._send(200, obj)

    def _list_or_watch(self, info, ns, name, q):
        if _parse_bool(q, "watch"):
            return self._watch(info, ns, name, q)
        self._send(200, self.fake._list(info, ns, q))
