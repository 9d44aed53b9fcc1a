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
"""

import argparse
import base64
import bisect
import copy
import json
import os
import random
import re
import select
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time
import uuid
from collections import namedtuple
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

PODGROUP_GROUP = "scheduling.x-k8s.io"
PODGROUP_VERSION = "v1alpha1"
PODGROUP_API_VERSION = PODGROUP_GROUP + "/" + PODGROUP_VERSION
AUTHZ_GROUP = "authorization.k8s.io"
AUTHZ_API_VERSION = AUTHZ_GROUP + "/v1"
# The user every token-authenticated request is (troupe's service account).
DEFAULT_USER = "system:serviceaccount:kube-system:troupe"
# What RBAC says when it allows (rbac.go's authorizingVisitor.String()).
RBAC_ALLOWED = ('RBAC: allowed by ClusterRoleBinding "troupe" of ClusterRole "troupe" to '
                'ServiceAccount "troupe/kube-system"')

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"

# Upstream texts (apiserver/pkg/storage/etcd3/store.go and errors.go).
MSG_LIST_EXPIRED = "The resourceVersion for the provided list is too old."
MSG_CONTINUE_EXPIRED = ("The provided continue parameter is too old to display a consistent "
                        "list result. You can start a new list without the continue parameter.")
MSG_CONTINUE_INCONSISTENT = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token "
    "in this response to retrieve the remainder of the results. Continuing with the "
    "provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may "
    "show up in the list.")
MSG_NOT_FOUND_RESOURCE = "the server could not find the requested resource"
MSG_METHOD_NOT_ALLOWED = "the server does not allow this method on the requested resource"
MSG_OBJECT_MODIFIED = ("the object has been modified; please apply your changes to the "
                       "latest version and try again")
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# storage.ErrCodeInvalidObj: a failed precondition is reported as this storage error.
STORAGE_ERR_INVALID_OBJ = 4

# Default reason per HTTP code (metav1.StatusReason*), used for injected faults.
REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
           413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
           504: "Timeout"}


# ---------------------------------------------------------------------------
# Kinds
# ---------------------------------------------------------------------------

class KindInfo(namedtuple("KindInfo", "plural kind list_kind api_version group namespaced "
                                      "builtin field_labels unconditional_update")):
    """What the server needs to know about one resource.

    builtin: list items omit kind/apiVersion (the typed list encoder only sets
    TypeMeta on the list); custom resources are unstructured and keep them.
    unconditional_update: PUT without metadata.resourceVersion is allowed
    (true for pods and nodes, false for custom resources).
    """

    @property
    def qualified(self):
        # schema.GroupResource.String(): "pods", "podgroups.scheduling.x-k8s.io"
        return self.plural + ("." + self.group if self.group else "")


def _get_path(obj, dotted, default=""):
    cur = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


def _bool_str(v):
    return "true" if v is True else "false"


# Field selectors each resource supports (pkg/registry/core/{pod,node}/strategy.go
# *ToSelectableFields; custom resources only metadata.name/namespace).
POD_FIELDS = {
    "metadata.name": lambda o: _get_path(o, "metadata.name"),
    "metadata.namespace": lambda o: _get_path(o, "metadata.namespace"),
    "spec.nodeName": lambda o: _get_path(o, "spec.nodeName"),
    "spec.restartPolicy": lambda o: _get_path(o, "spec.restartPolicy"),
    "spec.schedulerName": lambda o: _get_path(o, "spec.schedulerName"),
    "spec.serviceAccountName": lambda o: _get_path(o, "spec.serviceAccountName"),
    "spec.hostNetwork": lambda o: _bool_str(_get_path(o, "spec.hostNetwork", False)),
    "status.phase": lambda o: _get_path(o, "status.phase"),
    "status.podIP": lambda o: _get_path(o, "status.podIP"),
    "status.nominatedNodeName": lambda o: _get_path(o, "status.nominatedNodeName"),
}
NODE_FIELDS = {
    "metadata.name": lambda o: _get_path(o, "metadata.name"),
    "spec.unschedulable": lambda o: _bool_str(_get_path(o, "spec.unschedulable", False)),
}
CR_FIELDS = {
    "metadata.name": lambda o: _get_path(o, "metadata.name"),
    "metadata.namespace": lambda o: _get_path(o, "metadata.namespace"),
}

KINDS = {
    "nodes": KindInfo("nodes", "Node", "NodeList", "v1", "", False, True, NODE_FIELDS, True),
    "pods": KindInfo("pods", "Pod", "PodList", "v1", "", True, True, POD_FIELDS, True),
    "podgroups": KindInfo("podgroups", "PodGroup", "PodGroupList", PODGROUP_API_VERSION,
                          PODGROUP_GROUP, True, False, CR_FIELDS, False),
}
KIND_BY_NAME = {k.kind: k for k in KINDS.values()}
KIND_BY_LIST = {k.list_kind: k for k in KINDS.values()}


def _bookmark_object(info, rv, initial_end=False):
    """The object of a BOOKMARK event: an empty object of the watched kind that
    carries only the resourceVersion.  Built-in types are Go structs, so their
    zero values still serialise (creationTimestamp null, containers null, ...):
    this is what real servers send, and a client must cope with it."""
    meta = {"resourceVersion": str(rv)}
    if info.builtin:
        meta["creationTimestamp"] = None
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    obj = {"kind": info.kind, "apiVersion": info.api_version, "metadata": meta}
    if info.plural == "pods":
        obj["spec"] = {"containers": None}
        obj["status"] = {}
    elif info.plural == "nodes":
        obj["spec"] = {}
        obj["status"] = {
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {k: "" for k in (
                "machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion",
                "operatingSystem", "architecture")},
        }
    return obj


# ---------------------------------------------------------------------------
# Status errors (apimachinery/pkg/api/errors/errors.go)
# ---------------------------------------------------------------------------

def status_body(code, message, reason=None, details=None, status="Failure", list_meta=None):
    """A v1 Status with fields in Go struct order; empty fields are omitted."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": list_meta or {}, "status": status}
    if message:
        body["message"] = message
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


