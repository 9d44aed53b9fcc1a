"""Who may do what on the fake API server: bearer-token, client-certificate
and anonymous authentication, the RBAC-like authorization filter that answers
403 before routing, and SelfSubjectAccessReview.

AccessRules is FakeAPIServer's side (deny/allow); AccessHandler the request
handler's (mixin of fake_http._Handler).
"""

import copy

from kube_api import (AUTHZ_API_VERSION, AUTHZ_GROUP, RBAC_ALLOWED, APIError, _goquote,
                      err_bad_request, err_forbidden, err_invalid)
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
