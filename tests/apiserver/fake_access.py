"""Who may do what on the fake API server: bearer-token, client-certificate
and anonymous authentication, the RBAC-like authorization filter that answers
403 before routing, and SelfSubjectAccessReview; and, for components that
delegate their own authentication and authorization to the API server (as
troupe's ops listener does), TokenReview and SubjectAccessReview of other
users: tokens a test registers with add_user(), non-resource paths it grants
with grant_path().

AccessRules is FakeAPIServer's side (deny/allow); AccessHandler the request
handler's (mixin of fake_http._Handler).
"""

import copy

from kube_api import (AUTHZ_API_VERSION, AUTHZ_GROUP, RBAC_ALLOWED, APIError, _goquote,
                      err_bad_request, err_forbidden, err_invalid)

AUTHN_GROUP = "authentication.k8s.io"
AUTHN_API_VERSION = AUTHN_GROUP + "/v1"
# What kube-apiserver (v1.37.2, service-account and bootstrap-token
# authenticators) says in a TokenReview of a token it did not issue, as
# tests/e2e/test_e2e_ops_auth.py sees it.
MSG_INVALID_TOKEN = "invalid bearer token"
# The audience kube-apiserver's service-account tokens carry by default.
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"


def _path_matches(rule, path):
    """rbac.NonResourceURLMatches: "*" is every path, "/x/*" every path
    under /x/, anything else the path itself."""
    return rule == "*" or rule == path or (rule.endswith("*") and path.startswith(rule[:-1]))
from kube_query import _parse_bool

class AccessRules:
    """Permissions a test takes away and gives back (mixin of FakeAPIServer)."""

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

    def add_user(self, token, username, groups=None, uid=None, extra=None):
        """Make <token> a valid bearer token of <username> for TokenReviews
        (only: requests to the fake itself still need self.token).  groups
        default to a service account's, ending with system:authenticated as
        kube-apiserver adds it."""
        if groups is None:
            groups = ["system:serviceaccounts", "system:authenticated"]
        user = {"username": username, "uid": uid or "uid-" + username, "groups": list(groups)}
        if extra:
            user["extra"] = {k: list(v) for k, v in extra.items()}
        with self._lock:
            self.users[token] = user

    def remove_user(self, token):
        """The token is no longer valid (deleted service account, expiry)."""
        with self._lock:
            self.users.pop(token, None)

    def grant_path(self, subject, path, verbs=("get",)):
        """A ClusterRole rule {nonResourceURLs: [path], verbs} bound to
        <subject> (a user name or a group name), as SubjectAccessReviews see it."""
        with self._lock:
            self.path_rules.append((subject, path, tuple(verbs)))

    def revoke_paths(self, subject):
        """Remove every rule granted to <subject>."""
        with self._lock:
            self.path_rules = [r for r in self.path_rules if r[0] != subject]

class AccessHandler:
    """Authentication, authorization and access reviews (mixin of the handler)."""

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

    def _token_review(self, body):
        """POST tokenreviews (pkg/registry/authentication/tokenreview): 400
        without spec.token; else 201 with status.authenticated and the user,
        or only status.user {} and the authenticators' error.  Never stored."""
        fake = self.fake
        review = self._json_body(body, "TokenReview")
        self._check_type(review, "TokenReview", AUTHN_API_VERSION)
        spec = review.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise err_bad_request("token is required for TokenReview in authentication")
        with fake._lock:
            fake.token_reviews.append(token)
            user = copy.deepcopy(fake.users.get(token))
        if user is None:
            status = {"user": {}, "error": MSG_INVALID_TOKEN}
        else:
            status = {"authenticated": True, "user": user,
                      "audiences": list(spec.get("audiences") or [API_AUDIENCE])}
        self._send(201, {"kind": "TokenReview", "apiVersion": AUTHN_API_VERSION,
                         "metadata": {"creationTimestamp": None}, "spec": spec,
                         "status": status})

    def _subject_access_review(self, body):
        """POST subjectaccessreviews (pkg/registry/authorization/
        subjectaccessreview): 422 unless exactly one of resourceAttributes and
        nonResourceAttributes and a user or groups; else 201 with
        status.allowed.  Non-resource paths are allowed by grant_path rules
        naming the user or one of its groups (RBAC gives no reason when none
        does); resource attributes are allowed unless review_denied has them."""
        fake = self.fake
        review = self._json_body(body, "SubjectAccessReview")
        self._check_type(review, "SubjectAccessReview", AUTHZ_API_VERSION)
        spec = review.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        attrs, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        causes = []
        if (attrs is None) == (non_resource is None):
            causes.append(("spec.nonResourceAttributes",
                           'Invalid value: "%s": exactly one of nonResourceAttributes or '
                           'resourceAttributes must be specified'
                           % ("null" if non_resource is None else "object")))
        user, groups = spec.get("user") or "", spec.get("groups") or []
        if not user and not groups:
            causes.append(("spec.user", 'Invalid value: "": at least one of user or group '
                           'must be specified'))
        if causes:
            raise err_invalid("SubjectAccessReview", AUTHZ_GROUP, "", causes)
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise err_bad_request("spec.groups must be a list of strings")
        with fake._lock:
            fake.subject_access_reviews.append(copy.deepcopy(spec))
            if non_resource is not None:
                if not isinstance(non_resource, dict):
                    raise err_bad_request("spec.nonResourceAttributes must be an object")
                path, verb = non_resource.get("path") or "", non_resource.get("verb") or ""
                rule = next((r for r in fake.path_rules
                             if (r[0] == user or r[0] in groups)
                             and _path_matches(r[1], path)
                             and ("*" in r[2] or verb in r[2])), None)
                allowed = rule is not None
            else:
                key = tuple(str(attrs.get(k) or "") for k in ("verb", "group", "resource",
                                                               "subresource"))
                rule, allowed = None, key not in fake.review_denied
        if not allowed:
            status = {"allowed": False}
        elif rule is not None:
            status = {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "%s" of '
                      'ClusterRole "%s" to %s %s' % (
                          "fake-path-rule", "fake-path-rule",
                          "User" if rule[0] == user else "Group", _goquote(rule[0]))}
        else:
            status = {"allowed": True, "reason": RBAC_ALLOWED}
        self._send(201, {"kind": "SubjectAccessReview", "apiVersion": AUTHZ_API_VERSION,
                         "metadata": {"creationTimestamp": None}, "spec": spec,
                         "status": status})