class APIError(Exception):
    """An error answered as a Status; headers go on the HTTP response."""

    def __init__(self, code, message, reason=None, details=None, headers=None, list_meta=None):
        super().__init__(message)
        self.code = code
        self.body = status_body(code, message, reason, details, list_meta=list_meta)
        self.headers = headers or {}


def _details(name=None, group=None, kind=None, **extra):
    d = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    if kind:
        d["kind"] = kind
    d.update({k: v for k, v in extra.items() if v is not None})
    return d


def err_bad_request(msg):
    return APIError(400, msg, "BadRequest")


def err_not_found(info, name):
    return APIError(404, "%s %s not found" % (info.qualified, _goquote(name)), "NotFound",
                    _details(name, info.group, info.plural))


def err_resource_not_found():
    # What the apiserver answers for a path no handler serves (and for a CRD that
    # is not installed): a NotFound Status with empty details.
    return APIError(404, MSG_NOT_FOUND_RESOURCE, "NotFound", {})


def err_already_exists(info, name):
    return APIError(409, "%s %s already exists" % (info.qualified, _goquote(name)),
                    "AlreadyExists", _details(name, info.group, info.plural))


def err_conflict(resource, group, name, msg):
    # errors.NewConflict(qualifiedResource, name, err)
    qualified = resource + ("." + group if group else "")
    return APIError(409, "Operation cannot be fulfilled on %s %s: %s"
                    % (qualified, _goquote(name), msg), "Conflict",
                    _details(name, group, resource))


def err_expired(msg, list_meta=None):
    return APIError(410, msg, "Expired", list_meta=list_meta)


