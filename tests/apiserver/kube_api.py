"""What the fake API server's clients see of the Kubernetes API: the served
groups and kinds, their field selectors, the upstream message texts and the v1
Status errors, as apimachinery/pkg/api/errors/errors.go builds them.

Kept apart from fake_apiserver.py so the server's store, list/watch and write
paths share one definition of each kind and each error body; none of it holds
state.
"""

import json
from collections import namedtuple

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