def err_invalid(kind, group, name, causes):
    """errors.NewInvalid: 422, one cause per (field, "Type: detail") error."""
    qualified = kind + ("." + group if group else "")
    texts = ["%s: %s" % fm for fm in causes]
    text = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    cause_types = {"Forbidden": "FieldValueForbidden",
                   "Required value": "FieldValueRequired",
                   "Invalid value": "FieldValueInvalid",
                   "Unsupported value": "FieldValueNotSupported"}
    return APIError(422, "%s %s is invalid: %s" % (qualified, _goquote(name), text), "Invalid",
                    _details(name, group, kind, causes=[
                        {"reason": cause_types.get(m.split(":")[0], "FieldValueInvalid"),
                         "message": m, "field": f} for f, m in causes]))


def err_forbidden(user, verb, group, resource, subresource, ns, name):
    """responsewriters.Forbidden for a resource request: errors.NewForbidden on
    the group and resource (not the subresource) with forbiddenMessage."""
    res = resource + ("/" + subresource if subresource else "")
    where = ("in the namespace %s" % _goquote(ns)) if ns else "at the cluster scope"
    why = "User %s cannot %s resource %s in API group %s %s" % (
        _goquote(user), verb, _goquote(res), _goquote(group), where)
    qualified = resource + ("." + group if group else "")
    what = "%s %s" % (qualified, _goquote(name)) if name else qualified
    return APIError(403, "%s is forbidden: %s" % (what, why), "Forbidden",
                    _details(name, group, resource))


def err_untyped(msg):
    # A plain Go error reaching the handler: 500 with reason "" (StatusReasonUnknown).
    return APIError(500, msg)


def err_injected(code, message=None, retry_after=None):
    """The Status a real server would send for this code (used by fail_next)."""
    headers = {}
    details = None
    if code == 429:
        retry_after = 1 if retry_after is None else retry_after
        message = message or "Too many requests, please try again later."
    elif code == 500:
        cause = message or "injected fault"
        message = "Internal error occurred: " + cause
        details = {"causes": [{"message": cause}]}
    elif code == 504:
        message = "Timeout: " + (message or "request did not complete within the allotted timeout")
    else:
        message = message or "injected fault (HTTP %d)" % code
    if retry_after is not None:
        headers["Retry-After"] = str(int(retry_after))
        details = dict(details or {}, retryAfterSeconds=int(retry_after))
    return APIError(code, message, REASONS.get(code, ""), details, headers)


def _goquote(s):
    """Go's %q for the plain strings we quote."""
    return json.dumps(s, ensure_ascii=False)


# ---------------------------------------------------------------------------
# Selectors
# ---------------------------------------------------------------------------

# [DNS-subdomain prefix "/"] name
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _split_top(s):
    """Split on commas outside parentheses ("a in (x,y),b" -> two terms)."""
    out, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def parse_label_selector(s):
    """labels.Parse subset: k=v, k==v, k!=v, k, !k, k in (..), k notin (..)."""
    reqs = []
    if not s.strip():
        return reqs
    for term in _split_top(s):
        t = term.strip()
        m = re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", t)
        if m:
            key, op = m.group(1), m.group(2)
            vals = {v.strip() for v in m.group(3).split(",")}
            req = (op, key, vals)
        elif t.startswith("!"):
            key, vals = t[1:].strip(), None
            req = ("!", key, None)
        else:
            m = re.fullmatch(r"([^=!\s]+)\s*(==|!=|=)\s*(\S*)", t)
            if m:
                key, op, val = m.group(1), m.group(2), m.group(3)
                vals = {val}
                req = ("!=" if op == "!=" else "=", key, val)
            elif re.fullmatch(r"[^=!\s(),]+", t):
                key, vals = t, None
                req = ("exists", key, None)
            else:
                raise err_bad_request("unable to parse requirement: found '%s', expected: "
                                      "identifier" % t)
        if not _LABEL_KEY.match(key) or len(key.split("/")[-1]) > 63:
            raise err_bad_request("unable to parse requirement: <nil>: Invalid value: %s: "
                                  "name part must consist of alphanumeric characters, '-', "
                                  "'_' or '.'" % _goquote(key))
        for v in vals or ():
            if not _LABEL_VALUE.match(v) or len(v) > 63:
                raise err_bad_request("unable to parse requirement: values[0][%s]: Invalid "
                                      "value: %s: a valid label must be an empty string or "
                                      "consist of alphanumeric characters" % (key, _goquote(v)))
        reqs.append(req)
    return reqs


def label_match(reqs, obj):
    labels = _get_path(obj, "metadata.labels", None) or {}
    for op, key, val in reqs:
        have = key in labels
        if op == "=" and not (have and labels[key] == val):
            return False
        if op == "!=" and have and labels[key] == val:
            return False
        if op == "exists" and not have:
            return False
        if op == "!" and have:
            return False
        if op == "in" and not (have and labels[key] in val):
            return False
        if op == "notin" and have and labels[key] in val:
            return False
    return True


def parse_field_selector(s, info):
    """fields.ParseSelector: comma-AND of k=v, k==v, k!=v on supported fields."""
    reqs = []
    if not s.strip():
        return reqs
    for term in s.split(","):
        m = re.fullmatch(r"([^=!]+)(!=|==|=)(.*)", term)
        if not m:
            raise err_bad_request("invalid selector: '%s'; can't understand '%s'" % (s, term))
        field, op, val = m.group(1).strip(), m.group(2), m.group(3)
        if field not in info.field_labels:
            if info.builtin:
                raise err_bad_request("field label not supported: " + field)
            raise err_bad_request("%s is not a known field selector: only \"metadata.name\", "
                                  "\"metadata.namespace\"" % _goquote(field))
        reqs.append((field, op != "!=", val))
    return reqs


def field_match(reqs, info, obj):
    for field, equal, val in reqs:
        if (info.field_labels[field](obj) == val) != equal:
            return False
    return True


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def dumps(obj):
    # Go's encoding/json: compact, UTF-8 (no \u escapes for non-ASCII).
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes,
    anything else (arrays included) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def _parse_bool(q, name, default=False):
    """strconv.ParseBool, as the query-parameter converter uses it."""
    if name not in q:
        return default
    v = q[name]
    if v in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if v in ("0", "f", "F", "false", "FALSE", "False", ""):
        return False
    raise err_bad_request("%s: invalid value %s: strconv.ParseBool: parsing %s: invalid syntax"
                          % (name, _goquote(v), _goquote(v)))


def _parse_rv(value, what="resourceVersion"):
    try:
        rv = int(value)
        if rv < 0:
            raise ValueError
        return rv
    except ValueError:
        raise APIError(400, "invalid %s: %s" % (what, _goquote(value)), "BadRequest")


def encode_continue(rv, start_key):
    """storage.EncodeContinue: base64url (no padding) of JSON {v, rv, start}."""
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start_key},
                     separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_continue(token):
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        d = json.loads(raw)
        if d.get("v") != "meta.k8s.io/v1":
            raise ValueError("server does not recognize this encoded key")
        rv, start = int(d["rv"]), d["start"]
        if not isinstance(start, str) or not start or "/.." in "/" + start:
            raise ValueError("continue key is not valid")
        return rv, start
    except (ValueError, KeyError, TypeError) as e:
        raise err_bad_request("invalid continue token: %s" % e)


Event = namedtuple("Event", "rv type obj prev")   # obj: new state (DELETED: last state, new rv)


class _Watcher:
    def __init__(self, info, cursor, match):
        self.info = info
        self.cursor = cursor      # resourceVersion of the last change this stream has seen
        self.match = match        # obj -> bool (namespace, name and selectors)
        self.cut = None           # set by cut_watches()/stop(): ("abrupt", mid_event) or ("clean",)
        self.lagged = False       # history it still needed was forgotten


class _Fault:
    def __init__(self, count, path_contains, method, **kw):
        self.count = count
        self.path_contains = path_contains
        self.method = method
        self.kw = kw

    def matches(self, method, path):
        return ((self.path_contains is None or self.path_contains in path) and
                (self.method is None or self.method.upper() == method))


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------

class FakeAPIServer:
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

        self.requests = []   # (method, path_with_query, status)
        self.bindings = []   # every Binding body received (parsed JSON objects)
        self.tls_failures = []   # (client address, error text) of failed TLS handshakes
        self.x509_users = []     # subject CN of every request authenticated by client certificate
        self.access_reviews = []  # spec.resourceAttributes of every SelfSubjectAccessReview

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

    def deny(self, verb, resource, group="", subresource="", reviews=True, requests=True):
        """Take a permission away, as removing its RBAC rule does: reviews,
        SelfSubjectAccessReviews of it answer allowed: false; requests, the
        requests needing it (list, watch, create pods/binding, ...) get 403.
        Watches already open keep streaming, as they do on a real server."""
        key = (verb, group, resource, subresource)
        with self._lock:
            if reviews:
                self.review_denied.add(key)
            if requests:
                self.request_denied.add(key)

    def allow(self, verb, resource, group="", subresource=""):
        """Give a permission back (both for reviews and for requests)."""
        key = (verb, group, resource, subresource)
        with self._lock:
            self.review_denied.discard(key)
            self.request_denied.discard(key)

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


def _with_rv(obj, rv):
    obj = dict(obj)
    obj["metadata"] = dict(obj["metadata"], resourceVersion=str(rv))
    return obj


def _validate_list_options(q, watch):
    """metainternalversion validation.ValidateListOptions (422 Invalid)."""
    errs = []
    match = q.get("resourceVersionMatch", "")
    rv = q.get("resourceVersion", "")
    send_initial = q.get("sendInitialEvents")
    if send_initial is not None:
        if not watch:
            errs.append(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
        else:
            if match != "NotOlderThan":
                errs.append(("resourceVersionMatch", "Forbidden: sendInitialEvents requires "
                             "setting resourceVersionMatch to NotOlderThan"))
            if not _parse_bool(q, "allowWatchBookmarks") and _parse_bool(q, "sendInitialEvents"):
                errs.append(("allowWatchBookmarks", "Forbidden: sendInitialEvents requires "
                             "setting allowWatchBookmarks to true"))
    elif match:
        if watch:
            errs.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                         "for watch unless sendInitialEvents is provided"))
        elif match not in ("NotOlderThan", "Exact"):
            errs.append(("resourceVersionMatch", 'Unsupported value: %s: supported values: '
                         '"Exact", "NotOlderThan", ""' % _goquote(match)))
        elif not rv:
            errs.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                         "unless resourceVersion is provided"))
        elif q.get("continue"):
            errs.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                         "when continue is provided"))
        elif match == "Exact" and rv == "0":
            errs.append(("resourceVersionMatch", 'Forbidden: resourceVersionMatch "exact" is '
                         'forbidden for resourceVersion "0"'))
    if errs:
        raise err_invalid("ListOptions", "meta.k8s.io", "", errs)


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------

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


class _Handler(BaseHTTPRequestHandler):
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

    def _authenticate(self, path):
        fake = self.fake
        token = fake.token
        if token is None and not fake.client_ca:
            return
        if self.x509_user is not None:
            # kube-apiserver's union authenticator: a verified client
            # certificate is enough, whatever the Authorization header says.
            with fake._lock:
                fake.x509_users.append(self.x509_user)
            return
        auth = self.headers.get("Authorization")
        if auth is None and fake.anonymous_auth:
            if path in ("/healthz", "/livez", "/readyz", "/version"):
                return
            raise APIError(403, 'forbidden: User "system:anonymous" cannot %s path %s'
                           % (self.command.lower(), _goquote(path)), "Forbidden", {})
        if (token is None or not auth or auth[:7].lower() != "bearer "
                or auth[7:].strip() != token):
            raise APIError(401, "Unauthorized", "Unauthorized")

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
                      or (segs[1:3] == [AUTHZ_GROUP, "v1"] and fake.serve_access_reviews))
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
            raise err_resource_not_found()
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
            raise APIError(405, MSG_METHOD_NOT_ALLOWED, "MethodNotAllowed", {})
        if sub == "binding" and info.plural == "pods":
            return self._only("POST", lambda: self._binding(ns, name, body))
        raise err_resource_not_found()

    def _authorize(self, group, resource, sub, ns, name, q):
        """The authorization filter: 403 when the request's verb on its
        resource is in request_denied (endpoints/request/requestinfo.go verbs)."""
        fake = self.fake
        cmd = "GET" if self.command == "HEAD" else self.command
        if cmd == "GET":
            verb = "watch" if _parse_bool(q, "watch") else ("get" if name else "list")
        elif cmd == "DELETE" and not name:
            verb = "deletecollection"
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                    "DELETE": "delete"}.get(cmd, cmd.lower())
        with fake._lock:
            denied = (verb, group, resource, sub or "") in fake.request_denied
        if denied:
            user = self.x509_user if self.x509_user is not None else fake.user
            raise err_forbidden(user, verb, group, resource, sub, ns, name)

    def _access_review(self, body):
        """POST selfsubjectaccessreviews: answer for the requesting user, from
        review_denied; the review itself is created (201) and never stored."""
        fake = self.fake
        review = self._json_body(body, "SelfSubjectAccessReview")
        self._check_type(review, "SelfSubjectAccessReview", AUTHZ_API_VERSION)
        spec = review.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        attrs, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if attrs is not None and non_resource is not None:
            raise err_invalid("SelfSubjectAccessReview", AUTHZ_GROUP, "", [(
                "spec.nonResourceAttributes",
                "Invalid value: \"object\": cannot be specified in combination with "
                "resourceAttributes")])
        if attrs is None and non_resource is None:
            raise err_invalid("SelfSubjectAccessReview", AUTHZ_GROUP, "", [(
                "spec.resourceAttributes",
                "Invalid value: \"null\": exactly one of nonResourceAttributes or "
                "resourceAttributes must be specified")])
        allowed = True
        if attrs is not None:
            if not isinstance(attrs, dict):
                raise err_bad_request("spec.resourceAttributes must be an object")
            key = tuple(str(attrs.get(k) or "") for k in ("verb", "group", "resource",
                                                           "subresource"))
            with fake._lock:
                fake.access_reviews.append(copy.deepcopy(attrs))
                allowed = key not in fake.review_denied
        # RBAC gives no reason when nothing allows the request.
        status = {"allowed": True, "reason": RBAC_ALLOWED} if allowed else {"allowed": False}
        self._send(201, {"kind": "SelfSubjectAccessReview", "apiVersion": AUTHZ_API_VERSION,
                         "metadata": {"creationTimestamp": None}, "spec": spec,
                         "status": status})

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

    # -- writes -------------------------------------------------------------

    def _json_body(self, body, what):
        try:
            obj = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise err_bad_request("the object provided is unrecognized (must be of type %s): "
                                  "couldn't get version/kind; json parse error: %s (%s)"
                                  % (what, e, body[:64].decode("utf-8", "replace")))
        if not isinstance(obj, dict):
            raise err_bad_request("the object provided is unrecognized (must be of type %s): "
                                  "couldn't get version/kind; json parse error: json: cannot "
                                  "unmarshal %s into Go value of type struct"
                                  % (what, type(obj).__name__))
        return obj

    def _check_type(self, obj, kind, api_version):
        """The decoder refuses a body of another kind or group/version (400)."""
        if obj.get("apiVersion") not in (None, "", api_version):
            raise err_bad_request("the API version in the data (%s) does not match the expected "
                                  "API version (%s)" % (obj.get("apiVersion"), api_version))
        if obj.get("kind") not in (None, "", kind):
            raise err_bad_request("the object provided is unrecognized (must be of type %s): "
                                  "%s is not a %s" % (kind, _goquote(obj.get("kind")), kind))

    def _create(self, info, ns, body):
        fake = self.fake
        obj = self._json_body(body, info.kind)
        self._check_type(obj, info.kind, info.api_version)
        meta = obj.setdefault("metadata", {})
        if info.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise err_bad_request("the namespace of the provided object does not match the "
                                      "namespace sent on the request")
            meta["namespace"] = ns
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(
                random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        if not meta.get("name"):
            raise err_invalid(info.kind, info.group, "", [("metadata.name", "Required value: "
                              "name or generateName is required")])
        for k in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(k, None)
        if info.plural == "pods":
            # PrepareForCreate resets status; the pod starts Pending.
            obj["status"] = {"phase": "Pending"}
        with fake._lock:
            new = fake._normalise(info, obj)
            key = fake._key_of(info, new)
            if key in fake._objs[info.plural]:
                raise err_already_exists(info, meta["name"])
            new = fake._commit(info, ADDED, key, new)
        self._send(201, new)

    def _write(self, info, ns, name, sub, body):
        """PUT (replace) or PATCH (merge patch) of an object or its /status."""
        fake = self.fake
        if self.command == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype != "application/merge-patch+json":
                raise APIError(415, "the body of the request was in an unknown format - "
                               "accepted media types include: application/merge-patch+json",
                               "UnsupportedMediaType")
        obj = self._json_body(body, info.kind)
        with fake._lock:
            key = fake._key(info, ns, name)
            old = fake._objs[info.plural].get(key)
            if old is None:
                raise err_not_found(info, name)
            if self.command == "PATCH":
                new = merge_patch(old, obj)
                rv = (obj.get("metadata") or {}).get("resourceVersion")
            else:
                self._check_type(obj, info.kind, info.api_version)
                new = copy.deepcopy(obj)
                rv = (new.get("metadata") or {}).get("resourceVersion")
                if not rv and not info.unconditional_update:
                    raise err_invalid(info.kind, info.group, name, [(
                        "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update")])
            meta = new.setdefault("metadata", {})
            if meta.get("name", name) != name:
                raise err_bad_request("the name of the object (%s) does not match the name on "
                                      "the URL (%s)" % (meta.get("name"), name))
            if info.namespaced and meta.get("namespace", ns) != ns:
                raise err_bad_request("the namespace of the provided object does not match the "
                                      "namespace sent on the request")
            if rv and rv != old["metadata"]["resourceVersion"]:
                # Optimistic concurrency on metadata.resourceVersion.
                raise err_conflict(info.plural, info.group, name, MSG_OBJECT_MODIFIED)
            uid = meta.get("uid")
            if uid and uid != old["metadata"]["uid"]:
                raise err_conflict(info.plural, info.group, name,
                                   "Precondition failed: UID in precondition: %s, UID in object "
                                   "meta: %s" % (uid, old["metadata"]["uid"]))
            # All three kinds have a status subresource: the main resource
            # ignores status changes and /status ignores everything else.
            if sub == "status":
                status = new.get("status")
                new = copy.deepcopy(old)
                if status is None:
                    new.pop("status", None)
                else:
                    new["status"] = status
            elif "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
            for k in ("uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds"):
                if k in old["metadata"]:
                    new["metadata"][k] = old["metadata"][k]
                else:
                    new["metadata"].pop(k, None)
            new["metadata"]["name"] = name
            if info.namespaced:
                new["metadata"]["namespace"] = ns
            new = fake._normalise(info, new, old)
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            if new == old:
                result = old        # no-op writes do not bump the version (etcd3 store)
            else:
                result = fake._commit(info, MODIFIED, key, new)
        self._send(200, result)

    # -- binding ------------------------------------------------------------

    def _binding(self, ns, url_name, body):
        """POST pods/{name}/binding, or the legacy namespaces/{ns}/bindings (the
        name then comes from the body).  Mirrors BindingREST.Create."""
        fake = self.fake
        b = self._json_body(body, "Binding")
        with fake._lock:
            fake.bindings.append(copy.deepcopy(b))
        self._check_type(b, "Binding", "v1")
        meta = b.get("metadata") or {}
        if not isinstance(meta, dict):
            raise err_bad_request("metadata must be an object")
        bname = meta.get("name") or ""
        if meta.get("namespace") and meta["namespace"] != ns:
            raise err_bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
        name = bname if url_name is None else url_name
        if name != bname:
            raise err_bad_request("name in URL does not match name in Binding object")
        if not name:
            raise err_bad_request("Name parameter required.")
        target = b.get("target") or {}
        if not isinstance(target, dict):
            raise err_bad_request("target must be an object")
        errs = []
        # validation.ValidatePodBinding; its errors are returned untyped
        # (errs.ToAggregate()), which the apiserver turns into a 500.
        if target.get("kind") not in (None, "", "Node"):
            errs.append('target.kind: Unsupported value: %s: supported values: "Node", "<empty>"'
                        % _goquote(target.get("kind")))
        if not target.get("name"):
            errs.append("target.name: Required value")
        if errs:
            raise err_untyped(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")

        info = KINDS["pods"]
        with fake._lock:
            key = fake._key(info, ns, name)
            pod = fake._objs["pods"].get(key)
            if pod is None:
                raise err_not_found(info, name)
            # Preconditions fail inside storage (storage.Preconditions.Check), so
            # the text is the StorageError's and the Conflict is on "pods".
            for field, want, have in (("UID", meta.get("uid"), pod["metadata"]["uid"]),
                                      ("ResourceVersion", meta.get("resourceVersion"),
                                       pod["metadata"]["resourceVersion"])):
                if want and want != have:
                    raise err_conflict("pods", "", name, (
                        "StorageError: invalid object, Code: %d, Key: /registry/pods/%s/%s, "
                        "ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: %s in "
                        "precondition: %s, %s in object meta: %s")
                        % (STORAGE_ERR_INVALID_OBJ, ns, name, field, want, field, have))
            spec = pod.get("spec") or {}
            if pod["metadata"].get("deletionTimestamp"):
                raise err_conflict("pods/binding", "", name, "pod %s is being deleted, cannot "
                                   "be assigned to a host" % name)
            if spec.get("nodeName"):
                raise err_conflict("pods/binding", "", name, "pod %s is already assigned to "
                                   "node %s" % (name, _goquote(spec["nodeName"])))
            if spec.get("schedulingGates"):
                raise err_conflict("pods/binding", "", name,
                                   "pod %s has non-empty .spec.schedulingGates" % name)
            new = copy.deepcopy(pod)
            new.setdefault("spec", {})["nodeName"] = target["name"]
            ann = new["metadata"].get("annotations") or {}
            ann.update(meta.get("annotations") or {})
            new["metadata"]["annotations"] = ann
            _set_pod_scheduled(new)
            fake._commit(info, MODIFIED, key, new)
        self._send(201, status_body(201, None, status="Success"))


def _set_pod_scheduled(pod):
    """podutil.UpdatePodCondition(PodScheduled=True): replace the condition,
    keeping lastTransitionTime when the status did not change."""
    status = pod.setdefault("status", {})
    conds = status.setdefault("conditions", [])
    cond = {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339()}
    for i, c in enumerate(conds):
        if c.get("type") == "PodScheduled":
            if c.get("status") == "True" and c.get("lastTransitionTime"):
                cond["lastTransitionTime"] = c["lastTransitionTime"]
            conds[i] = cond
            return
    conds.append(cond)


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
